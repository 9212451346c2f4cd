-- Broadcasts (internal/broadcasts). Every statement is scoped by tenant.
-- Recipients are moved by a few batch statements, each of which moves the
-- broadcast's counters (broadcast_counts, the transaction's shard) in the
-- same statement, from the status a row had (locked) to the one it gets:
-- the counters never drift from the rows. Recipient rows are locked in key
-- order (tenant, broadcast, contact) by every statement that moves several.
-- A recipient's status machine with records (ADDENDUM 19,
-- docs/decisions.md "Broadcasts: statuses with records"): queued (no
-- record; held by a claim from claimed_at) → sent with its record, in the
-- transaction that writes the record (BroadcastRecord) → failed, or queued
-- again, in the transaction that deletes it after a refusal
-- (BroadcastRefused); a queued one may end skipped, failed or cancelled
-- without a record (BroadcastFinish, BroadcastCancelRecipients). Moves of a
-- claimed recipient name its claim (claimed_at) or its record (send_id): a
-- claim taken over moves nothing. Lock order: broadcasts, sends,
-- broadcast_recipients, broadcast_counts.

-- name: BroadcastInsert :one
INSERT INTO broadcasts (tenant_id, id, name, template_id, segment_id, campaign_id, from_address, topic,
    send_at, local_send_at, local_time, experiment)
VALUES (@tenant_id, @id, @name, @template_id, @segment_id, sqlc.narg(campaign_id), sqlc.narg(from_address),
    sqlc.narg(topic), sqlc.narg(send_at), sqlc.narg(local_send_at), @local_time, sqlc.narg(experiment))
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
    starts_at = sqlc.narg(starts_at), experiment = sqlc.narg(experiment), updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: BroadcastDelete :exec
