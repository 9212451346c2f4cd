-- +goose NO TRANSACTION
-- +goose Up
-- Event retention, step 1 of 2 (docs/operations.md "Event partitions"):
-- prepare the existing events table to become the first partition of a
-- partitioned events table without a long lock. Each statement commits on
-- its own; none blocks inserts or reads for more than a moment:
--   - the key the partitioned table needs (it must hold the partition
--     column), built CONCURRENTLY;
--   - where the monthly partitions start: the month after next, so the
--     existing table keeps every event before it;
--   - a CHECK that the existing table holds only events before then, added
--     NOT VALID (instant) and validated separately (a scan that takes only
--     a SHARE UPDATE EXCLUSIVE lock): with it, attaching the table as a
--     partition (step 2) needs no scan under its exclusive lock.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS events_key ON events (tenant_id, id, occurred_at);

CREATE TABLE IF NOT EXISTS event_partition_start (
    one       boolean PRIMARY KEY DEFAULT true CHECK (one),
    starts_at timestamptz NOT NULL
);
INSERT INTO event_partition_start (starts_at)
SELECT date_trunc('month', now(), 'UTC') + interval '2 months'
WHERE NOT EXISTS (SELECT 1 FROM event_partition_start);

-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'events_before_partitions') THEN
        EXECUTE format('ALTER TABLE events ADD CONSTRAINT events_before_partitions CHECK (occurred_at < %L) NOT VALID',
            (SELECT starts_at FROM event_partition_start));
    END IF;
END $$;
-- +goose StatementEnd
ALTER TABLE events VALIDATE CONSTRAINT events_before_partitions;

-- +goose Down
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_before_partitions;
DROP TABLE IF EXISTS event_partition_start;
DROP INDEX CONCURRENTLY IF EXISTS events_key;
