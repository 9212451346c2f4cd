-- +goose Up
-- Event retention, step 2 of 2 (ADDENDUM 15; docs/operations.md "Event
-- partitions"): events becomes a table partitioned by month of
-- occurred_at. The existing table, renamed events_before, is attached as
-- the partition of every time before event_partition_start (step 1
-- validated that it holds nothing later and built the key it needs, so the
-- attach reads no rows); monthly partitions follow from there, created
-- ahead of time by events_ensure_partitions. Everything here takes
-- milliseconds whatever the table's size.
ALTER TABLE events RENAME TO events_before;
DROP TRIGGER webhook_on_events ON events_before;
-- The partitioned table's key must hold occurred_at: events_key (step 1)
-- becomes the old table's primary key in place of (tenant_id, id).
ALTER TABLE events_before DROP CONSTRAINT events_pkey;
ALTER TABLE events_before ADD CONSTRAINT events_before_pkey PRIMARY KEY USING INDEX events_key;
ALTER TABLE events_before RENAME CONSTRAINT events_tenant_id_contact_id_fkey TO events_before_tenant_id_contact_id_fkey;

CREATE TABLE events (
    tenant_id           text NOT NULL,
    id                  text NOT NULL,
    contact_id          text NOT NULL,
    name                text NOT NULL,
    properties          jsonb NOT NULL DEFAULT '{}',
    occurred_at         timestamptz NOT NULL,
    processed_sequences text[] NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id, occurred_at),
    FOREIGN KEY (tenant_id, contact_id) REFERENCES contacts (tenant_id, id) ON DELETE CASCADE
) PARTITION BY RANGE (occurred_at);
-- The same indexes as before (the old table's copies become their
-- partitions' indexes at the attach).
CREATE INDEX events_feed_all ON events (tenant_id, occurred_at DESC, id DESC);
CREATE INDEX events_feed_name_all ON events (tenant_id, name, occurred_at DESC, id DESC);
CREATE INDEX events_contact_all ON events (tenant_id, contact_id, occurred_at DESC, id DESC);
CREATE INDEX events_contact_name_all ON events (tenant_id, contact_id, name, occurred_at DESC, id DESC);

-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER TABLE events ATTACH PARTITION events_before FOR VALUES FROM (MINVALUE) TO (%L)',
        (SELECT starts_at FROM event_partition_start));
END $$;
-- +goose StatementEnd
-- The CHECK has done its work: the partition bound says the same.
ALTER TABLE events_before DROP CONSTRAINT events_before_partitions;

-- events_ensure_partitions creates the monthly partitions from
-- event_partition_start to p_ahead months past the current one, those
-- missing; the api calls it at start and the worker with each retention
-- run, so inserts never find their month missing. It returns how many it
-- created. An advisory lock serialises concurrent callers.
-- +goose StatementBegin
CREATE FUNCTION events_ensure_partitions(p_ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    m     timestamptz := (SELECT starts_at FROM event_partition_start);
    upto  timestamptz := date_trunc('month', now(), 'UTC') + make_interval(months => p_ahead + 1);
    part  text;
    made  integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('events_ensure_partitions'));
    WHILE m < upto LOOP
        part := 'events_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM');
        IF to_regclass(part) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
                part, m, m + interval '1 month');
            made := made + 1;
        END IF;
        m := m + interval '1 month';
    END LOOP;
    RETURN made;
END $$;
-- +goose StatementEnd
SELECT events_ensure_partitions(3);

CREATE TRIGGER webhook_on_events AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_on_events();

-- Retention (ADDENDUM 15): how long a tenant's events stay in the table.
ALTER TABLE tenants ADD COLUMN event_retention_days integer NOT NULL DEFAULT 365
    CHECK (event_retention_days BETWEEN 1 AND 3650);

-- What has been archived, per tenant and UTC month: the archive file's
-- committed length (bytes; anything past it is an interrupted run's and
-- is cut off before the next append) and how many events it holds.
CREATE TABLE event_archives (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    month      text NOT NULL CHECK (month ~ '^[0-9]{4}-[0-9]{2}$'),
    events     bigint NOT NULL DEFAULT 0,
    bytes      bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, month)
);

-- +goose Down
DROP TABLE event_archives;
ALTER TABLE tenants DROP COLUMN event_retention_days;
DROP TRIGGER webhook_on_events ON events;
DROP FUNCTION events_ensure_partitions;
CREATE TABLE events_flat (LIKE events INCLUDING DEFAULTS);
INSERT INTO events_flat SELECT * FROM events;
DROP TABLE events;
ALTER TABLE events_flat RENAME TO events;
ALTER TABLE events ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE events ADD FOREIGN KEY (tenant_id, contact_id) REFERENCES contacts (tenant_id, id) ON DELETE CASCADE;
CREATE INDEX events_feed ON events (tenant_id, occurred_at DESC, id DESC);
CREATE INDEX events_feed_name ON events (tenant_id, name, occurred_at DESC, id DESC);
CREATE INDEX events_contact ON events (tenant_id, contact_id, occurred_at DESC, id DESC);
CREATE INDEX events_contact_name ON events (tenant_id, contact_id, name, occurred_at DESC, id DESC);
CREATE TRIGGER webhook_on_events AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_on_events();