WITH r AS (
    DELETE FROM broadcast_recipients br WHERE br.tenant_id = @tenant_id AND br.broadcast_id = @id
), c AS (
    DELETE FROM broadcast_counts bc WHERE bc.tenant_id = @tenant_id AND bc.broadcast_id = @id
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
UPDATE broadcasts b SET snapshotted = true, recipients = @recipients, winner_due_at = sqlc.narg(winner_due_at),
    last_scheduled_for = CASE WHEN @recipients::bigint = 0 THEN NULL ELSE @last_scheduled_for::timestamptz END,
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

-- name: BroadcastRecipientsLast :one
-- The latest scheduledFor of a local-time broadcast's recipients.
SELECT coalesce(max(scheduled_for), now())::timestamptz FROM broadcast_recipients
WHERE tenant_id = @tenant_id AND broadcast_id = @broadcast_id;

-- name: BroadcastRecipientsDueAt :many
-- The distinct seconds at which a broadcast's queued recipients fall due:
-- the timers to set after the snapshot, a resume or a pick. An A/B
-- broadcast's held rest counts once its winner is written.
SELECT DISTINCT date_trunc('second', r.scheduled_for)::timestamptz AS at FROM broadcast_recipients r
WHERE r.tenant_id = @tenant_id AND r.broadcast_id = @broadcast_id AND r.status = 'queued'
  AND (NOT r.held OR EXISTS (SELECT 1 FROM broadcasts b WHERE b.tenant_id = r.tenant_id AND b.id = r.broadcast_id
                                 AND b.winner_variant_id IS NOT NULL))
ORDER BY 1 LIMIT 1000;

-- name: BroadcastCancelRecipients :exec
-- Cancel: every recipient without a record (queued, claimed or not) is
-- cancelled. One whose record is written is `sent` already and stays so
-- (a refusal may still turn it failed); a claimed one whose record is
-- being written waits for that transaction (it is sent then) or makes it
-- withdraw the record (cancelled, nothing leaves).
WITH locked AS (
    SELECT br.tenant_id, br.broadcast_id, br.contact_id FROM broadcast_recipients br
    WHERE br.tenant_id = @tenant_id AND br.broadcast_id = @id AND br.status = 'queued'
    ORDER BY br.tenant_id, br.broadcast_id, br.contact_id
    FOR UPDATE
), c AS (
    UPDATE broadcast_recipients br SET status = 'cancelled'
    FROM locked l
    WHERE br.tenant_id = l.tenant_id AND br.broadcast_id = l.broadcast_id AND br.contact_id = l.contact_id
    RETURNING 1
)
INSERT INTO broadcast_counts AS bc (tenant_id, broadcast_id, shard, cancelled)
SELECT @tenant_id, @id, (pg_current_xact_id()::text::bigint % 16)::smallint, count(*) FROM c
ON CONFLICT (tenant_id, broadcast_id, shard) DO UPDATE SET cancelled = bc.cancelled + EXCLUDED.cancelled
RETURNING bc.cancelled;

-- name: BroadcastsDispatchable :many
-- The broadcasts whose recipients may go out: sending, with their
-- audience, of a tenant that is not paused (ADDENDUM 6: held, not
-- cancelled). Few rows: the claim then walks each one's due index (and
-- an A/B broadcast's rest once it has a winner).
SELECT b.tenant_id, b.id, b.winner_variant_id FROM broadcasts b
JOIN tenants t ON t.id = b.tenant_id
WHERE b.status = 'sending' AND b.snapshotted AND t.sending_status <> 'paused'
ORDER BY b.starts_at
LIMIT 200;

-- name: BroadcastClaim :many
-- Claims up to lim queued recipients of one broadcast that are due, oldest
-- first, skipping rows another worker holds and claims younger than
-- @reclaim_before (their worker is still at it): a range of the due index.
-- sent_id is the message's record when an earlier claim wrote it. Every
-- recipient moves twice (claim, finish): each move makes a new row
-- version, which autovacuum reclaims as it goes.
WITH due AS (
    SELECT r.tenant_id, r.broadcast_id, r.contact_id, r.attempts AS was_attempts FROM broadcast_recipients r
    WHERE r.tenant_id = @tenant_id AND r.broadcast_id = @broadcast_id
      AND r.status = 'queued' AND NOT r.held AND r.scheduled_for <= now()
      AND (r.claimed_at IS NULL OR r.claimed_at < @reclaim_before::timestamptz)
    ORDER BY r.scheduled_for
    LIMIT @lim
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE broadcast_recipients r SET claimed_at = now(), attempts = r.attempts + 1
FROM due
WHERE r.tenant_id = due.tenant_id AND r.broadcast_id = due.broadcast_id AND r.contact_id = due.contact_id
RETURNING sqlc.embed(r),
    -- A recipient claimed before (taken again after its claim lapsed, or
    -- queued again after a refusal) may have a record that survived; a
    -- first claim cannot, and skips the lookup (the record's insert judges
    -- it all the same).
    CASE WHEN due.was_attempts = 0 THEN '' ELSE
        coalesce((SELECT s.id FROM sends s WHERE s.tenant_id = r.tenant_id AND s.broadcast_id = r.broadcast_id
                  AND s.contact_id = r.contact_id), '') END::text AS sent_id;

-- name: BroadcastClaimRest :many
-- Claims up to lim of an A/B broadcast's held rest that are due, oldest
-- first, once its winner is picked, giving each the winner's variant as it
-- is claimed (index broadcast_recipients_rest). From this claim on a row is
-- an ordinary recipient: not held, due again in the due index if a
-- temporary failure queues it back. The rest was never claimed before (the
-- due index leaves held rows out), so no record can exist to look up.
WITH due AS (
    SELECT r.tenant_id, r.broadcast_id, r.contact_id FROM broadcast_recipients r
    WHERE r.tenant_id = @tenant_id AND r.broadcast_id = @broadcast_id
      AND r.status = 'queued' AND r.held AND r.scheduled_for <= now()
    ORDER BY r.scheduled_for
    LIMIT @lim
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE broadcast_recipients r SET claimed_at = now(), attempts = r.attempts + 1, held = false,
    variant_id = @variant_id::text
FROM due
WHERE r.tenant_id = due.tenant_id AND r.broadcast_id = due.broadcast_id AND r.contact_id = due.contact_id
RETURNING sqlc.embed(r), ''::text AS sent_id;

-- name: ContactGetMany :many
-- The contacts of a batch of recipients, unlocked (a deleted one is absent).
SELECT c.* FROM contacts c
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ids::text[]) AS id) k
  ON c.tenant_id = k.tenant_id AND c.id = k.id;

-- name: BroadcastFinish :many
-- Moves a batch of claimed recipients that got no record of this claim to
-- where they end (sent from the record an earlier attempt left, skipped
-- with a reason, failed with an error) or back to queued (a temporary
-- failure: due again at scheduled_for, the claim released), and the
-- broadcasts' counters by the status each row had. batch holds
-- {tenant_id, broadcast_id, contact_id, claimed_at, status, skip_reason,
-- send_id, last_error, scheduled_for, held_by}. Only a recipient still held by
-- that claim (queued, claimed_at as claimed) moves: a claim taken over
-- after SEND_CLAIM_TIMEOUT moves nothing another claim holds. A recipient
-- cancelled meanwhile is still moved to sent from its record (its message
-- may have left) but not to the other ends. Rows are locked in key order.
-- Returns the broadcasts touched.
WITH was AS (
    SELECT r0.tenant_id, r0.broadcast_id, r0.contact_id, r0.status FROM broadcast_recipients r0
    JOIN jsonb_to_recordset(@batch::jsonb) AS x(tenant_id text, broadcast_id text, contact_id text, claimed_at timestamptz,
        status text)
      ON r0.tenant_id = x.tenant_id AND r0.broadcast_id = x.broadcast_id AND r0.contact_id = x.contact_id
    WHERE (r0.status = 'queued' AND r0.claimed_at = x.claimed_at) OR (r0.status = 'cancelled' AND x.status = 'sent')
    ORDER BY r0.tenant_id, r0.broadcast_id, r0.contact_id
    FOR UPDATE OF r0
), moved AS (
    UPDATE broadcast_recipients r SET status = x.status, skip_reason = x.skip_reason,
        send_id = coalesce(x.send_id, r.send_id), last_error = x.last_error,
        scheduled_for = coalesce(x.scheduled_for, r.scheduled_for),
        claimed_at = NULL, held_by = x.held_by,
        -- A held recipient goes back untried: its claim was no attempt.
        attempts = CASE WHEN x.held_by IS NULL THEN r.attempts ELSE greatest(r.attempts - 1, 0) END
    FROM was, jsonb_to_recordset(@batch::jsonb) AS x(tenant_id text, broadcast_id text, contact_id text, status text,
        skip_reason text, send_id text, last_error text, scheduled_for timestamptz, held_by text)
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
INSERT INTO broadcast_counts AS bc (tenant_id, broadcast_id, shard, sent, skipped, failed, cancelled)
SELECT d.tenant_id, d.broadcast_id, (pg_current_xact_id()::text::bigint % 16)::smallint,
    d.sent, d.skipped, d.failed, -d.uncancelled
FROM delta d
ORDER BY d.tenant_id, d.broadcast_id
ON CONFLICT (tenant_id, broadcast_id, shard) DO UPDATE SET sent = bc.sent + EXCLUDED.sent,
    skipped = bc.skipped + EXCLUDED.skipped, failed = bc.failed + EXCLUDED.failed,
    cancelled = bc.cancelled + EXCLUDED.cancelled
RETURNING bc.tenant_id, bc.broadcast_id;

-- name: BroadcastComplete :execrows
-- A sending broadcast whose every recipient has ended is sent: every one
-- counted, and no message still awaiting the provider's answer (a
-- recipient is `sent` from its record on, but a refusal may yet queue it
-- again). Run after the commit that moved recipients or settled their
-- records: of two batches that end the last ones at once, the later check
-- sees both. The in-flight check is one probe of a small index
-- (sends_broadcast_sending), made only once the counters add up.
UPDATE broadcasts b SET status = 'sent', completed_at = now(), updated_at = now()
WHERE b.tenant_id = @tenant_id AND b.id = @id AND b.status = 'sending' AND b.snapshotted
  AND b.recipients <= (SELECT coalesce(sum(c.sent + c.skipped + c.failed + c.cancelled), 0) FROM broadcast_counts c
                       WHERE c.tenant_id = b.tenant_id AND c.broadcast_id = b.id)
  AND NOT EXISTS (SELECT 1 FROM sends s WHERE s.tenant_id = b.tenant_id AND s.broadcast_id = b.id AND s.sending);

-- name: BroadcastRecord :many
-- The records of a batch of claimed recipients were just written, in this
-- transaction, before any provider call: each recipient still held by its
-- claim (queued, claimed_at as claimed) is `sent` with its record from now
-- on, and counted sent by its broadcast in the same statement; claimed_at
-- stays (the attempt that holds the record). batch holds {tenant_id,
-- broadcast_id, contact_id, claimed_at, send_id}. A recipient cancelled or
-- taken over by another claim meanwhile does not move and its send id is
-- not returned: the caller withdraws that record (nothing leaves). Rows are
-- locked in key order, after the records (the lock order). Returns the
-- send ids of the recipients moved.
WITH was AS (
    SELECT r0.tenant_id, r0.broadcast_id, r0.contact_id FROM broadcast_recipients r0
    JOIN jsonb_to_recordset(@batch::jsonb) AS x(tenant_id text, broadcast_id text, contact_id text, claimed_at timestamptz)
      ON r0.tenant_id = x.tenant_id AND r0.broadcast_id = x.broadcast_id AND r0.contact_id = x.contact_id
    WHERE r0.status = 'queued' AND r0.claimed_at = x.claimed_at
    ORDER BY r0.tenant_id, r0.broadcast_id, r0.contact_id
    FOR UPDATE OF r0
), moved AS (
    UPDATE broadcast_recipients r SET status = 'sent', send_id = x.send_id, skip_reason = NULL, last_error = NULL,
        held_by = NULL
    FROM was, jsonb_to_recordset(@batch::jsonb) AS x(tenant_id text, broadcast_id text, contact_id text, send_id text)
    WHERE r.tenant_id = was.tenant_id AND r.broadcast_id = was.broadcast_id AND r.contact_id = was.contact_id
      AND x.tenant_id = r.tenant_id AND x.broadcast_id = r.broadcast_id AND x.contact_id = r.contact_id
    RETURNING r.tenant_id, r.broadcast_id, r.send_id
), counted AS (
    INSERT INTO broadcast_counts AS bc (tenant_id, broadcast_id, shard, sent)
    SELECT m.tenant_id, m.broadcast_id, (pg_current_xact_id()::text::bigint % 16)::smallint, count(*)
    FROM moved m GROUP BY m.tenant_id, m.broadcast_id
    ORDER BY m.tenant_id, m.broadcast_id
    ON CONFLICT (tenant_id, broadcast_id, shard) DO UPDATE SET sent = bc.sent + EXCLUDED.sent
)
SELECT m.send_id::text FROM moved m;

-- name: BroadcastLockShared :many
-- Locks broadcasts shared, in key order, and reads their status: a move of
-- recipients that depends on it (a refusal queues a recipient again only
-- on a broadcast not cancelled) and a cancel (which locks the broadcast for
-- update) wait for each other.
SELECT b.tenant_id, b.id, b.status FROM broadcasts b
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ids::text[]) AS id) k
  ON b.tenant_id = k.tenant_id AND b.id = k.id
