-- The batch pipeline of scheduled sends (engine.Runner.Dispatch,
-- docs/decisions.md "Sequences: engine"): claim N due rows in one
-- statement, read what their checks need in one, record their messages in
-- one, and after the provider's answers settle them, mark them sent and move
-- their enrolments on in a fixed number of statements per batch. Every
-- statement takes tenant ids with its row ids; rows are locked in the lock
-- order of docs/decisions.md (sends, contacts, enrolments, scheduled sends),
-- each kind in key order.

-- name: DispatchClaim :many
-- Claims up to lim due rows, oldest first, skipping rows another worker
-- holds. Rows of a disabled sequence or of a paused tenant wait (ADDENDUM
-- 6). sent_id is the send already recorded for the row ("" for none).
WITH due AS (
    SELECT ss.tenant_id, ss.id FROM scheduled_sends ss
    JOIN tenants t ON t.id = ss.tenant_id
    LEFT JOIN sequences sq ON sq.tenant_id = ss.tenant_id AND sq.id = ss.sequence_id
    WHERE ss.status IN ('pending', 'failed') AND ss.scheduled_for <= now()
      AND sq.enabled IS NOT FALSE AND t.sending_status <> 'paused'
    ORDER BY ss.scheduled_for
    LIMIT @lim
    FOR UPDATE OF ss SKIP LOCKED
)
UPDATE scheduled_sends ss SET status = 'claimed', claimed_at = now(), attempts = ss.attempts + 1, updated_at = now()
FROM due
WHERE ss.tenant_id = due.tenant_id AND ss.id = due.id
RETURNING sqlc.embed(ss),
    coalesce((SELECT s.id FROM sends s WHERE s.tenant_id = ss.tenant_id AND s.scheduled_send_id = ss.id), ss.send_id, '')::text AS sent_id;

-- name: DispatchContext :many
-- ScheduledSendStepContext for many enrolments at once (unlocked).
SELECT sqlc.embed(e), sqlc.embed(c), sqlc.embed(t),
    sq.enabled AS seq_enabled, sq.version AS seq_version, sq.definition AS seq_definition, sq.name AS seq_name,
    ev.name AS event_name, ev.properties AS event_properties, ev.occurred_at AS event_occurred_at
FROM (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@enrolment_ids::text[]) AS id) k
JOIN enrolments e ON e.tenant_id = k.tenant_id AND e.id = k.id
JOIN contacts c ON c.tenant_id = e.tenant_id AND c.id = e.contact_id
JOIN tenants t ON t.id = e.tenant_id
LEFT JOIN sequences sq ON sq.tenant_id = e.tenant_id AND sq.id = e.sequence_id
LEFT JOIN events ev ON ev.tenant_id = e.tenant_id AND ev.id = e.trigger_event_id;

-- name: SendInsertMany :many
-- SendInsert for a batch: batch is a JSON array of objects with the columns
-- below; every record is born sending and in doubt. A row whose message has
-- a record already (the unique index of its scheduled send or broadcast
-- recipient) is not written and not returned: that row's conflict alone,
-- never the batch's. A sequence step's row is written only while its
-- scheduled send is claimed with no record (SendInsert's gate: the rows
-- are locked in key order and name their records in this statement), so a
-- step cancelled before its record gets none. Returns the ids written.
WITH open AS (
    SELECT ss.tenant_id, ss.id FROM scheduled_sends ss
    JOIN jsonb_to_recordset(@batch::jsonb) AS k(tenant_id text, scheduled_send_id text)
      ON ss.tenant_id = k.tenant_id AND ss.id = k.scheduled_send_id
    WHERE ss.status = 'claimed' AND ss.send_id IS NULL
    ORDER BY ss.tenant_id, ss.id
    FOR UPDATE OF ss
), gate AS (
    UPDATE scheduled_sends ss SET send_id = g.id, updated_at = now()
    FROM open, jsonb_to_recordset(@batch::jsonb) AS g(tenant_id text, id text, scheduled_send_id text)
    WHERE ss.tenant_id = open.tenant_id AND ss.id = open.id AND g.tenant_id = ss.tenant_id AND g.scheduled_send_id = ss.id
    RETURNING ss.tenant_id, ss.id
)
INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version,
                   sequence_id, step_id, scheduled_send_id, broadcast_id, from_address, to_address, subject, sent_at,
                   sending, in_doubt, locale, provider)
SELECT r.tenant_id, r.id, '', r.contact_id, r.template_id, r.template_version,
       r.sequence_id, r.step_id, r.scheduled_send_id, r.broadcast_id, r.from_address, r.to_address, r.subject,
       r.sent_at, true, true, r.locale, r.provider
