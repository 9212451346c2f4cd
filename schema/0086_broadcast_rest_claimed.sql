-- +goose NO TRANSACTION
-- +goose Up
-- An A/B broadcast's rest gets the winner as the dispatch claims it, not
-- in one UPDATE of the whole rest at the pick (docs/decisions.md
-- "Experiments: the rest takes its variant at the claim"). The claim
-- reads the rest due, oldest first, from this index once a winner exists;
-- the pick writes one row. Built CONCURRENTLY, as 0031 is.
CREATE INDEX CONCURRENTLY IF NOT EXISTS broadcast_recipients_rest ON broadcast_recipients (tenant_id, broadcast_id, scheduled_for)
    WHERE status = 'queued' AND held;
-- The index the one-statement release used: nothing reads it now.
DROP INDEX CONCURRENTLY IF EXISTS broadcast_recipients_held;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS broadcast_recipients_held ON broadcast_recipients (tenant_id, broadcast_id) WHERE held;
DROP INDEX CONCURRENTLY IF EXISTS broadcast_recipients_rest;
