-- +goose Up
-- A broadcast recipient is `sent` from the transaction that writes its
-- record (ADDENDUM 19), before the provider answers; a refusal may still
-- queue it again. So a broadcast is complete only when its counters add up
-- and none of its records awaits the provider's answer (sending): this
-- index holds just those, a few per running batch, so the check is one
-- probe however large the broadcast. (broadcast_recipients.claimed_at now
-- stays on a sent recipient: the attempt that wrote its record.)
CREATE INDEX sends_broadcast_sending ON sends (tenant_id, broadcast_id) WHERE sending AND broadcast_id IS NOT NULL;

-- +goose Down
DROP INDEX sends_broadcast_sending;