FROM jsonb_to_recordset(@batch::jsonb) AS r(tenant_id text, id text, contact_id text, template_id text,
        template_version integer, sequence_id text, step_id text, scheduled_send_id text, broadcast_id text,
        from_address text, to_address text, subject text, sent_at timestamptz, locale text, provider text)
WHERE r.scheduled_send_id IS NULL
   OR EXISTS (SELECT 1 FROM gate WHERE gate.tenant_id = r.tenant_id AND gate.id = r.scheduled_send_id)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: SendDeleteMany :exec
-- (The scheduled sends naming them stop naming them: see SendDelete.)
-- SendDelete for a batch of refused messages.
WITH gone AS (
    DELETE FROM sends s
    USING (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ids::text[]) AS id) k
    WHERE s.tenant_id = k.tenant_id AND s.id = k.id AND s.sending
    RETURNING s.tenant_id, s.id, s.scheduled_send_id
)
UPDATE scheduled_sends ss SET send_id = NULL, updated_at = now()
FROM gone
WHERE ss.tenant_id = gone.tenant_id AND ss.id = gone.scheduled_send_id AND ss.send_id = gone.id;

-- name: SendSettleMany :many
-- The provider answered (accepted: in_doubt false, with its message id) or
-- did not (in_doubt stays true): the records stop `sending`. batch holds
-- {tenant_id, id, message_id, in_doubt}; one send or a batch.
-- The records are locked in key order first, so two settlers (or a
-- settler and a webhook batch, which locks sends the same way) wait for
-- each other instead of deadlocking. Only records still sending settle
-- (an event may have settled the doubt meanwhile: in_doubt only goes from
-- true to false), and when count is true they are counted `sent` in the
-- metrics in the same statement (schema 0011): the tenant's UTC day and
-- the template's and sequence's UTC month of sent_at, on the
-- transaction's shard, in metrics.Count's row order.
WITH locked AS (
    SELECT s.tenant_id, s.id FROM sends s
    JOIN jsonb_to_recordset(@batch::jsonb) AS r(tenant_id text, id text, message_id text, in_doubt boolean)
      ON s.tenant_id = r.tenant_id AND s.id = r.id
    WHERE s.sending
    ORDER BY s.tenant_id, s.id
    FOR UPDATE OF s
), u AS (
    UPDATE sends s SET sending = false, in_doubt = s.in_doubt AND r.in_doubt,
        message_id = CASE WHEN r.message_id <> '' THEN r.message_id ELSE s.message_id END
    FROM jsonb_to_recordset(@batch::jsonb) AS r(tenant_id text, id text, message_id text, in_doubt boolean), locked
    WHERE s.tenant_id = r.tenant_id AND s.id = r.id AND locked.tenant_id = s.tenant_id AND locked.id = s.id
    RETURNING s.*
), counted AS (
    INSERT INTO metric_counts AS m (tenant_id, scope, scope_id, period, shard, sent, updated_at)
    SELECT u.tenant_id, k.scope, k.scope_id,
        CASE WHEN k.scope = 'tenant' THEN (u.sent_at AT TIME ZONE 'UTC')::date
             ELSE date_trunc('month', u.sent_at AT TIME ZONE 'UTC')::date END,
        (pg_current_xact_id()::text::bigint % 16)::smallint, count(*), now()
    FROM u CROSS JOIN LATERAL (VALUES (1, 'tenant', ''), (2, 'sequence', u.sequence_id), (3, 'template', u.template_id),
        (4, 'broadcast', u.broadcast_id))
        AS k(ord, scope, scope_id)
    WHERE @count::boolean AND k.scope_id IS NOT NULL
    GROUP BY u.tenant_id, k.ord, k.scope, k.scope_id, 4
    ORDER BY u.tenant_id, k.ord, k.scope_id, 4
    ON CONFLICT (tenant_id, scope, scope_id, period, shard) DO UPDATE SET
        sent = m.sent + EXCLUDED.sent, updated_at = greatest(m.updated_at, EXCLUDED.updated_at)
)
SELECT * FROM u;

-- name: DispatchEnrolmentsLock :many
-- The enrolments of sent steps, locked in key order, with their sequence's
-- version and definition (null when deleted): EnrolmentForAdvance for a
-- batch.
SELECT sqlc.embed(e), sq.version AS seq_version, sq.definition AS seq_definition
FROM enrolments e
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ids::text[]) AS id) k
  ON e.tenant_id = k.tenant_id AND e.id = k.id
LEFT JOIN sequences sq ON sq.tenant_id = e.tenant_id AND sq.id = e.sequence_id
ORDER BY e.tenant_id, e.id
FOR UPDATE OF e;