ORDER BY b.tenant_id, b.id
FOR SHARE OF b;

-- name: BroadcastRefused :many
-- The provider refused the messages of a batch of recipients (or they
-- never reached it), and their records were deleted in this transaction:
-- each recipient still `sent` with that record, now gone, moves to its
-- status in batch (failed; queued again for a temporary refusal, due at
-- scheduled_for, the claim released; cancelled instead on a broadcast
-- cancelled meanwhile), its send_id cleared, and the counters from sent to
-- there in the same statement. A record settled meanwhile (in doubt) was
-- not deleted: its recipient stays sent. batch holds {tenant_id,
-- broadcast_id, contact_id, send_id, status, last_error, scheduled_for}.
-- Rows are locked in key order. Returns the broadcasts touched.
WITH was AS (
    SELECT r0.tenant_id, r0.broadcast_id, r0.contact_id FROM broadcast_recipients r0
    JOIN jsonb_to_recordset(@batch::jsonb) AS x(tenant_id text, broadcast_id text, contact_id text, send_id text)
      ON r0.tenant_id = x.tenant_id AND r0.broadcast_id = x.broadcast_id AND r0.contact_id = x.contact_id
    WHERE r0.status = 'sent' AND r0.send_id = x.send_id
      AND NOT EXISTS (SELECT 1 FROM sends s WHERE s.tenant_id = x.tenant_id AND s.id = x.send_id)
    ORDER BY r0.tenant_id, r0.broadcast_id, r0.contact_id
    FOR UPDATE OF r0
), moved AS (
    UPDATE broadcast_recipients r SET status = x.status, send_id = NULL, last_error = x.last_error,
        scheduled_for = coalesce(x.scheduled_for, r.scheduled_for),
        claimed_at = CASE WHEN x.status = 'queued' THEN NULL ELSE r.claimed_at END
    FROM was, jsonb_to_recordset(@batch::jsonb) AS x(tenant_id text, broadcast_id text, contact_id text, status text,
        last_error text, scheduled_for timestamptz)
    WHERE r.tenant_id = was.tenant_id AND r.broadcast_id = was.broadcast_id AND r.contact_id = was.contact_id
      AND x.tenant_id = r.tenant_id AND x.broadcast_id = r.broadcast_id AND x.contact_id = r.contact_id
    RETURNING r.tenant_id, r.broadcast_id, r.status
), delta AS (
    SELECT m.tenant_id, m.broadcast_id, count(*) AS unsent,
        count(*) FILTER (WHERE m.status = 'failed') AS failed,
        count(*) FILTER (WHERE m.status = 'cancelled') AS cancelled
    FROM moved m GROUP BY m.tenant_id, m.broadcast_id
)
INSERT INTO broadcast_counts AS bc (tenant_id, broadcast_id, shard, sent, failed, cancelled)
SELECT d.tenant_id, d.broadcast_id, (pg_current_xact_id()::text::bigint % 16)::smallint,
    -d.unsent, d.failed, d.cancelled
