-- +goose Up
-- What an audit entry costs its write (docs/decisions.md "Audit log: what
-- an entry costs"): every audited write inserts one row in its own
-- transaction, so the table keeps only what that insert must pay for.
--
-- No foreign key to tenants: its check ran on every insert, a lookup of
-- the tenant and a FOR KEY SHARE lock on its row (a WAL record, a dirtied
-- page, a MultiXact as soon as two writes of one tenant overlap). The
-- entry's tenant is the authenticated principal's; no code deletes a
-- tenant, and an entry outliving its tenant is kept until retention prunes
-- it, as an audit record should be.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_tenant_id_fkey;
-- No CHECK on actor_type: the executor parsed and prepared its expression
-- again for every single-row INSERT. The two values are constants of
-- internal/audit, the only writer.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_actor_type_check;
-- No BRIN index on at: a BRIN insert builds the index's descriptor (a
-- memory context, its support functions) once per statement, that is once
-- per entry. Pruning walks the list index tenant by tenant instead
-- (AuditPrune).
DROP INDEX audit_log_at;

-- +goose Down
CREATE INDEX audit_log_at ON audit_log USING brin (at);
ALTER TABLE audit_log ADD CONSTRAINT audit_log_actor_type_check
    CHECK (actor_type IN ('session', 'apiKey')) NOT VALID;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_tenant_id_fkey
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE NOT VALID;
