-- +goose Up
-- A tenant's share of outbound webhook deliveries in flight (issue 36;
-- docs/decisions.md "Outbound webhooks: hardened"). A claim sets
-- leased_until with the lease it moves next_attempt_at by, the outcome
-- clears it: the deliveries whose lease is running are those being
-- attempted, by any worker, and WebhookDeliveryClaim counts them per
-- tenant and endpoint so that one tenant's hanging endpoints hold at most
-- its share of the slots. A worker that dies mid-attempt leaves its lease
-- to run out (30 s), as before.
ALTER TABLE webhook_deliveries ADD COLUMN leased_until timestamptz;
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (tenant_id, endpoint_id) WHERE leased_until IS NOT NULL;
-- The claim walks the tenants with pending deliveries (a loose scan of
-- this index's first column) and takes each enabled endpoint's oldest due
-- ones: a tenant with a backlog of thousands no longer fills every claim
-- before a newer delivery of another tenant is seen.
CREATE INDEX webhook_deliveries_endpoint_due ON webhook_deliveries (tenant_id, endpoint_id, next_attempt_at)
    WHERE status = 'pending';

-- +goose Down
DROP INDEX webhook_deliveries_endpoint_due;
DROP INDEX webhook_deliveries_leased;
ALTER TABLE webhook_deliveries DROP COLUMN leased_until;
