-- name: SendInsert :one
-- A send record, and when count is true the send's `sent` in the metrics
-- counters (schema 0011, internal/metrics) in the same statement: the
-- tenant's UTC day and the template's (and sequence's) UTC month of
-- sent_at, on the transaction's shard, in metrics.Count's row order (tenant,
-- sequence, template). One statement rather than two: this runs in every
-- send's transaction, and the round trip was most of what counting cost.
WITH s AS (
    INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version,
                       sequence_id, step_id, scheduled_send_id, from_address, to_address, subject, sent_at)
    VALUES (@tenant_id, @id, @message_id, @contact_id, @template_id, @template_version,
            @sequence_id, @step_id, @scheduled_send_id, @from_address, @to_address, @subject, @sent_at)
    RETURNING *
), counted AS (
    INSERT INTO metric_counts AS m (tenant_id, scope, scope_id, period, shard, sent, updated_at)
    SELECT s.tenant_id, k.scope, k.scope_id,
        CASE WHEN k.scope = 'tenant' THEN (s.sent_at AT TIME ZONE 'UTC')::date
             ELSE date_trunc('month', s.sent_at AT TIME ZONE 'UTC')::date END,
        (pg_current_xact_id()::text::bigint % 16)::smallint, 1, now()
    FROM s CROSS JOIN LATERAL (VALUES (1, 'tenant', ''), (2, 'sequence', s.sequence_id), (3, 'template', s.template_id))
        AS k(ord, scope, scope_id)
    WHERE @count::boolean AND k.scope_id IS NOT NULL
    ORDER BY k.ord
    ON CONFLICT (tenant_id, scope, scope_id, period, shard) DO UPDATE SET
        sent = m.sent + 1, updated_at = greatest(m.updated_at, EXCLUDED.updated_at)
)
SELECT * FROM s;

-- name: SendGet :one
SELECT * FROM sends WHERE tenant_id = @tenant_id AND id = @id;

-- name: SendGetForUpdate :one
-- Locks the send while an outcome is applied, so two webhook events of one
-- send (or a webhook and a tracking hit) apply one after the other.
SELECT * FROM sends WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: SendUpdateOutcome :exec
UPDATE sends SET delivery_status = @delivery_status, bounce_type = @bounce_type,
    delivered_at = @delivered_at, opened_at = @opened_at, clicked_at = @clicked_at,
    bounced_at = @bounced_at, complained_at = @complained_at, rejected_at = @rejected_at,
    open_count = @open_count, click_count = @click_count
WHERE tenant_id = @tenant_id AND id = @id;

-- Lists: each query is driven by one index range (the first filter present
-- in the order contact, sequence, template, status, none); the remaining
-- filters are checked on the rows of that range. Bounds: (sent_at, id) below
-- the cursor or the inclusive `to`, sent_at at or after `from`.

-- name: SendList :many
SELECT * FROM sends
WHERE tenant_id = @tenant_id
  AND (sent_at, id) < (@before_time::timestamptz, @before_id::text) AND sent_at >= @from_time::timestamptz
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendListByContact :many
SELECT * FROM sends
WHERE tenant_id = @tenant_id AND contact_id = @contact_id
  AND (sent_at, id) < (@before_time::timestamptz, @before_id::text) AND sent_at >= @from_time::timestamptz
  AND (sqlc.narg(sequence_id)::text IS NULL OR sequence_id = sqlc.narg(sequence_id))
  AND (sqlc.narg(template_id)::text IS NULL OR template_id = sqlc.narg(template_id))
  AND (sqlc.narg(status)::text IS NULL OR delivery_status = sqlc.narg(status))
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendListBySequence :many
SELECT * FROM sends
WHERE tenant_id = @tenant_id AND sequence_id = @sequence_id
  AND (sent_at, id) < (@before_time::timestamptz, @before_id::text) AND sent_at >= @from_time::timestamptz
  AND (sqlc.narg(template_id)::text IS NULL OR template_id = sqlc.narg(template_id))
  AND (sqlc.narg(status)::text IS NULL OR delivery_status = sqlc.narg(status))
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendListByTemplate :many
SELECT * FROM sends
WHERE tenant_id = @tenant_id AND template_id = @template_id
  AND (sent_at, id) < (@before_time::timestamptz, @before_id::text) AND sent_at >= @from_time::timestamptz
  AND (sqlc.narg(status)::text IS NULL OR delivery_status = sqlc.narg(status))
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendListByStatus :many
SELECT * FROM sends
WHERE tenant_id = @tenant_id AND delivery_status = @status
  AND (sent_at, id) < (@before_time::timestamptz, @before_id::text) AND sent_at >= @from_time::timestamptz
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendLockMany :many
-- Locks the sends a batch of outcomes touches, in key order, so two
-- batches (or a batch and a tracking hit) sharing sends wait for each other
-- instead of deadlocking. Keys that match nothing are simply absent.
SELECT s.* FROM sends s
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ids::text[]) AS id) k
  ON s.tenant_id = k.tenant_id AND s.id = k.id
ORDER BY s.tenant_id, s.id
FOR UPDATE OF s;

-- name: SendUpdateOutcomes :exec
-- Writes the outcome columns of many sends in one statement; rows is a
-- JSON array of objects with the columns below (one per send).
UPDATE sends s SET delivery_status = r.delivery_status, bounce_type = r.bounce_type,
    delivered_at = r.delivered_at, opened_at = r.opened_at, clicked_at = r.clicked_at,
    bounced_at = r.bounced_at, complained_at = r.complained_at, rejected_at = r.rejected_at,
    open_count = r.open_count, click_count = r.click_count
FROM jsonb_to_recordset(@rows::jsonb) AS r(tenant_id text, id text, delivery_status text, bounce_type text,
    delivered_at timestamptz, opened_at timestamptz, clicked_at timestamptz, bounced_at timestamptz,
    complained_at timestamptz, rejected_at timestamptz, open_count integer, click_count integer)
WHERE s.tenant_id = r.tenant_id AND s.id = r.id;
