-- +goose Up
-- The deliverability guard (ADDENDUM 17; docs/decisions.md "Deliverability
-- guard"). A tenant paused by the guard (or by hand) says why and when;
-- guard_since is when its window of outcomes starts (its last resume; null:
-- from the start), so outcomes from before a resume never pause it again.
ALTER TABLE tenants
    ADD COLUMN paused_reason text CHECK (paused_reason IN ('complaint_rate', 'bounce_rate', 'manual')),
    ADD COLUMN paused_at     timestamptz,
    ADD COLUMN guard_since   timestamptz;

-- The window reads a tenant's newest sends that have an outcome; this
-- index holds only those, newest outcome first.
CREATE INDEX sends_outcomes ON sends (tenant_id, (coalesce(complained_at, bounced_at, delivered_at)) DESC)
    WHERE delivery_status IN ('delivered', 'bounced', 'complained');

-- +goose Down
DROP INDEX sends_outcomes;
ALTER TABLE tenants DROP COLUMN guard_since, DROP COLUMN paused_at, DROP COLUMN paused_reason;
