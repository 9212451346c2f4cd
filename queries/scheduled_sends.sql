-- Scheduled sends (schema 0010, ADDENDUM section 7): the row is the truth,
-- an asynq task with the row's id as task id is the timer. scheduled_for of
-- a failed row is the time of its next attempt.

-- name: ScheduledSendInsert :one
-- Due delay_seconds after now() on the database's clock, the clock the
-- claim compares with: a send due now is claimable the moment it commits.
-- Times are kept to the millisecond, the precision responses show, so
-- GET /api/scheduled/{id}?scheduledFor= matches what the list showed.
-- The row is also its scheduled timeline entry (schema 0033; see Timeline
-- in events.sql): first_scheduled_for keeps the time it shows.
INSERT INTO scheduled_sends (tenant_id, id, contact_id, enrolment_id, sequence_id, sequence_version, step_id,
    template_id, scheduled_for, first_scheduled_for)
SELECT @tenant_id, @id, @contact_id, @enrolment_id, @sequence_id, @sequence_version, @step_id,
    @template_id, f.at, f.at
FROM (SELECT date_trunc('milliseconds', now() + make_interval(secs => @delay_seconds::float8)) AS at) f
RETURNING *;

-- name: ScheduledSendClaim :one
-- A worker takes a due row; no row: another worker has it, or it is done.
-- sent_id is the send already recorded for the row (sends has a unique
-- index on scheduled_send_id): an earlier attempt whose message left but
-- whose worker stopped before marking the row ("" for none). The row's own
-- send_id names it too (SendInsert's gate), and still does when the record
-- went with its deleted contact.
UPDATE scheduled_sends ss SET status = 'claimed', claimed_at = now(), attempts = ss.attempts + 1, updated_at = now()
WHERE ss.tenant_id = @tenant_id AND ss.id = @id AND ss.status IN ('pending', 'failed') AND ss.scheduled_for <= now()
RETURNING sqlc.embed(ss),
    coalesce((SELECT s.id FROM sends s WHERE s.tenant_id = ss.tenant_id AND s.scheduled_send_id = ss.id), ss.send_id, '')::text AS sent_id;

-- name: ScheduledSendUntilDue :one
-- How long until a claimable row is due (negative: due), on the clock the
-- claim compares with. No row: nothing to wait for.
SELECT extract(epoch FROM scheduled_for - now())::float8 AS seconds FROM scheduled_sends
WHERE tenant_id = @tenant_id AND id = @id AND status IN ('pending', 'failed');

-- name: ScheduledSendStepContext :one
-- What the engine reads to decide a claimed send, in one round trip and
-- one snapshot: the enrolment, the contact, the tenant, the sequence (null
-- columns when it was deleted) and the event that enrolled the contact
-- (null columns for a manual enrolment). Nothing is locked: a decision
-- other than "send" is taken again under locks (engine.Runner.check).
SELECT sqlc.embed(e), sqlc.embed(c), sqlc.embed(t),
    sq.enabled AS seq_enabled, sq.version AS seq_version, sq.definition AS seq_definition, sq.name AS seq_name,
    ev.name AS event_name, ev.properties AS event_properties, ev.occurred_at AS event_occurred_at
FROM enrolments e
JOIN contacts c ON c.tenant_id = e.tenant_id AND c.id = e.contact_id
JOIN tenants t ON t.id = e.tenant_id
LEFT JOIN sequences sq ON sq.tenant_id = e.tenant_id AND sq.id = e.sequence_id
LEFT JOIN events ev ON ev.tenant_id = e.tenant_id AND ev.id = e.trigger_event_id
WHERE e.tenant_id = @tenant_id AND e.id = @enrolment_id;

-- name: ScheduledSendRelease :execrows
-- Gives a claimed row back untried (its sequence is disabled): pending, and
-- the claim was not an attempt.
UPDATE scheduled_sends SET status = 'pending', attempts = greatest(attempts - 1, 0), claimed_at = NULL, updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'claimed' AND claimed_at = @claimed_at;

-- name: ScheduledSendDefer :execrows
-- Gives a claimed row back untried to wait for its sequence's send window
-- (ADDENDUM 13), its contact's frequency cap, or a hold (held_by: a
-- destination throttle or a domain's warm-up): pending at @scheduled_for,
-- the claim not an attempt.
UPDATE scheduled_sends SET status = 'pending', attempts = greatest(attempts - 1, 0), claimed_at = NULL,
    scheduled_for = date_trunc('milliseconds', @scheduled_for::timestamptz), held_by = sqlc.narg(held_by)::text,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'claimed' AND claimed_at = @claimed_at;

-- name: ScheduledSendFinish :execrows
-- Ends this claim: failed (retry at scheduled_for), dead, or cancelled.
-- Nothing of the claim's message is left (refused: its record was deleted),
-- so the row no longer names it (send_id, set by SendInsert's gate).
UPDATE scheduled_sends SET status = @status::text, last_error = sqlc.narg(last_error)::text, send_id = NULL,
    cancel_reason = sqlc.narg(cancel_reason)::text,
    scheduled_for = coalesce(date_trunc('milliseconds', sqlc.narg(retry_at)::timestamptz), scheduled_for),
    finished_at = CASE WHEN @status::text IN ('cancelled', 'dead') THEN now() END, updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'claimed' AND claimed_at = @claimed_at;

-- name: ScheduledSendMarkSent :many
-- The message left: that is recorded whatever happened to the row
-- meanwhile (cancelled by an unsubscribe in flight, reclaimed by the sweep).
-- Returns the status and finish time the row had (no row: already sent),
-- so a cancellation counted in the metrics can be taken back.
WITH was AS (
    SELECT s0.id, s0.status, s0.finished_at FROM scheduled_sends s0
    WHERE s0.tenant_id = @tenant_id AND s0.id = @id AND s0.status <> 'sent'
    FOR UPDATE
)
UPDATE scheduled_sends ss SET status = 'sent', send_id = @send_id, cancel_reason = NULL, last_error = NULL, held_by = NULL,
    finished_at = now(), updated_at = now()
FROM was
WHERE ss.tenant_id = @tenant_id AND ss.id = was.id
RETURNING was.status AS was_status, was.finished_at AS was_finished_at;

-- name: ScheduledSendCancelByContact :many
-- Returns what metrics count of each row it cancelled. A claimed row that
-- names its message's record (send_id: SendInsert's gate) is left to its
-- worker: the provider has, or is getting, the message, and the row will
-- say sent (or failed, if refused) rather than a cancel it did not obey.
-- The gate and the cancel take the row's lock, and a cancel that waited
-- for the gate re-reads send_id, so one of the two wins whole.
UPDATE scheduled_sends SET status = 'cancelled', cancel_reason = @reason::text, finished_at = now(), updated_at = now()
WHERE tenant_id = @tenant_id AND contact_id = @contact_id AND status IN ('pending', 'claimed', 'failed')
  AND (status <> 'claimed' OR send_id IS NULL)
RETURNING sequence_id, template_id, finished_at;

-- name: ScheduledSendCancelByEnrolment :many
-- Returns what metrics count of each row it cancelled. A claimed row that
-- names its message's record (send_id: SendInsert's gate) is left to its
-- worker: the provider has, or is getting, the message, and the row will
-- say sent (or failed, if refused) rather than a cancel it did not obey.
-- The gate and the cancel take the row's lock, and a cancel that waited
-- for the gate re-reads send_id, so one of the two wins whole.
UPDATE scheduled_sends SET status = 'cancelled', cancel_reason = @reason::text, finished_at = now(), updated_at = now()
WHERE tenant_id = @tenant_id AND enrolment_id = @enrolment_id AND status IN ('pending', 'claimed', 'failed')
  AND (status <> 'claimed' OR send_id IS NULL)
