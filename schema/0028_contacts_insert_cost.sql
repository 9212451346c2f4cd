-- +goose Up
-- Two per-row checks on contacts become the writers' own work, because an
-- import inserts thousands of contacts per statement and the two cost half
-- of each insert (measured, docs/benchmarks.md "Contact import"):
--
-- The suppression list was applied by a BEFORE INSERT row trigger (a
-- plpgsql call and a query per row). Contacts are inserted by two
-- statements only (ContactInsert, ContactImportCreate), and an email is
-- never changed afterwards, so each statement now sets suppressed itself
-- from the list; internal/contacts checks that every INSERT INTO contacts
-- in queries/ does.
--
-- The foreign key to tenants checked each new row (a locking probe of the
-- tenant per row). Every writer of a new contact already locks its
-- tenant's row in the same transaction, taking a slot of the plan's
-- contact counter (TenantReserveContact, TenantReserveContacts), which
-- refuses a tenant that is gone; the cascade of a tenant's deletion to its
-- contacts stays, as a trigger.
DROP TRIGGER contacts_suppressed_by_list ON contacts;
DROP FUNCTION contacts_suppressed_by_list;

ALTER TABLE contacts DROP CONSTRAINT contacts_tenant_id_fkey;
-- +goose StatementBegin
CREATE FUNCTION tenants_delete_contacts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM contacts WHERE tenant_id = OLD.id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER tenants_delete_contacts AFTER DELETE ON tenants
    FOR EACH ROW EXECUTE FUNCTION tenants_delete_contacts();

-- +goose Down
DROP TRIGGER tenants_delete_contacts ON tenants;
DROP FUNCTION tenants_delete_contacts;
ALTER TABLE contacts ADD CONSTRAINT contacts_tenant_id_fkey
    FOREIGN KEY (tenant_id) REFERENCES tenants (id) ON DELETE CASCADE;

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
