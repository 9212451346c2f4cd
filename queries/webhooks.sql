-- name: WebhookBatchInsert :one
INSERT INTO webhook_batches (provider, body) VALUES (@provider, @body) RETURNING id;

-- name: WebhookBatchGetForUpdate :one
-- Locks the batch while it is applied, so two runs of its task (a retry
-- racing the sweep) apply it one after the other.
SELECT * FROM webhook_batches WHERE id = @id FOR UPDATE;

-- name: WebhookBatchMarkApplied :exec
UPDATE webhook_batches SET applied_at = now(), applied = @applied, duplicates = @duplicates, dropped = @dropped
WHERE id = @id;

-- name: WebhookBatchListStale :many
-- Batches still unapplied some time after they arrived: their task was
-- lost (Redis down at enqueue, or flushed), so the sweep enqueues them again.
SELECT id FROM webhook_batches
WHERE applied_at IS NULL AND received_at < @before::timestamptz
ORDER BY received_at
LIMIT @lim;

-- name: WebhookBatchPrune :execrows
DELETE FROM webhook_batches WHERE applied_at < @before::timestamptz;

-- name: ProviderEventClaim :many
-- Records provider event ids as seen and returns those that were new: an
-- id already present is a duplicate delivery and is skipped. Runs in the
-- transaction that applies the events, so a failed apply forgets them.
INSERT INTO provider_events (provider, event_id)
SELECT @provider, unnest(@event_ids::text[])
ON CONFLICT DO NOTHING
RETURNING event_id;

-- name: ProviderEventPrune :execrows
DELETE FROM provider_events WHERE received_at < @before::timestamptz;

-- name: ProviderEventPark :exec
-- Keeps provider events whose send record is not visible (yet); rows is a
-- JSON array of objects with the columns below.
INSERT INTO provider_events_parked (provider, tenant_id, send_id, email, outcome, occurred_at, url, reason, parked_until)
SELECT @provider, r.tenant_id, r.send_id, r.email, r.outcome, r.occurred_at, r.url, r.reason, @parked_until::timestamptz
FROM jsonb_to_recordset(@rows::jsonb) AS r(tenant_id text, send_id text, email text, outcome text,
    occurred_at timestamptz, url text, reason text);

-- name: ProviderEventParkedTake :many
-- The parked events the sweep looks at, oldest first, taken out of the
-- table (the sweep's transaction parks again what still has no record):
-- those whose send record now exists, and those past parked_until.
DELETE FROM provider_events_parked p
WHERE p.id IN (
    SELECT x.id FROM provider_events_parked x
    WHERE x.parked_until <= @now::timestamptz
       OR EXISTS (SELECT 1 FROM sends s WHERE s.tenant_id = x.tenant_id AND s.id = x.send_id)
    ORDER BY x.id LIMIT @lim
    FOR UPDATE SKIP LOCKED)
RETURNING p.*;

-- name: WebhookBatchTakePending :many
-- SES posts one event per request (an SNS notification each): the run of
-- one stored notification's task applies, with it, up to @lim others of
-- the same provider still waiting, in one transaction. Rows another run
-- holds are skipped, not waited for. They are marked applied in the same
-- statement (the transaction undoes it if the apply fails): locking them
-- first and updating them after wrote each row twice; their counts are on
-- the taking run's row.
UPDATE webhook_batches SET applied_at = now()
WHERE id IN (
    SELECT x.id FROM webhook_batches x
    WHERE x.provider = @provider AND x.applied_at IS NULL AND x.id <> @id
    ORDER BY x.received_at, x.id
    LIMIT @lim
    FOR UPDATE SKIP LOCKED)
RETURNING id, body;

-- name: WebhookBatchIsApplied :one
-- The cheap look before the locking one: an SES notification's task most
-- often finds its row applied by another run (WebhookBatchTakePending).
SELECT (applied_at IS NOT NULL)::boolean AS applied FROM webhook_batches WHERE id = @id;