FROM delta d
ORDER BY d.tenant_id, d.broadcast_id
ON CONFLICT (tenant_id, broadcast_id, shard) DO UPDATE SET sent = bc.sent + EXCLUDED.sent,
    failed = bc.failed + EXCLUDED.failed, cancelled = bc.cancelled + EXCLUDED.cancelled
RETURNING bc.tenant_id, bc.broadcast_id;

-- name: BroadcastRecipientSends :many
-- The records of a batch of recipients (keys in three arrays): a claimed
-- recipient whose message has one is settled from it, never sent again.
SELECT s.tenant_id, s.broadcast_id::text AS broadcast_id, s.contact_id, s.id FROM sends s
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@broadcast_ids::text[]) AS broadcast_id,
    unnest(@contact_ids::text[]) AS contact_id) k
  ON s.tenant_id = k.tenant_id AND s.broadcast_id = k.broadcast_id AND s.contact_id = k.contact_id;

-- name: BroadcastsSending :many
-- The sweep's completion check: broadcasts sending with their audience.
SELECT tenant_id, id FROM broadcasts WHERE status = 'sending' AND snapshotted LIMIT 1000;

-- name: BroadcastCounts :many
-- The recipient counters of broadcasts, their shards summed.
SELECT broadcast_id, sum(sent)::bigint AS sent, sum(skipped)::bigint AS skipped, sum(failed)::bigint AS failed,
    sum(cancelled)::bigint AS cancelled
