-- +goose Up
-- Metrics counters (API.md "Metrics counters", ADDENDUM section 11), kept
-- by internal/metrics in the same transaction as each fact they count (a
-- send recorded, a scheduled send written or cancelled, an outcome that
-- moved a send), so a count is exact whatever retries or crashes happen.
--
-- One row per tenant, scope, scope id, period and shard:
--   scope 'tenant'   scope_id ''            period = the UTC day
--   scope 'sequence' scope_id the sequence  period = first day of the UTC month
--   scope 'template' scope_id the template  period = first day of the UTC month
-- A transaction adds to the rows of one shard (its transaction id mod 16),
-- so concurrent sends of one tenant spread over 16 rows instead of queueing
-- on one row lock; reads sum the shards. bounced is bounced_hard +
-- bounced_soft and replied is always 0, so neither is stored.
--
-- No foreign keys: counts outlive the contacts, sends, sequences and
-- templates they counted (docs/decisions.md "Metrics").
CREATE TABLE metric_counts (
    tenant_id    text NOT NULL,
    scope        text NOT NULL CHECK (scope IN ('tenant', 'sequence', 'template')),
    scope_id     text NOT NULL,
    period       date NOT NULL,
    shard        smallint NOT NULL CHECK (shard BETWEEN 0 AND 15),
    scheduled    bigint NOT NULL DEFAULT 0,
    sent         bigint NOT NULL DEFAULT 0,
    cancelled    bigint NOT NULL DEFAULT 0,
    delivered    bigint NOT NULL DEFAULT 0,
    bounced_hard bigint NOT NULL DEFAULT 0,
    bounced_soft bigint NOT NULL DEFAULT 0,
    complained   bigint NOT NULL DEFAULT 0,
    opened       bigint NOT NULL DEFAULT 0,
    clicked      bigint NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, scope_id, period, shard)
);

-- +goose Down
DROP TABLE metric_counts;