RETURNING sequence_id, template_id, finished_at;

-- name: ScheduledSendEnrolmentsOffSteps :many
-- The enrolments of a sequence with a pending or failed send for a step
-- that is not among step_ids (the email steps of its new version).
SELECT DISTINCT enrolment_id FROM scheduled_sends
WHERE tenant_id = @tenant_id AND sequence_id = @sequence_id AND status IN ('pending', 'failed')
  AND NOT (step_id = ANY (@step_ids::text[]))
ORDER BY enrolment_id;

-- name: ScheduledSendCancelBySequence :many
-- Returns what metrics count of each row it cancelled. A claimed row that
-- names its message's record (send_id: SendInsert's gate) is left to its
-- worker: the provider has, or is getting, the message, and the row will
-- say sent (or failed, if refused) rather than a cancel it did not obey.
-- The gate and the cancel take the row's lock, and a cancel that waited
-- for the gate re-reads send_id, so one of the two wins whole.
UPDATE scheduled_sends SET status = 'cancelled', cancel_reason = @reason::text, finished_at = now(), updated_at = now()
WHERE tenant_id = @tenant_id AND sequence_id = @sequence_id AND status IN ('pending', 'claimed', 'failed')
  AND (status <> 'claimed' OR send_id IS NULL)
RETURNING sequence_id, template_id, finished_at;

-- name: ScheduledSendDueBySequence :many
-- The sequence's due rows, to enqueue when it is enabled again.
SELECT tenant_id, id, scheduled_for FROM scheduled_sends
WHERE tenant_id = @tenant_id AND sequence_id = @sequence_id AND status IN ('pending', 'failed')
  AND scheduled_for <= now();

