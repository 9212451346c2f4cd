-- +goose Up
-- The tenant's time zone (ADDENDUM 13): an IANA name, the zone of contacts
-- that have no valid `timezone` property of their own. Broadcasts sent at
-- local time and sequence send windows read it.
ALTER TABLE tenants ADD COLUMN timezone text NOT NULL DEFAULT 'UTC';

-- +goose Down
ALTER TABLE tenants DROP COLUMN timezone;
