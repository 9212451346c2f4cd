-- Broadcasts (internal/broadcasts). Every statement is scoped by tenant.
-- Recipients are moved by a few batch statements, each of which moves the
-- broadcast's counters in the same statement, from the status a row had
-- (locked) to the one it gets: the counters never drift from the rows.

-- name: BroadcastInsert :one
INSERT INTO broadcasts (tenant_id, id, name, template_id, segment_id, campaign_id, from_address, topic,
    send_at, local_send_at, local_time)
VALUES (@tenant_id, @id, @name, @template_id, @segment_id, sqlc.narg(campaign_id), sqlc.narg(from_address),
    sqlc.narg(topic), sqlc.narg(send_at), sqlc.narg(local_send_at), @local_time)
RETURNING *;

-- name: BroadcastGet :one
SELECT * FROM broadcasts WHERE tenant_id = @tenant_id AND id = @id;

-- name: BroadcastGetForUpdate :one
SELECT * FROM broadcasts WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: BroadcastList :many
SELECT * FROM broadcasts
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
  AND (created_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @lim;

-- name: BroadcastUpdate :one
-- Writes every editable field (the domain merged the PATCH into the row).
UPDATE broadcasts SET name = @name, template_id = @template_id, segment_id = @segment_id,
    campaign_id = sqlc.narg(campaign_id), from_address = sqlc.narg(from_address), topic = sqlc.narg(topic),
    send_at = sqlc.narg(send_at), local_send_at = sqlc.narg(local_send_at), local_time = @local_time,
    starts_at = sqlc.narg(starts_at), updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: BroadcastDelete :exec
WITH r AS (
    DELETE FROM broadcast_recipients br WHERE br.tenant_id = @tenant_id AND br.broadcast_id = @id
)
DELETE FROM broadcasts b WHERE b.tenant_id = @tenant_id AND b.id = @id;

-- name: BroadcastSetStatus :one
-- A status move the domain decided under the row lock; started_at and
-- completed_at are set once.
UPDATE broadcasts SET status = @status, starts_at = sqlc.narg(starts_at), resume_to = sqlc.narg(resume_to),
    started_at = CASE WHEN @status = 'sending' THEN coalesce(started_at, now()) ELSE started_at END,
    completed_at = CASE WHEN @status IN ('sent', 'cancelled') THEN coalesce(completed_at, now()) ELSE completed_at END,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: BroadcastsDue :many
-- The sweep: scheduled broadcasts whose start has come, and started ones
-- whose audience is not written yet (their start task was lost).
SELECT tenant_id, id FROM broadcasts
WHERE (status = 'scheduled' OR (status = 'sending' AND NOT snapshotted)) AND starts_at <= now()
ORDER BY starts_at
LIMIT @lim;

-- name: BroadcastTenantZones :many
-- The distinct zone names among the tenant's contacts: a local-time
-- broadcast starts at the earliest instant its wall-clock time occurs in
-- any of them.
SELECT DISTINCT coalesce(properties->>'timezone', '')::text AS zone FROM contacts WHERE tenant_id = @tenant_id;

-- name: BroadcastSnapshotted :one
-- After the audience INSERT: the counters, the latest scheduledFor, and
-- `sent` at once when there is nobody to send to.
UPDATE broadcasts b SET snapshotted = true, recipients = @recipients,
    last_scheduled_for = (SELECT max(r.scheduled_for) FROM broadcast_recipients r
                          WHERE r.tenant_id = b.tenant_id AND r.broadcast_id = b.id),
    status = CASE WHEN @recipients::bigint = 0 THEN 'sent' ELSE status END,
    completed_at = CASE WHEN @recipients::bigint = 0 THEN now() ELSE completed_at END,
    updated_at = now()
WHERE b.tenant_id = @tenant_id AND b.id = @id
RETURNING *;

-- name: BroadcastRecipientList :many
SELECT * FROM broadcast_recipients
WHERE tenant_id = @tenant_id AND broadcast_id = @broadcast_id AND contact_id > @after::text
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
ORDER BY contact_id
LIMIT @lim;

-- name: BroadcastRecipientsDueAt :many
-- The distinct seconds at which a broadcast's queued recipients fall due:
-- the timers to set after the snapshot or a resume.
SELECT DISTINCT date_trunc('second', scheduled_for)::timestamptz AS at FROM broadcast_recipients
WHERE tenant_id = @tenant_id AND broadcast_id = @broadcast_id AND status = 'queued'
ORDER BY 1 LIMIT 1000;

-- name: BroadcastCancelRecipients :one
-- Cancel: every recipient not yet sent is cancelled (a claimed one whose
-- message is leaving is settled `sent` all the same, and counted back).
WITH c AS (
    UPDATE broadcast_recipients br SET status = 'cancelled'
    WHERE br.tenant_id = @tenant_id AND br.broadcast_id = @id AND br.status = 'queued'
    RETURNING 1
)
UPDATE broadcasts b SET cancelled = b.cancelled + (SELECT count(*) FROM c), updated_at = now()
WHERE b.tenant_id = @tenant_id AND b.id = @id
RETURNING *;

-- name: BroadcastClaim :many
-- Claims up to lim queued recipients that are due, oldest first, skipping
-- rows another worker holds and claims younger than @reclaim_before (their
-- worker is still at it). Only recipients of a broadcast that is sending,
-- of a tenant that is not paused (ADDENDUM 6: held, not cancelled).
-- sent_id is the message's record when an earlier claim wrote it.
WITH due AS (
    SELECT r.tenant_id, r.broadcast_id, r.contact_id FROM broadcast_recipients r
    JOIN broadcasts b ON b.tenant_id = r.tenant_id AND b.id = r.broadcast_id
    JOIN tenants t ON t.id = r.tenant_id
    WHERE r.status = 'queued' AND r.scheduled_for <= now()
      AND (r.claimed_at IS NULL OR r.claimed_at < @reclaim_before::timestamptz)
      AND b.status = 'sending' AND t.sending_status <> 'paused'
    ORDER BY r.scheduled_for
    LIMIT @lim
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE broadcast_recipients r SET claimed_at = now(), attempts = r.attempts + 1
FROM due
WHERE r.tenant_id = due.tenant_id AND r.broadcast_id = due.broadcast_id AND r.contact_id = due.contact_id
RETURNING sqlc.embed(r),
    coalesce((SELECT s.id FROM sends s WHERE s.tenant_id = r.tenant_id AND s.broadcast_id = r.broadcast_id
              AND s.contact_id = r.contact_id), '')::text AS sent_id;

-- name: ContactGetMany :many
-- The contacts of a batch of recipients, unlocked (a deleted one is absent).
SELECT c.* FROM contacts c
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ids::text[]) AS id) k
  ON c.tenant_id = k.tenant_id AND c.id = k.id;