-- name: ScheduledSendDue :many
-- The sweep: due rows, oldest first, a page after the row (after_for,
-- after_tenant, after_id) of the page before. Rows of a disabled sequence
-- or of a paused tenant wait (enabling or resuming releases them); a
-- deleted sequence's rows are cancelled with it, and any left over go
-- through the handler.
SELECT ss.tenant_id, ss.id, ss.scheduled_for FROM scheduled_sends ss
JOIN tenants t ON t.id = ss.tenant_id
LEFT JOIN sequences sq ON sq.tenant_id = ss.tenant_id AND sq.id = ss.sequence_id
WHERE ss.status IN ('pending', 'failed') AND ss.scheduled_for <= @now::timestamptz
  AND (ss.scheduled_for, ss.tenant_id, ss.id) > (@after_for::timestamptz, @after_tenant::text, @after_id::text)
  AND sq.enabled IS NOT FALSE AND t.sending_status <> 'paused'
ORDER BY ss.scheduled_for, ss.tenant_id, ss.id
LIMIT @lim;

-- name: ScheduledSendStaleLock :exec
-- The enrolments of claims older than stale_before, locked in key order
-- before the claims are taken back: the lock order of every writer is
-- enrolment, then its scheduled sends (docs/decisions.md "Lock order").
SELECT e.id FROM enrolments e
WHERE (e.tenant_id, e.id) IN (SELECT ss.tenant_id, ss.enrolment_id FROM scheduled_sends ss
                              WHERE ss.status = 'claimed' AND ss.claimed_at < @stale_before::timestamptz)
ORDER BY e.tenant_id, e.id
FOR UPDATE OF e;

-- name: ScheduledSendReclaim :many
-- Claims older than stale_before belong to a worker that died: failed and
-- due now, or dead when no attempt is left. A claim whose message has its
-- send record is never dead: its next claim finds the record and marks it
-- sent (the ledger: the message may have left, it is never sent again).
UPDATE scheduled_sends ss SET
    status = CASE WHEN ss.attempts >= @max_attempts::integer AND ss.send_id IS NULL AND NOT EXISTS (
        SELECT 1 FROM sends s WHERE s.tenant_id = ss.tenant_id AND s.scheduled_send_id = ss.id)
        THEN 'dead' ELSE 'failed' END,
    last_error = 'claim expired: the worker stopped before finishing the attempt',
    finished_at = CASE WHEN ss.attempts >= @max_attempts::integer AND ss.send_id IS NULL AND NOT EXISTS (
        SELECT 1 FROM sends s WHERE s.tenant_id = ss.tenant_id AND s.scheduled_send_id = ss.id)
        THEN now() END,
    scheduled_for = date_trunc('milliseconds', now()), updated_at = now()
WHERE ss.status = 'claimed' AND ss.claimed_at < @stale_before::timestamptz
RETURNING ss.tenant_id, ss.id, ss.enrolment_id, ss.status, ss.scheduled_for;

-- name: ScheduledSendPrune :one
-- Sent and cancelled rows are kept 7 days. A pruned row's scheduled
-- timeline entry, read from the row until now (schema 0033), is written
-- as it showed, unless its contact is gone (and its timeline with it).
WITH gone AS (
    DELETE FROM scheduled_sends WHERE status IN ('sent', 'cancelled') AND finished_at < @before::timestamptz
    RETURNING tenant_id, id, contact_id, sequence_id, step_id, template_id, first_scheduled_for, created_at
), entry AS (
    INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
    SELECT g.tenant_id, 'tle_' || g.id || ':scheduled', g.contact_id, 'scheduled', g.created_at,
        timeline_scheduled_data(g.id, g.sequence_id, g.step_id, g.template_id, g.first_scheduled_for)
    FROM gone g
    WHERE g.first_scheduled_for IS NOT NULL
      AND EXISTS (SELECT 1 FROM contacts c WHERE c.tenant_id = g.tenant_id AND c.id = g.contact_id)
)
SELECT count(*) FROM gone;

-- name: ScheduledSendGet :one
SELECT * FROM scheduled_sends WHERE tenant_id = @tenant_id AND id = @id AND scheduled_for = @scheduled_for;

-- name: ScheduledSendList :many
-- GET /api/scheduled and /api/contacts/{id}/scheduled. Without a status,
-- sent and cancelled rows are left out; with one, only rows of that status.
SELECT * FROM scheduled_sends
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(status)::text IS NULL AND status IN ('pending', 'claimed', 'failed', 'dead')
       OR status = sqlc.narg(status)::text)
  AND (sqlc.narg(contact_id)::text IS NULL OR contact_id = sqlc.narg(contact_id)::text)
  AND (sqlc.narg(cancel_reason)::text IS NULL OR cancel_reason = sqlc.narg(cancel_reason)::text)
  AND (finished_at IS NULL OR finished_at >= now() - interval '7 days' OR status = 'dead')
ORDER BY scheduled_for, id
LIMIT @lim;

-- name: ScheduledSendGetByID :one
SELECT * FROM scheduled_sends WHERE tenant_id = @tenant_id AND id = @id;
