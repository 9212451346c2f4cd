-- +goose Up
-- Throttles and warm-up (docs/decisions.md "Throttles and warm-up").
--
-- A sending domain's warm-up: enabled, its schedule of daily limits (NULL:
-- the default schedule), and the tenant's day of the first message after
-- it was enabled (day 1; NULL until that message).
ALTER TABLE domains
    ADD COLUMN warmup_enabled    boolean NOT NULL DEFAULT false,
    ADD COLUMN warmup_schedule   integer[],
    ADD COLUMN warmup_started_on date;

-- The sequence and broadcast messages recorded per warmed-up domain and
-- tenant's day, counted in the transaction that writes their records
-- under the domain row's lock, so concurrent workers never pass the day's
-- limit together. Old days are pruned with the day they belong to past.
CREATE TABLE domain_warmup_days (
    tenant_id text NOT NULL,
    domain    text NOT NULL,
    day       date NOT NULL,
    sent      integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, domain, day),
    FOREIGN KEY (tenant_id, domain) REFERENCES domains (tenant_id, domain) ON DELETE CASCADE
);

-- What a waiting message waits for (`destination:<group>`,
-- `warmup:<domain>`); NULL once it goes or when nothing holds it.
ALTER TABLE scheduled_sends ADD COLUMN held_by text;
ALTER TABLE broadcast_recipients ADD COLUMN held_by text;

-- +goose Down
ALTER TABLE broadcast_recipients DROP COLUMN held_by;
ALTER TABLE scheduled_sends DROP COLUMN held_by;
DROP TABLE domain_warmup_days;
ALTER TABLE domains DROP COLUMN warmup_started_on, DROP COLUMN warmup_schedule, DROP COLUMN warmup_enabled;
