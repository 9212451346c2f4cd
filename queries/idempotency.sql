-- name: IdempotencyClaim :one
-- Takes the key for a new request: inserts it as in flight, or takes over a
-- row that has expired or whose owner has been silent longer than the stale
-- bound (a crashed request) unless that request recorded a send (send_id):
-- its repeat answers from the send's record rather than sending again.
-- Returns no row when someone else holds the key.
INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, expires_at)
VALUES (@tenant_id, @scope, @key, @request_hash, @expires_at)
ON CONFLICT (tenant_id, scope, key) DO UPDATE
SET request_hash = EXCLUDED.request_hash, response_status = NULL, response_body = NULL,
    created_at = now(), expires_at = EXCLUDED.expires_at, send_id = NULL, batch_sends = NULL
WHERE idempotency_keys.expires_at <= now()
   OR (idempotency_keys.response_status IS NULL AND idempotency_keys.send_id IS NULL
       AND idempotency_keys.batch_sends IS NULL
       AND idempotency_keys.created_at <= @stale_before::timestamptz)
RETURNING tenant_id;

-- name: IdempotencyGet :one
SELECT * FROM idempotency_keys
WHERE tenant_id = @tenant_id AND scope = @scope AND key = @key;

-- name: IdempotencyComplete :execrows
-- Stores the response of a successful first request for replay.
UPDATE idempotency_keys SET response_status = @response_status, response_body = @response_body
WHERE tenant_id = @tenant_id AND scope = @scope AND key = @key
  AND request_hash = @request_hash AND response_status IS NULL;

-- name: IdempotencyRelease :execrows
-- Forgets a key whose first request failed, so the client may retry it. A
-- batch that wrote records is never forgotten: some of its messages may
-- have left.
DELETE FROM idempotency_keys
WHERE tenant_id = @tenant_id AND scope = @scope AND key = @key
  AND request_hash = @request_hash AND response_status IS NULL AND batch_sends IS NULL;

-- name: IdempotencyDeleteExpired :execrows
DELETE FROM idempotency_keys WHERE expires_at <= now();

-- name: IdempotencyLinkSend :execrows
-- Names the send a request is about to hand to the provider, in the
-- transaction that writes the send's record.
UPDATE idempotency_keys SET send_id = @send_id
WHERE tenant_id = @tenant_id AND scope = @scope AND key = @key
  AND request_hash = @request_hash AND response_status IS NULL;

-- name: IdempotencyLinkBatchSends :execrows
-- Names the records a batch is about to hand to the provider, by position,
-- in the transaction that writes them.
UPDATE idempotency_keys SET batch_sends = coalesce(batch_sends, '{}'::jsonb) || @links::jsonb
WHERE tenant_id = @tenant_id AND scope = @scope AND key = @key
  AND request_hash = @request_hash AND response_status IS NULL;