FROM broadcast_counts
WHERE tenant_id = @tenant_id AND broadcast_id = ANY (@ids::text[])
GROUP BY broadcast_id;

-- name: BroadcastQueuedDue :one
-- Whether any recipient of a sending broadcast is due (the sweep queues the
-- dispatch fan-out then): of the due index, or of an A/B broadcast's rest
-- once it has a winner (never claimed, so never claimed too recently).
SELECT (EXISTS (
    SELECT 1 FROM broadcast_recipients r
    JOIN broadcasts b ON b.tenant_id = r.tenant_id AND b.id = r.broadcast_id
    WHERE r.status = 'queued' AND NOT r.held AND r.scheduled_for <= now()
      AND (r.claimed_at IS NULL OR r.claimed_at < @reclaim_before::timestamptz) AND b.status = 'sending'
) OR EXISTS (
    SELECT 1 FROM broadcasts b
    JOIN broadcast_recipients r ON r.tenant_id = b.tenant_id AND r.broadcast_id = b.id
    WHERE b.status = 'sending' AND b.winner_variant_id IS NOT NULL
      AND r.status = 'queued' AND r.held AND r.scheduled_for <= now()
))::boolean AS due;

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

-- name: BroadcastSetWinner :one
-- The experiment's winner, written once (under the row lock the caller
-- holds; a second pick finds winner_variant_id set and moves nothing).
UPDATE broadcasts SET winner_variant_id = @variant_id, winner_picked_at = now(), winner_reason = @reason,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND winner_variant_id IS NULL
RETURNING *;

