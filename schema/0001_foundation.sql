-- +goose Up
-- Tenants are provisioned from the identity provider's organisation id, which
-- is also the tenant id (ADDENDUM section 2).
CREATE TABLE tenants (
    id                        text PRIMARY KEY,
    name                      text NOT NULL,
    plan                      text NOT NULL DEFAULT 'free',
    sending_status            text NOT NULL DEFAULT 'sandbox'
                              CHECK (sending_status IN ('sandbox', 'enabled', 'paused')),
    sandbox_whitelist         text[] NOT NULL DEFAULT '{}',
    contact_count             bigint NOT NULL DEFAULT 0,
    monthly_send_count        bigint NOT NULL DEFAULT 0,
    monthly_send_count_period text NOT NULL DEFAULT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM'),
    billing_status            text NOT NULL DEFAULT 'none',
    billing_customer_id       text,
    billing_subscription_id   text,
    plan_period_end           timestamptz,
    default_from_address      text,
    preferred_region          text,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a key is stored; the unique index makes the lookup of
-- a presented key a single index probe.
CREATE TABLE api_keys (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         text NOT NULL,
    name       text NOT NULL,
    key_prefix text NOT NULL,
    key_hash   bytea NOT NULL UNIQUE,
    revoked_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX api_keys_list ON api_keys (tenant_id, created_at DESC, id DESC);

-- Sending domains (ADDENDUM section 9). Leaving sandbox needs a verified one.
CREATE TABLE domains (
    tenant_id          text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    domain             text NOT NULL,
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'verifying', 'verified', 'failed')),
    sending_enabled    boolean NOT NULL DEFAULT false,
    health_status      text NOT NULL DEFAULT 'healthy',
    verification_token text NOT NULL,
    dkim_tokens        text[] NOT NULL,
    verified_at        timestamptz,
    last_checked_at    timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, domain)
);

-- +goose Down
DROP TABLE domains;
DROP TABLE api_keys;
DROP TABLE tenants;
