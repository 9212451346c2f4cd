-- +goose Up
-- Outbound webhooks (ADDENDUM 14, docs/decisions.md "Outbound webhooks").
-- A tenant's endpoints; each fact that has an event type writes its message
-- and one delivery per matching endpoint in the transaction of the fact
-- itself (a transactional outbox, written by the triggers below), so a
-- crash never loses a message nor sends one whose fact rolled back.
CREATE TABLE webhook_endpoints (
    tenant_id        text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id               text NOT NULL,
    url              text NOT NULL,
    -- Empty: every event type.
    events           text[] NOT NULL DEFAULT '{}',
    description      text NOT NULL DEFAULT '',
    enabled          boolean NOT NULL DEFAULT true,
    disabled_reason  text,
    -- whsec_ + base64 of 32 bytes; the key signs deliveries, so it is kept
    -- (as every webhook sender keeps it), and shown only at creation and
    -- rotation. The previous one signs too until previous_until.
    secret           text NOT NULL,
    previous_secret  text,
    previous_until   timestamptz,
    -- Since when every delivery attempt has failed (null: the last one
    -- succeeded); 5 days of that disables the endpoint.
    failing_since    timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX webhook_endpoints_list ON webhook_endpoints (tenant_id, created_at DESC, id DESC);

CREATE TABLE webhook_messages (
    tenant_id  text NOT NULL,
    id         text NOT NULL, -- the webhook-id header, msg_...
    type       text NOT NULL,
    data       jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
-- (no index on created_at: messages are pruned with their deliveries)

CREATE TABLE webhook_deliveries (
    tenant_id        text NOT NULL,
    endpoint_id      text NOT NULL,
    message_id       text NOT NULL,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    -- When a pending delivery is next tried; a claim moves it a lease ahead
    -- so a worker that dies mid-attempt leaves it to be tried again.
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_status_code integer,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, endpoint_id, message_id),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_list ON webhook_deliveries (tenant_id, endpoint_id, created_at DESC, message_id DESC);
-- The 30-day prune: BRIN, a few pages for an append-mostly table, so the
-- outbox write pays almost nothing for it.
CREATE INDEX webhook_deliveries_created ON webhook_deliveries USING brin (created_at);


-- webhook_emit writes a message of type p_type and its deliveries, when
-- the tenant has an enabled endpoint that wants it (else nothing: a tenant
-- without endpoints pays one index probe per fact), and wakes the worker
-- (NOTIFY is delivered at commit, and not at all on rollback).
-- +goose StatementBegin
CREATE FUNCTION webhook_emit(p_tenant text, p_type text, p_data jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    mid text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhook_endpoints
                   WHERE tenant_id = p_tenant AND enabled AND (cardinality(events) = 0 OR p_type = ANY (events))) THEN
        RETURN;
    END IF;
    mid := 'msg_' || replace(gen_random_uuid()::text, '-', '');
    INSERT INTO webhook_messages (tenant_id, id, type, data) VALUES (p_tenant, mid, p_type, p_data);
    INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id)
    SELECT tenant_id, id, mid FROM webhook_endpoints
    WHERE tenant_id = p_tenant AND enabled AND (cardinality(events) = 0 OR p_type = ANY (events));
    PERFORM pg_notify('tidings_webhooks', '');
END $$;
-- +goose StatementEnd

-- email.* facts are system events: their properties (sendId, templateId,
-- sequenceId, broadcastId, bounceType...) with the contact. Outcomes arrive
-- in batches of up to a thousand rows per statement, so this trigger is
-- per statement, set-based (two INSERT ... SELECT for the whole batch):
-- per row it cost a third of the webhook apply rate, measured.
-- +goose StatementBegin
CREATE FUNCTION webhook_on_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH m AS (
        INSERT INTO webhook_messages (tenant_id, id, type, data)
        SELECT n.tenant_id, 'msg_' || replace(gen_random_uuid()::text, '-', ''), n.name,
            n.properties || jsonb_build_object('contactId', n.contact_id, 'email', c.email, 'eventId', n.id)
        FROM new_rows n
        LEFT JOIN contacts c ON c.tenant_id = n.tenant_id AND c.id = n.contact_id
        WHERE n.name IN ('email.sent', 'email.delivered', 'email.opened', 'email.clicked', 'email.bounced',
                         'email.complained', 'email.unsubscribed')
          AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = n.tenant_id AND e.enabled
                      AND (cardinality(e.events) = 0 OR n.name = ANY (e.events)))
        RETURNING tenant_id, id, type
    )
    INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id)
    SELECT m.tenant_id, e.id, m.id FROM m
    JOIN webhook_endpoints e ON e.tenant_id = m.tenant_id AND e.enabled
        AND (cardinality(e.events) = 0 OR m.type = ANY (e.events));
    IF FOUND THEN
        PERFORM pg_notify('tidings_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER webhook_on_events AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_on_events();

-- contact.* facts: created, deleted, unsubscribed, suppressed, and updated
-- when what the tenant set changed (email, userId, properties, resubscribed);
-- derived counters moving is not an update of the contact.
-- +goose StatementBegin
CREATE FUNCTION webhook_on_contact() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r contacts;
BEGIN
    IF TG_OP = 'DELETE' THEN r := OLD; ELSE r := NEW; END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM webhook_emit(r.tenant_id, 'contact.created', jsonb_build_object('contactId', r.id, 'email', r.email,
            'userId', r.user_id, 'properties', r.properties, 'subscribed', r.subscribed, 'suppressed', r.suppressed));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM webhook_emit(r.tenant_id, 'contact.deleted', jsonb_build_object('contactId', r.id, 'email', r.email));
    ELSE
        IF OLD.subscribed AND NOT NEW.subscribed THEN
            PERFORM webhook_emit(r.tenant_id, 'contact.unsubscribed', jsonb_build_object('contactId', r.id, 'email', r.email));
        END IF;
        IF NEW.suppressed AND NOT OLD.suppressed THEN
            PERFORM webhook_emit(r.tenant_id, 'contact.suppressed', jsonb_build_object('contactId', r.id, 'email', r.email));
        END IF;
        IF OLD.email IS DISTINCT FROM NEW.email OR OLD.user_id IS DISTINCT FROM NEW.user_id
           OR OLD.properties IS DISTINCT FROM NEW.properties OR (NEW.subscribed AND NOT OLD.subscribed) THEN
            PERFORM webhook_emit(r.tenant_id, 'contact.updated', jsonb_build_object('contactId', r.id, 'email', r.email,
                'userId', r.user_id, 'properties', r.properties, 'subscribed', r.subscribed, 'suppressed', r.suppressed));
        END IF;
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER webhook_on_contact AFTER INSERT OR UPDATE OR DELETE ON contacts
    FOR EACH ROW EXECUTE FUNCTION webhook_on_contact();

-- sequence.* facts are the enrolment's timeline entries.
-- +goose StatementBegin
CREATE FUNCTION webhook_on_timeline() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.type IN ('sequence_entered', 'sequence_exited', 'sequence_completed') THEN
        PERFORM webhook_emit(NEW.tenant_id, replace(NEW.type, '_', '.'), NEW.data || jsonb_build_object(
            'contactId', NEW.contact_id,
            'email', (SELECT email FROM contacts WHERE tenant_id = NEW.tenant_id AND id = NEW.contact_id)));
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER webhook_on_timeline AFTER INSERT ON timeline_entries FOR EACH ROW EXECUTE FUNCTION webhook_on_timeline();

-- broadcast.sent and tenant.paused are status moves.
-- +goose StatementBegin
CREATE FUNCTION webhook_on_broadcast() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'sent' AND OLD.status IS DISTINCT FROM 'sent' THEN
        PERFORM webhook_emit(NEW.tenant_id, 'broadcast.sent', jsonb_build_object('broadcastId', NEW.id,
            'name', NEW.name, 'templateId', NEW.template_id, 'segmentId', NEW.segment_id,
            'recipients', NEW.recipients));
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER webhook_on_broadcast AFTER UPDATE OF status ON broadcasts FOR EACH ROW EXECUTE FUNCTION webhook_on_broadcast();

-- +goose StatementBegin
CREATE FUNCTION webhook_on_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.sending_status = 'paused' AND OLD.sending_status IS DISTINCT FROM 'paused' THEN
        PERFORM webhook_emit(NEW.id, 'tenant.paused', jsonb_build_object('tenantId', NEW.id));
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER webhook_on_tenant AFTER UPDATE OF sending_status ON tenants FOR EACH ROW EXECUTE FUNCTION webhook_on_tenant();

-- +goose Down
DROP TRIGGER webhook_on_tenant ON tenants;
DROP TRIGGER webhook_on_broadcast ON broadcasts;
DROP TRIGGER webhook_on_timeline ON timeline_entries;
DROP TRIGGER webhook_on_contact ON contacts;
DROP TRIGGER webhook_on_events ON events;
DROP FUNCTION webhook_on_tenant, webhook_on_broadcast, webhook_on_timeline, webhook_on_contact, webhook_on_events, webhook_emit;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_messages;
DROP TABLE webhook_endpoints;
