-- +goose Up
-- One row per message handed to the provider (API.md "Send record"). The
-- row is written only after the provider accepted the message, so a
-- provider failure leaves no record (ADDENDUM section 8). Outcomes from the
-- provider's webhook and our tracking fill in the timestamps and counts.
CREATE TABLE sends (
    tenant_id         text NOT NULL,
    id                text NOT NULL,
    message_id        text NOT NULL,
    contact_id        text NOT NULL,
    template_id       text NOT NULL,
    template_version  integer NOT NULL,
    -- Set only for sequence sends; absent means transactional.
    sequence_id       text,
    step_id           text,
    scheduled_send_id text,
    from_address      text NOT NULL,
    to_address        text NOT NULL,
    subject           text NOT NULL,
    delivery_status   text NOT NULL DEFAULT 'sent'
        CHECK (delivery_status IN ('sent', 'delivered', 'bounced', 'complained', 'rejected')),
    bounce_type       text CHECK (bounce_type IN ('hard', 'soft')),
    sent_at           timestamptz NOT NULL,
    delivered_at      timestamptz,
    opened_at         timestamptz,
    clicked_at        timestamptz,
    bounced_at        timestamptz,
    complained_at     timestamptz,
    rejected_at       timestamptz,
    open_count        integer NOT NULL DEFAULT 0,
    click_count       integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, id),
    -- Deleting a contact deletes its history with it; metrics keep their
    -- counts (they are stored apart).
    FOREIGN KEY (tenant_id, contact_id) REFERENCES contacts (tenant_id, id) ON DELETE CASCADE
);
-- Newest first, whole tenant and per filter; each list is one index range.
CREATE INDEX sends_list ON sends (tenant_id, sent_at DESC, id DESC);
CREATE INDEX sends_contact ON sends (tenant_id, contact_id, sent_at DESC, id DESC);
CREATE INDEX sends_template ON sends (tenant_id, template_id, sent_at DESC, id DESC);
CREATE INDEX sends_sequence ON sends (tenant_id, sequence_id, sent_at DESC, id DESC)
    WHERE sequence_id IS NOT NULL;
CREATE INDEX sends_status ON sends (tenant_id, delivery_status, sent_at DESC, id DESC);
-- A scheduled send becomes at most one send, whatever retries happen.
CREATE UNIQUE INDEX sends_scheduled ON sends (tenant_id, scheduled_send_id)
    WHERE scheduled_send_id IS NOT NULL;

-- Idempotency-Key records (ADDENDUM section 8): the first request with a key
-- owns it while in flight (response_status NULL); a success stores its
-- response for replay; a failure deletes the row so the client may retry.
CREATE TABLE idempotency_keys (
    tenant_id       text NOT NULL,
    scope           text NOT NULL,
    key             text NOT NULL,
    request_hash    bytea NOT NULL,
    response_status integer,
    response_body   bytea,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- Provider webhook bodies, kept before they are acknowledged so a Redis loss
-- loses nothing: the worker applies a batch and stamps applied_at; a sweep
-- re-enqueues batches that stay unapplied.
CREATE TABLE webhook_batches (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider    text NOT NULL,
    body        bytea NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    applied_at  timestamptz,
    -- What applying found: events applied, duplicates, dropped (unknown
    -- send or tenant), for operators.
    applied     integer NOT NULL DEFAULT 0,
    duplicates  integer NOT NULL DEFAULT 0,
    dropped     integer NOT NULL DEFAULT 0
);
CREATE INDEX webhook_batches_pending ON webhook_batches (received_at) WHERE applied_at IS NULL;

-- Provider event ids already applied, so a webhook delivered twice (or a
-- batch applied twice) changes nothing the second time.
CREATE TABLE provider_events (
    provider    text NOT NULL,
    event_id    text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, event_id)
);

-- +goose Down
DROP TABLE provider_events;
DROP TABLE webhook_batches;
DROP TABLE idempotency_keys;
DROP TABLE sends;