-- name: BroadcastFinish :many
-- Moves a batch of claimed recipients to where they end (sent with their
-- send, skipped with a reason, failed with an error) or back to queued
-- (a temporary failure: due again at scheduled_for, the claim released),
-- and the broadcasts' counters by the status each row had. batch holds
-- {tenant_id, broadcast_id, contact_id, status, skip_reason, send_id,
-- last_error, scheduled_for}. A recipient cancelled meanwhile is still
-- moved to sent (its message left) but not to the other ends. Rows are
-- locked in key order. Returns the broadcasts touched.
WITH was AS (
    SELECT r0.tenant_id, r0.broadcast_id, r0.contact_id, r0.status FROM broadcast_recipients r0
    JOIN jsonb_to_recordset(@batch::jsonb) AS x(tenant_id text, broadcast_id text, contact_id text, status text)
      ON r0.tenant_id = x.tenant_id AND r0.broadcast_id = x.broadcast_id AND r0.contact_id = x.contact_id
    WHERE r0.status = 'queued' OR (r0.status = 'cancelled' AND x.status = 'sent')
    ORDER BY r0.tenant_id, r0.broadcast_id, r0.contact_id
    FOR UPDATE OF r0
), moved AS (
    UPDATE broadcast_recipients r SET status = x.status, skip_reason = x.skip_reason,
        send_id = coalesce(x.send_id, r.send_id), last_error = x.last_error,
        scheduled_for = coalesce(x.scheduled_for, r.scheduled_for),
        claimed_at = NULL
    FROM was, jsonb_to_recordset(@batch::jsonb) AS x(tenant_id text, broadcast_id text, contact_id text, status text,
        skip_reason text, send_id text, last_error text, scheduled_for timestamptz)
    WHERE r.tenant_id = was.tenant_id AND r.broadcast_id = was.broadcast_id AND r.contact_id = was.contact_id
      AND x.tenant_id = r.tenant_id AND x.broadcast_id = r.broadcast_id AND x.contact_id = r.contact_id
    RETURNING r.tenant_id, r.broadcast_id, was.status AS was, r.status
), delta AS (
    SELECT m.tenant_id, m.broadcast_id,
        count(*) FILTER (WHERE m.status = 'sent') AS sent,
        count(*) FILTER (WHERE m.status = 'skipped') AS skipped,
        count(*) FILTER (WHERE m.status = 'failed') AS failed,
        count(*) FILTER (WHERE m.was = 'cancelled') AS uncancelled
    FROM moved m GROUP BY m.tenant_id, m.broadcast_id
)
UPDATE broadcasts b SET sent = b.sent + d.sent, skipped = b.skipped + d.skipped, failed = b.failed + d.failed,
    cancelled = b.cancelled - d.uncancelled, updated_at = now()
