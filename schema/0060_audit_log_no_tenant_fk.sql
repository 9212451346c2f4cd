-- +goose Up
-- The audit log's entries no longer check their tenant (docs/decisions.md
-- "Audit log: the entry's cost"). The check ran on every audited write, in
-- its transaction: a lookup of the tenant and a FOR KEY SHARE lock on its
-- row (a WAL record, a dirtied page, a MultiXact as soon as two writes of
-- one tenant overlap), about a quarter of what the entry cost the
-- database. The entry's tenant is the authenticated principal's, which
-- exists by construction; no code deletes a tenant, and an entry outliving
-- its tenant is kept until retention prunes it, as an audit record should.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_tenant_id_fkey;

-- +goose Down
ALTER TABLE audit_log ADD CONSTRAINT audit_log_tenant_id_fkey
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE NOT VALID;
