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
