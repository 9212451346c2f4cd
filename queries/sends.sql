-- name: SendInsert :one
-- The ledger's first write (schema 0013): a send's record before the
-- provider is called, `sending` and `in_doubt` until the provider answers
-- (SendSettleMany, SendDelete). Its id travels with the message as custom_arg
-- send_id, so whatever happens next, the message has its record.
-- A sequence step's record is written only while its scheduled send is
-- claimed with no record yet, and names itself in the row (send_id) in the
-- same statement: the row's lock is what a cancel takes too, so of a
-- cancel and the record one wins whole (the cancels leave a claimed row
-- naming a record; a row cancelled first gets no record: no row returned).
WITH gate AS (
    UPDATE scheduled_sends ss SET send_id = @id, updated_at = now()
    WHERE ss.tenant_id = @tenant_id AND ss.id = sqlc.narg(scheduled_send_id)::text
      AND ss.status = 'claimed' AND ss.send_id IS NULL
    RETURNING ss.id
)
INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version,
                   sequence_id, step_id, scheduled_send_id, broadcast_id, from_address, to_address, subject, sent_at,
                   sending, in_doubt, locale, provider)
SELECT @tenant_id, @id, '', @contact_id, @template_id, @template_version,
        @sequence_id, @step_id, sqlc.narg(scheduled_send_id)::text, sqlc.narg(broadcast_id), @from_address, @to_address, @subject, @sent_at,
        true, true, sqlc.narg(locale), sqlc.narg(provider)
WHERE sqlc.narg(scheduled_send_id)::text IS NULL OR EXISTS (SELECT 1 FROM gate)
RETURNING *;

-- name: SendSetProvider :execrows
-- A failover (ADDENDUM 22): the record names the next provider before the
-- message is handed to it, so a process that dies during that call leaves
-- a record naming the provider that may have the message.
UPDATE sends SET provider = @provider WHERE tenant_id = @tenant_id AND id = @id AND sending;