-- name: BroadcastsWinnerDue :many
-- The sweep: A/B broadcasts whose automatic winner is due and not picked
-- (index broadcasts_winner_due), whatever became of their timer task. A
-- sent one had its whole audience in the test and still gets its answer.
SELECT tenant_id, id FROM broadcasts
WHERE winner_due_at IS NOT NULL AND winner_variant_id IS NULL AND winner_due_at <= now()
  AND status IN ('sending', 'paused', 'sent')
ORDER BY winner_due_at
LIMIT @lim;

-- name: BroadcastVariantStats :many
-- Per variant of an A/B broadcast: its recipients and sent ones, and of
-- their records the delivered, opened and clicked ones (people's first
-- open and click: sends.opened_at and clicked_at are never set by a
-- machine's, ADDENDUM 17). Once a winner is picked (@winner) the rest
-- still held counts as the winner's: it takes that variant at its claim.
SELECT coalesce(r.variant_id, sqlc.narg(winner)::text)::text AS variant_id, count(*)::bigint AS recipients,
    count(*) FILTER (WHERE r.status = 'sent')::bigint AS sent,
    count(s.delivered_at)::bigint AS delivered,
    count(s.opened_at)::bigint AS opened,
    count(s.clicked_at)::bigint AS clicked
FROM broadcast_recipients r
LEFT JOIN sends s ON s.tenant_id = r.tenant_id AND s.id = r.send_id
WHERE r.tenant_id = @tenant_id AND r.broadcast_id = @broadcast_id
  AND (r.variant_id IS NOT NULL OR (r.held AND sqlc.narg(winner)::text IS NOT NULL))
GROUP BY 1;
