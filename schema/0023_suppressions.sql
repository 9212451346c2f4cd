-- +goose Up
-- The suppression list (ADDENDUM 16; docs/decisions.md "Consent"):
-- per tenant, by email, outliving contacts. A hard bounce or complaint
-- writes one with the send that caused it (contacts.ApplyOptOut), a call
-- adds one by hand; a contact created, upserted or imported later with the
-- email is suppressed by the trigger below, whichever code path inserts it.
CREATE TABLE suppressions (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email      text NOT NULL,
    reason     text NOT NULL CHECK (reason IN ('hard_bounce', 'complaint', 'manual')),
    send_id    text,
    note       text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, email)
);
CREATE INDEX suppressions_list ON suppressions (tenant_id, created_at DESC, email DESC);

-- Contacts suppressed today (by a bounce or complaint before the list
-- existed) join the list, so re-creating them keeps them suppressed.
INSERT INTO suppressions (tenant_id, email, reason, note)
SELECT tenant_id, email, 'manual', 'suppressed (by a bounce or complaint) before the suppression list existed'
FROM contacts WHERE suppressed
ON CONFLICT DO NOTHING;

-- +goose StatementBegin
CREATE FUNCTION contacts_suppressed_by_list() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT NEW.suppressed AND EXISTS (SELECT 1 FROM suppressions s WHERE s.tenant_id = NEW.tenant_id AND s.email = NEW.email) THEN
        NEW.suppressed := true;
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd
CREATE TRIGGER contacts_suppressed_by_list BEFORE INSERT OR UPDATE OF email ON contacts
    FOR EACH ROW EXECUTE FUNCTION contacts_suppressed_by_list();

-- +goose Down
DROP TRIGGER contacts_suppressed_by_list ON contacts;
DROP FUNCTION contacts_suppressed_by_list;
DROP TABLE suppressions;
