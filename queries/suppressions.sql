-- The suppression list (internal/contacts/suppressions.go, schema 0023).
-- Every statement is scoped by tenant.

-- name: SuppressionAdd :one
-- Adds an email; the first reason stays (nothing is returned when the email
-- was on the list already).
INSERT INTO suppressions (tenant_id, email, reason, send_id, note)
VALUES (@tenant_id, @email, @reason, sqlc.narg(send_id), @note)
ON CONFLICT (tenant_id, email) DO NOTHING
RETURNING *;

-- name: SuppressionGet :one
SELECT * FROM suppressions WHERE tenant_id = @tenant_id AND email = @email;

-- name: SuppressionList :many
SELECT * FROM suppressions
WHERE tenant_id = @tenant_id
  AND (created_at, email) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, email DESC
LIMIT @lim;

-- name: SuppressionListByReason :many
-- One reason's entries: a query of its own rather than an optional filter
-- on SuppressionList, so the plan reads suppressions_by_reason (schema
-- 0026) instead of walking the whole list for a rare reason.
SELECT * FROM suppressions
WHERE tenant_id = @tenant_id AND reason = @reason
  AND (created_at, email) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, email DESC
LIMIT @lim;

-- name: SuppressionDelete :one
DELETE FROM suppressions WHERE tenant_id = @tenant_id AND email = @email
RETURNING *;

-- name: ContactUnsuppress :one
-- The contact of a removed suppression receives mail again (subscribed is
-- its own matter).
UPDATE contacts SET suppressed = false, updated_at = now()
WHERE tenant_id = @tenant_id AND email = @email
RETURNING *;