FROM (SELECT * FROM delta ORDER BY tenant_id, broadcast_id) d
WHERE b.tenant_id = d.tenant_id AND b.id = d.broadcast_id
RETURNING b.tenant_id, b.id;

-- name: BroadcastComplete :exec
-- A sending broadcast whose every recipient has ended is sent.
UPDATE broadcasts SET status = 'sent', completed_at = now(), updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'sending' AND snapshotted
  AND sent + skipped + failed + cancelled >= recipients;

-- name: BroadcastQueuedDue :one
-- Whether any recipient of a sending broadcast is due (the sweep queues the
-- dispatch fan-out then).
SELECT EXISTS (
    SELECT 1 FROM broadcast_recipients r
    JOIN broadcasts b ON b.tenant_id = r.tenant_id AND b.id = r.broadcast_id
    WHERE r.status = 'queued' AND r.scheduled_for <= now()
      AND (r.claimed_at IS NULL OR r.claimed_at < @reclaim_before::timestamptz) AND b.status = 'sending'
);

-- name: BroadcastEngagement :many
-- The outcome counters of broadcasts (metric_counts, scope broadcast): every
-- month and shard of each summed.
SELECT scope_id AS broadcast_id, sum(delivered)::bigint AS delivered, sum(opened)::bigint AS opened,
    sum(clicked)::bigint AS clicked, sum(bounced_hard + bounced_soft)::bigint AS bounced,
    sum(complained)::bigint AS complained, sum(unsubscribed)::bigint AS unsubscribed
FROM metric_counts
WHERE tenant_id = @tenant_id AND scope = 'broadcast' AND scope_id = ANY (@ids::text[])
GROUP BY scope_id;

-- name: CampaignExists :one
SELECT EXISTS (SELECT 1 FROM campaigns WHERE tenant_id = @tenant_id AND id = @id);

-- name: BroadcastLockMany :exec
-- Locks broadcasts in key order before their recipients move (the lock
-- order: a broadcast, then its recipients, as Cancel and Start take them).
SELECT 1 FROM broadcasts b
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ids::text[]) AS id) k
  ON b.tenant_id = k.tenant_id AND b.id = k.id
ORDER BY b.tenant_id, b.id
FOR UPDATE OF b;
