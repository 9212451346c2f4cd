-- The audit log (internal/audit, store.Tx; schema 0049). Every read is
-- scoped by tenant.

-- name: AuditInsert :exec
INSERT INTO audit_log (tenant_id, id, actor_type, actor_id, action, resource_type, resource_id, request_id, ip)
VALUES (@tenant_id, @id, @actor_type, @actor_id, @action, @resource_type, @resource_id, @request_id, @ip);

-- name: AuditInsertMany :exec
-- The entries of a group-committed batch (POST /api/events), in the
-- batch's transaction.
INSERT INTO audit_log (tenant_id, id, actor_type, actor_id, action, resource_type, resource_id, request_id, ip)
SELECT unnest(@tenant_ids::text[]), unnest(@ids::text[]), unnest(@actor_types::text[]), unnest(@actor_ids::text[]),
    unnest(@actions::text[]), unnest(@resource_types::text[]), unnest(@resource_ids::text[]),
    unnest(@request_ids::text[]), unnest(@ips::text[]);

-- name: AuditList :many
-- A page of the tenant's entries, newest first; each filter applies when
-- given.
SELECT * FROM audit_log
WHERE tenant_id = @tenant_id
  AND (at, id) < (@before_time::timestamptz, @before_id::text)
  AND at >= @since::timestamptz
  AND (sqlc.narg(actor_id)::text IS NULL OR actor_id = sqlc.narg(actor_id))
  AND (sqlc.narg(action)::text IS NULL OR action = sqlc.narg(action))
  AND (sqlc.narg(resource_type)::text IS NULL OR resource_type = sqlc.narg(resource_type))
ORDER BY at DESC, id DESC
LIMIT @lim;

-- name: AuditPrune :execrows
-- Removes up to lim entries older than before, of every tenant (the
-- retention of ADDENDUM 25, run by the maintenance task in rounds). The
-- list index (tenant_id, at DESC, id DESC) serves it without an index of
-- its own (schema 0060): the tenants are found by a loose index scan (each
-- the least tenant_id above the last), and each tenant's old entries are
-- the end of its range in that index.
WITH RECURSIVE tenant AS (
    (SELECT tenant_id FROM audit_log ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT a.tenant_id FROM audit_log a WHERE a.tenant_id > tenant.tenant_id ORDER BY a.tenant_id LIMIT 1)
    FROM tenant WHERE tenant.tenant_id IS NOT NULL
)
DELETE FROM audit_log
WHERE ctid = ANY (ARRAY(
    SELECT old.ctid FROM tenant
    CROSS JOIN LATERAL (
        SELECT o.ctid FROM audit_log o
        WHERE o.tenant_id = tenant.tenant_id AND o.at < @before::timestamptz
        LIMIT @lim
    ) old
    LIMIT @lim));
