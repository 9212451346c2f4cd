-- name: APIKeyInsert :one
INSERT INTO api_keys (tenant_id, id, name, key_prefix, key_hash)
VALUES (@tenant_id, @id, @name, @key_prefix, @key_hash)
RETURNING *;

-- name: APIKeyCountActive :one
SELECT count(*) FROM api_keys WHERE tenant_id = @tenant_id AND revoked_at IS NULL;

-- name: APIKeyList :many
SELECT * FROM api_keys
WHERE tenant_id = @tenant_id
ORDER BY created_at DESC, id DESC;

-- name: APIKeyRevoke :one
-- Revoking twice is harmless; another tenant's key id is simply not found.
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: APIKeyByHash :one
SELECT tenant_id, id, revoked_at FROM api_keys WHERE key_hash = @key_hash;