-- name: SendDelete :one
-- The provider refused the message (or nothing reached it): its record
-- goes, unless it was settled meanwhile. A scheduled send that names it
-- (SendInsert's gate) stops naming it in the same statement: a row left
-- naming a deleted record would read as sent at its next claim, though
-- the message never left (a worker killed between this delete and the
-- row's finish did exactly that in a fault run).
WITH gone AS (
    DELETE FROM sends s WHERE s.tenant_id = @tenant_id AND s.id = @id AND s.sending
    RETURNING s.tenant_id, s.id, s.scheduled_send_id
), named AS (
    UPDATE scheduled_sends ss SET send_id = NULL, updated_at = now()
    FROM gone
    WHERE ss.tenant_id = gone.tenant_id AND ss.id = gone.scheduled_send_id AND ss.send_id = gone.id
)
SELECT count(*) FROM gone;

-- name: SendListSending :many
-- The ledger sweep: records still `sending` since before @before belong to
-- a process that died waiting for the provider; they are settled in doubt.
-- A sequence step's record is settled by its scheduled send's next claim,
-- with the step's mark, while that row is open (pending, claimed, failed);
-- one whose row is no longer open (finished by a path that could not
-- settle it, or pruned) is the sweep's too, or it would stay `sending`.
SELECT s.tenant_id, s.id, s.scheduled_send_id FROM sends s
WHERE s.sending AND s.sent_at < @before::timestamptz
  AND (s.scheduled_send_id IS NULL OR NOT EXISTS (
      SELECT 1 FROM scheduled_sends ss WHERE ss.tenant_id = s.tenant_id AND ss.id = s.scheduled_send_id
        AND ss.status IN ('pending', 'claimed', 'failed')))
ORDER BY s.sent_at LIMIT @lim;

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
  AND (NOT @in_doubt_only::boolean OR in_doubt)
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendListByContact :many
SELECT * FROM sends
WHERE tenant_id = @tenant_id AND contact_id = @contact_id
  AND (sent_at, id) < (@before_time::timestamptz, @before_id::text) AND sent_at >= @from_time::timestamptz
  AND (sqlc.narg(sequence_id)::text IS NULL OR sequence_id = sqlc.narg(sequence_id))
  AND (sqlc.narg(broadcast_id)::text IS NULL OR broadcast_id = sqlc.narg(broadcast_id))
  AND (sqlc.narg(template_id)::text IS NULL OR template_id = sqlc.narg(template_id))
  AND (sqlc.narg(status)::text IS NULL OR delivery_status = sqlc.narg(status))
  AND (NOT @in_doubt_only::boolean OR in_doubt)
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendListByBroadcast :many
-- The sequence filter has nothing to add: a broadcast's sends have none.
SELECT * FROM sends
WHERE tenant_id = @tenant_id AND broadcast_id = @broadcast_id
  AND (sent_at, id) < (@before_time::timestamptz, @before_id::text) AND sent_at >= @from_time::timestamptz
  AND (sqlc.narg(template_id)::text IS NULL OR template_id = sqlc.narg(template_id))
  AND (sqlc.narg(status)::text IS NULL OR delivery_status = sqlc.narg(status))
  AND (NOT @in_doubt_only::boolean OR in_doubt)
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendListBySequence :many
SELECT * FROM sends
WHERE tenant_id = @tenant_id AND sequence_id = @sequence_id
  AND (sent_at, id) < (@before_time::timestamptz, @before_id::text) AND sent_at >= @from_time::timestamptz
  AND (sqlc.narg(template_id)::text IS NULL OR template_id = sqlc.narg(template_id))
  AND (sqlc.narg(status)::text IS NULL OR delivery_status = sqlc.narg(status))
  AND (NOT @in_doubt_only::boolean OR in_doubt)
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendListByTemplate :many
SELECT * FROM sends
WHERE tenant_id = @tenant_id AND template_id = @template_id
  AND (sent_at, id) < (@before_time::timestamptz, @before_id::text) AND sent_at >= @from_time::timestamptz
  AND (sqlc.narg(status)::text IS NULL OR delivery_status = sqlc.narg(status))
  AND (NOT @in_doubt_only::boolean OR in_doubt)
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendListByStatus :many
SELECT * FROM sends
WHERE tenant_id = @tenant_id AND delivery_status = @status
  AND (sent_at, id) < (@before_time::timestamptz, @before_id::text) AND sent_at >= @from_time::timestamptz
  AND (NOT @in_doubt_only::boolean OR in_doubt)
ORDER BY sent_at DESC, id DESC
LIMIT @lim;

-- name: SendCountInDoubtSince :one
-- Every tenant's sends in doubt recorded since @since (the worker's
-- tidings_sends_in_doubt gauge); the partial index sends_in_doubt holds
-- only those rows.
SELECT count(*) FROM sends WHERE in_doubt AND sent_at >= @since::timestamptz;

-- name: SendListInDoubt :many
SELECT * FROM sends
WHERE tenant_id = @tenant_id AND in_doubt
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
UPDATE sends s SET delivery_status = r.delivery_status, bounce_type = r.bounce_type, in_doubt = r.in_doubt,
    delivered_at = r.delivered_at, opened_at = r.opened_at, clicked_at = r.clicked_at,
    bounced_at = r.bounced_at, complained_at = r.complained_at, rejected_at = r.rejected_at,
    open_count = r.open_count, click_count = r.click_count, hit_window_at = r.hit_window_at,
    hit_window_opens = r.hit_window_opens, hit_window_clicks = r.hit_window_clicks
FROM jsonb_to_recordset(@rows::jsonb) AS r(tenant_id text, id text, delivery_status text, bounce_type text,
    delivered_at timestamptz, opened_at timestamptz, clicked_at timestamptz, bounced_at timestamptz,
    complained_at timestamptz, rejected_at timestamptz, open_count integer, click_count integer, in_doubt boolean,
    hit_window_at timestamptz, hit_window_opens integer, hit_window_clicks integer)
WHERE s.tenant_id = r.tenant_id AND s.id = r.id;
