-- +goose Up
-- Imports being uploaded (ADDENDUM 25; docs/decisions.md "Import
-- limits"). The api receives an import's body into a temporary file
-- before it stages anything, holding no database connection; while it
-- does, the upload holds one of its tenant's IMPORT_MAX_RUNNING places
-- here, so that every api instance counts it. The transaction that stages
-- the import deletes the row as it inserts the import (which then counts
-- as running); a failed upload deletes it; an instance that died leaves
-- it until expires_at, after which it counts no more and is purged.
CREATE TABLE contact_import_uploads (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- The id the import will have.
    id         text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX contact_import_uploads_expiry ON contact_import_uploads (expires_at);
-- Imports running, per tenant: counted at each new upload.
CREATE INDEX contact_imports_tenant_running ON contact_imports (tenant_id) WHERE status = 'running';

-- +goose Down
DROP INDEX contact_imports_tenant_running;
DROP TABLE contact_import_uploads;
