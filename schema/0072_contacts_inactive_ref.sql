-- +goose NO TRANSACTION
-- +goose Up
-- The instant inactiveDays counts from, indexed (ADDENDUM 21): a live
-- segment's tick finds the contacts whose inactiveDays crossed a bound
-- since the last tick by a range of this index, never a scan of the
-- tenant. Built CONCURRENTLY, as 0031 is.
DROP INDEX CONCURRENTLY IF EXISTS contacts_inactive_ref;
CREATE INDEX CONCURRENTLY IF NOT EXISTS contacts_inactive_ref ON contacts (tenant_id, (coalesce(last_event_at, created_at)));

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS contacts_inactive_ref;
