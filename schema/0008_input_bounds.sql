-- +goose Up
-- A contact's properties grow by merging writes, each bounded on its own;
-- only the database sees the total. NOT VALID: existing rows are not
-- checked (they may predate the limit), every new write is.
ALTER TABLE contacts ADD CONSTRAINT contacts_properties_size
    CHECK (octet_length(properties::text) <= 65536) NOT VALID;

-- +goose Down
ALTER TABLE contacts DROP CONSTRAINT contacts_properties_size;
