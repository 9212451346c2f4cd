-- +goose Up
-- Contact imports (issue 26; docs/decisions.md "Contact import"). POST
-- /api/contacts/import streams the body into contact_import_rows (COPY)
-- and commits it with its contact_imports row before answering 202: the
-- rows are the truth, the contacts:import task only the timer, and the
-- import sweep queues the task again for a running import that stopped
-- moving. The worker takes the rows a chunk at a time in line order; the
-- transaction that upserts a chunk's contacts also moves the import's
-- counters and next_line, so a crash repeats at most the chunk that was
-- not committed.
CREATE TABLE contact_imports (
    tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           text NOT NULL,
    -- The staging rows' key: 8 bytes a row rather than the tenant's and
    -- the import's ids. Never shown; every statement reaches it through
    -- (tenant_id, id).
    seq          bigint NOT NULL GENERATED ALWAYS AS IDENTITY UNIQUE,
    status       text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed', 'failed')),
    format       text NOT NULL CHECK (format IN ('csv', 'ndjson')),
    -- The CSV header as sent (trimmed); email_column is the email's index.
    columns      text[] NOT NULL DEFAULT '{}',
    email_column integer NOT NULL DEFAULT 0,
    total        bigint NOT NULL DEFAULT 0,
    -- The last line processed: the next chunk reads the staging rows after
    -- it. staged says staging rows may remain (the rows of a finished
    -- import are deleted after its last chunk, or by the sweep).
    next_line    integer NOT NULL DEFAULT 0,
    staged       boolean NOT NULL DEFAULT true,
    processed    bigint NOT NULL DEFAULT 0,
    created      bigint NOT NULL DEFAULT 0,
    updated      bigint NOT NULL DEFAULT 0,
    failed       bigint NOT NULL DEFAULT 0,
    -- The first 100 failed rows, [{line, message}] in line order.
    errors       jsonb NOT NULL DEFAULT '[]',
    -- Task runs since the last chunk committed; past the limit the import
    -- is failed with reason (why it could not run).
    attempts     integer NOT NULL DEFAULT 0,
    reason       text,
    started_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    -- Moves with every chunk: the sweep re-queues a running import that
    -- has not moved for a while.
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX contact_imports_running ON contact_imports (updated_at) WHERE status = 'running';
CREATE INDEX contact_imports_staged ON contact_imports (updated_at) WHERE staged AND status <> 'running';

-- The rows of an import, as read from the body: a CSV record's fields, an
-- NDJSON line as sent, or what made the row unreadable (problem: too long,
-- not UTF-8, not CSV). Chunks read them in line order after the import's
-- next_line; they are deleted at once when the import ends (a delete per
-- chunk cost as much as the read). No foreign key: a per-row check would
-- cost the COPY as much as the rows.
CREATE TABLE contact_import_rows (
    import_seq bigint NOT NULL,
    line       integer NOT NULL,
    fields     text[],
    doc        text,
    problem    text,
    PRIMARY KEY (import_seq, line)
);

-- contact.created is written per statement: an import inserts thousands of
-- contacts in one statement, and a row trigger (the plpgsql call, the
-- payload built before the endpoint check) cost more than the insert. The
-- row triggers for updates and deletes stay, the update one fired only
-- when something a webhook reports has changed (derived counters moving
-- are not an update of the contact). Same facts, same payloads.
-- +goose StatementBegin
CREATE FUNCTION webhook_on_contact_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (tenant_id, type, data)
    SELECT n.tenant_id, 'contact.created', jsonb_build_object('contactId', n.id, 'email', n.email,
        'userId', n.user_id, 'properties', n.properties, 'subscribed', n.subscribed, 'suppressed', n.suppressed)
    FROM new_rows n
    WHERE EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = n.tenant_id AND e.enabled
                  AND (cardinality(e.events) = 0 OR 'contact.created' = ANY (e.events)));
    IF FOUND THEN
        PERFORM pg_notify('tidings_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
DROP TRIGGER webhook_on_contact ON contacts;
CREATE TRIGGER webhook_on_contact_insert AFTER INSERT ON contacts REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_on_contact_insert();
CREATE TRIGGER webhook_on_contact_update AFTER UPDATE ON contacts FOR EACH ROW
    WHEN (OLD.email IS DISTINCT FROM NEW.email OR OLD.user_id IS DISTINCT FROM NEW.user_id
          OR OLD.properties IS DISTINCT FROM NEW.properties OR OLD.subscribed <> NEW.subscribed
          OR OLD.suppressed <> NEW.suppressed)
    EXECUTE FUNCTION webhook_on_contact();
CREATE TRIGGER webhook_on_contact_delete AFTER DELETE ON contacts FOR EACH ROW EXECUTE FUNCTION webhook_on_contact();

-- +goose Down
DROP TRIGGER webhook_on_contact_delete ON contacts;
DROP TRIGGER webhook_on_contact_update ON contacts;
DROP TRIGGER webhook_on_contact_insert ON contacts;
DROP FUNCTION webhook_on_contact_insert;
CREATE TRIGGER webhook_on_contact AFTER INSERT OR UPDATE OR DELETE ON contacts
    FOR EACH ROW EXECUTE FUNCTION webhook_on_contact();
DROP TABLE contact_import_rows;
DROP TABLE contact_imports;
