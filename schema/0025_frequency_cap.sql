-- +goose Up
-- The frequency cap (ADDENDUM 17): at most frequency_cap_max sequence and
-- broadcast messages per contact per calendar day or week (from Monday) in
-- the contact's time zone; null: no cap. Counted from the contact's send
-- records (sends_contact) under a per-contact lock when a record is
-- written, so concurrent workers cannot pass it together.
ALTER TABLE tenants ADD COLUMN frequency_cap_max integer CHECK (frequency_cap_max BETWEEN 1 AND 1000),
    ADD COLUMN frequency_cap_period text CHECK (frequency_cap_period IN ('day', 'week')),
    ADD CONSTRAINT tenants_frequency_cap_whole CHECK ((frequency_cap_max IS NULL) = (frequency_cap_period IS NULL));

-- +goose Down
ALTER TABLE tenants DROP CONSTRAINT tenants_frequency_cap_whole, DROP COLUMN frequency_cap_period,
    DROP COLUMN frequency_cap_max;