-- name: DispatchMarkSent :many
-- ScheduledSendMarkSent for a batch: batch holds {tenant_id, id, send_id}.
-- Returns, for each row that was not sent yet, the status and finish time
-- it had, so a cancellation counted in the metrics can be taken back.
WITH was AS (
    SELECT s0.tenant_id, s0.id, s0.status, s0.finished_at, s0.sequence_id, s0.template_id FROM scheduled_sends s0
    JOIN jsonb_to_recordset(@batch::jsonb) AS r(tenant_id text, id text, send_id text)
      ON s0.tenant_id = r.tenant_id AND s0.id = r.id
    WHERE s0.status <> 'sent'
    ORDER BY s0.tenant_id, s0.id
    FOR UPDATE OF s0
)
UPDATE scheduled_sends ss SET status = 'sent', send_id = r.send_id, cancel_reason = NULL, last_error = NULL, held_by = NULL,
    finished_at = now(), updated_at = now()
FROM was, jsonb_to_recordset(@batch::jsonb) AS r(tenant_id text, id text, send_id text)
WHERE ss.tenant_id = was.tenant_id AND ss.id = was.id AND r.tenant_id = ss.tenant_id AND r.id = ss.id
RETURNING ss.tenant_id, ss.id, was.status AS was_status, was.finished_at AS was_finished_at,
    was.sequence_id, was.template_id;

-- name: DispatchAdvance :exec
-- EnrolmentAdvance for a batch: rows holds {tenant_id, id, current_step,
-- current_step_index}; only active enrolments move.
UPDATE enrolments e SET current_step = r.current_step, current_step_index = r.current_step_index, updated_at = now()
FROM jsonb_to_recordset(@rows::jsonb) AS r(tenant_id text, id text, current_step text, current_step_index integer)
WHERE e.tenant_id = r.tenant_id AND e.id = r.id AND e.status = 'active';

-- name: DispatchComplete :exec
-- Completes a batch of active enrolments after their last email step, at
-- that step, with their sequence_completed timeline entries. rows holds
-- {tenant_id, id, current_step, current_step_index}.
WITH ended AS (
    UPDATE enrolments e SET status = 'completed', current_step = r.current_step,
        current_step_index = r.current_step_index, ended_at = now(), updated_at = now()
    FROM jsonb_to_recordset(@rows::jsonb) AS r(tenant_id text, id text, current_step text, current_step_index integer)
    WHERE e.tenant_id = r.tenant_id AND e.id = r.id AND e.status = 'active'
    RETURNING e.*
)
INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
SELECT e.tenant_id, 'tle_' || e.id || ':completed', e.contact_id, 'sequence_completed', now(),
    jsonb_build_object('sequenceId', e.sequence_id, 'enrolmentId', e.id)
FROM ended e
ON CONFLICT DO NOTHING;

-- name: DispatchSchedule :many
-- ScheduledSendInsert for the next steps of a batch (many contacts); batch
-- holds one object per send. Each row is its scheduled timeline entry, as
-- there.
INSERT INTO scheduled_sends (tenant_id, id, contact_id, enrolment_id, sequence_id, sequence_version, step_id,
    template_id, scheduled_for, first_scheduled_for)
SELECT u.tenant_id, u.id, u.contact_id, u.enrolment_id, u.sequence_id, u.sequence_version, u.step_id, u.template_id,
    f.at, f.at
FROM jsonb_to_recordset(@batch::jsonb) AS u(tenant_id text, id text, contact_id text, enrolment_id text,
    sequence_id text, sequence_version integer, step_id text, template_id text, delay_seconds float8)
CROSS JOIN LATERAL (SELECT date_trunc('milliseconds', now() + make_interval(secs => u.delay_seconds)) AS at) f
RETURNING *;

-- name: DispatchOpenWithExit :many
-- The active enrolments of these contacts whose sequence has an exit
-- condition, locked: the only ones a system event can end. Most sends'
-- contacts have none, and this one read says so for a whole batch.
SELECT e.* FROM enrolments e
JOIN sequences sq ON sq.tenant_id = e.tenant_id AND sq.id = e.sequence_id
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@contact_ids::text[]) AS contact_id) k
  ON e.tenant_id = k.tenant_id AND e.contact_id = k.contact_id
WHERE e.status = 'active' AND sq.definition ? 'exit' AND sq.definition->'exit' <> 'null'::jsonb
ORDER BY e.tenant_id, e.id
FOR UPDATE OF e;

-- name: SendsStillSending :many
-- Which of these records exist and are still `sending`: a record write
-- whose answer was lost with its connection (delivery.committedAnyway).
SELECT s.id FROM sends s
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ids::text[]) AS id) k
  ON s.tenant_id = k.tenant_id AND s.id = k.id
WHERE s.sending;
