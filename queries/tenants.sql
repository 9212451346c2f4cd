-- name: TenantInsert :one
-- ON CONFLICT keeps provisioning idempotent under concurrent first requests.
INSERT INTO tenants (id, name) VALUES (@id, @name)
ON CONFLICT (id) DO NOTHING
RETURNING *;

-- name: TenantGet :one
SELECT * FROM tenants WHERE id = @id;

-- name: TenantGetForUpdate :one
SELECT * FROM tenants WHERE id = @id FOR UPDATE;

-- name: TenantExists :one
SELECT EXISTS (SELECT 1 FROM tenants WHERE id = @id);

-- name: TenantUpdate :one
UPDATE tenants SET
    name                 = coalesce(sqlc.narg(name), name),
    default_from_address = CASE WHEN @set_default_from::boolean THEN sqlc.narg(default_from_address) ELSE default_from_address END,
    preferred_region     = CASE WHEN @set_region::boolean THEN sqlc.narg(preferred_region) ELSE preferred_region END,
    sending_status       = coalesce(sqlc.narg(sending_status), sending_status),
    -- A pause by hand says so; leaving a pause clears its reason and starts
    -- the deliverability guard's window afresh (schema 0022).
    paused_reason        = CASE WHEN sqlc.narg(sending_status)::text = 'paused' AND sending_status <> 'paused' THEN 'manual'
                                WHEN sqlc.narg(sending_status)::text <> 'paused' THEN NULL ELSE paused_reason END,
    paused_at            = CASE WHEN sqlc.narg(sending_status)::text = 'paused' AND sending_status <> 'paused' THEN now()
                                WHEN sqlc.narg(sending_status)::text <> 'paused' THEN NULL ELSE paused_at END,
    guard_since          = CASE WHEN sending_status = 'paused' AND sqlc.narg(sending_status)::text <> 'paused' THEN now()
                                ELSE guard_since END,
    timezone             = coalesce(sqlc.narg(timezone), timezone),
    event_retention_days = coalesce(sqlc.narg(event_retention_days), event_retention_days),
    frequency_cap_max    = CASE WHEN @set_frequency_cap::boolean THEN sqlc.narg(frequency_cap_max)::int ELSE frequency_cap_max END,
    frequency_cap_period = CASE WHEN @set_frequency_cap::boolean THEN sqlc.narg(frequency_cap_period)::text ELSE frequency_cap_period END,
    updated_at           = now()
WHERE id = @id
RETURNING *;

-- name: TenantSetWhitelist :one
UPDATE tenants SET sandbox_whitelist = @emails::text[], updated_at = now()
WHERE id = @id
RETURNING sandbox_whitelist;

-- name: DomainCountVerified :one
SELECT count(*) FROM domains WHERE tenant_id = @tenant_id AND status = 'verified';
