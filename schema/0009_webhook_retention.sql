-- +goose Up
-- The webhook sweep prunes deduplication keys and applied batch bodies by
-- age (docs/decisions.md "Webhook dedup retention"); these indexes make
-- each prune a range scan instead of a scan of the whole table.
CREATE INDEX provider_events_received ON provider_events (received_at);
CREATE INDEX webhook_batches_applied ON webhook_batches (applied_at) WHERE applied_at IS NOT NULL;

-- +goose Down
DROP INDEX webhook_batches_applied;
DROP INDEX provider_events_received;
