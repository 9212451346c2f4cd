-- +goose Up
-- Domain checks (ADDENDUM section 9). The table itself is in 0001.
-- health_status: 'unknown' until the first check, then 'healthy' when the
-- last check found all four records, 'degraded' when it did not.
ALTER TABLE domains
    ALTER COLUMN health_status SET DEFAULT 'unknown',
    -- Names of the records the last check did not find.
    ADD COLUMN missing_records text[] NOT NULL DEFAULT '{}',
    -- When the periodic sweep looks at the domain next; rows from before
    -- this migration are due at once.
    ADD COLUMN next_check_at timestamptz NOT NULL DEFAULT now();
UPDATE domains SET health_status = 'unknown' WHERE last_checked_at IS NULL;
ALTER TABLE domains ADD CONSTRAINT domains_health_status_check
    CHECK (health_status IN ('unknown', 'healthy', 'degraded'));
CREATE INDEX domains_list ON domains (tenant_id, created_at DESC, domain DESC);
-- The sweep takes the most overdue domains across tenants.
CREATE INDEX domains_due ON domains (next_check_at);

-- +goose Down
DROP INDEX domains_due;
DROP INDEX domains_list;
ALTER TABLE domains
    DROP CONSTRAINT domains_health_status_check,
    DROP COLUMN next_check_at,
    DROP COLUMN missing_records,
    ALTER COLUMN health_status SET DEFAULT 'healthy';
