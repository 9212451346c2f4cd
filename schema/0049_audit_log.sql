-- +goose Up
-- The audit log (ADDENDUM 25; docs/decisions.md "Audit log"): one row per
-- write under /api that succeeded, inserted by the write's own
-- transaction (store.Tx), so it commits or rolls back with the write. No
-- route changes or deletes a row; the maintenance task prunes rows past a
-- year (AuditPrune).
CREATE TABLE audit_log (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            text NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    actor_type    text NOT NULL CHECK (actor_type IN ('session', 'apiKey')),
    actor_id      text NOT NULL,
    action        text NOT NULL,
    resource_type text NOT NULL,
    resource_id   text NOT NULL,
    request_id    text NOT NULL,
    ip            text NOT NULL
);
-- The list, newest first, and its keyset; the filters (actor, action,
-- resource type) are read along it: a tenant's year of entries, filtered,
-- costs a walk of that tenant's index range at worst.
CREATE INDEX audit_log_list ON audit_log (tenant_id, at DESC, id DESC);
-- Pruning reads by time across tenants. Rows arrive in time order, so a
-- BRIN index finds the old ones for almost nothing on each insert.
CREATE INDEX audit_log_at ON audit_log USING brin (at);

-- +goose Down
DROP TABLE audit_log;
