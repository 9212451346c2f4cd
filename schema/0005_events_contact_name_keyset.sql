-- +goose Up
-- The per-contact feed filtered by name pages by (occurred_at, id): with id
-- in the index the keyset bound is an index range, no sort. The segment and
-- sequence event checks (tenant, contact, name, occurred_at) use its prefix.
DROP INDEX events_contact_name;
CREATE INDEX events_contact_name ON events (tenant_id, contact_id, name, occurred_at DESC, id DESC);

-- +goose Down
DROP INDEX events_contact_name;
CREATE INDEX events_contact_name ON events (tenant_id, contact_id, name, occurred_at DESC);
