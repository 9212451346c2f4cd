-- +goose Up
-- A deleted contact's open scheduled sends are kept, cancelled with the
-- reason contact_deleted (ADDENDUM section 7), for the 7 days sent and
-- cancelled rows are kept; so they no longer go with their contact.
-- contacts.Store.Delete cancels them in the deleting transaction.
ALTER TABLE scheduled_sends DROP CONSTRAINT scheduled_sends_tenant_id_contact_id_fkey;

-- +goose Down
DELETE FROM scheduled_sends ss WHERE NOT EXISTS (
    SELECT 1 FROM contacts c WHERE c.tenant_id = ss.tenant_id AND c.id = ss.contact_id);
ALTER TABLE scheduled_sends ADD FOREIGN KEY (tenant_id, contact_id) REFERENCES contacts (tenant_id, id) ON DELETE CASCADE;
