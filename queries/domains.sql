-- name: DomainInsert :one
INSERT INTO domains (tenant_id, domain, verification_token, dkim_tokens, next_check_at, created_at, updated_at)
VALUES (@tenant_id, @domain, @verification_token, @dkim_tokens::text[], @next_check_at, @created_at, @created_at)
RETURNING *;

-- name: DomainGet :one
SELECT * FROM domains WHERE tenant_id = @tenant_id AND domain = @domain;

-- name: DomainGetForUpdate :one
SELECT * FROM domains WHERE tenant_id = @tenant_id AND domain = @domain FOR UPDATE;

-- name: DomainList :many
SELECT * FROM domains
WHERE tenant_id = @tenant_id
  AND (created_at, domain) < (@before_time::timestamptz, @before_domain::text)
ORDER BY created_at DESC, domain DESC
LIMIT @lim;

-- name: DomainSetSendingEnabled :one
-- Enabling needs a verified domain; no row means not found or not verified,
-- which the caller tells apart.
UPDATE domains SET sending_enabled = @sending_enabled, updated_at = now()
WHERE tenant_id = @tenant_id AND domain = @domain
  AND (NOT @sending_enabled::boolean OR status = 'verified')
RETURNING *;

-- name: DomainDelete :execrows
DELETE FROM domains WHERE tenant_id = @tenant_id AND domain = @domain;

-- name: DomainChecked :one
-- Stores a check's outcome; verified_at keeps the first verification.
UPDATE domains SET
    status          = @status,
    health_status   = @health_status,
    missing_records = @missing_records::text[],
    verified_at     = CASE WHEN @status = 'verified' THEN coalesce(verified_at, @checked_at::timestamptz) ELSE verified_at END,
    last_checked_at = @checked_at::timestamptz,
    next_check_at   = @next_check_at,
    updated_at      = now()
WHERE tenant_id = @tenant_id AND domain = @domain
RETURNING *;

-- name: DomainPostpone :execrows
-- Moves the next periodic check of a domain whose check was inconclusive.
UPDATE domains SET next_check_at = @next_check_at
WHERE tenant_id = @tenant_id AND domain = @domain;

-- name: DomainDue :many
-- The domains the periodic sweep should check, most overdue first.
SELECT tenant_id, domain FROM domains
WHERE next_check_at <= @now
ORDER BY next_check_at
LIMIT @lim;
