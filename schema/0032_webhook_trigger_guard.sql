-- +goose Up
-- The statement triggers that write webhook facts (events, timeline
-- entries, new contacts) asked, for every row of the statement, whether
-- its tenant has an endpoint that wants the fact: a probe of
-- webhook_endpoints per row, a fifth of inserting a batch of timeline
-- entries (docs/benchmarks.md "Event fan-out", session 11). Most tenants
-- have no endpoint at all, so each trigger first asks once for the
-- statement's tenants and returns when none has an enabled endpoint. The
-- facts written when one has are the same as before.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_on_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhook_endpoints e
                   WHERE e.enabled AND e.tenant_id IN (SELECT n.tenant_id FROM new_rows n)) THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_outbox (tenant_id, type, data)
    SELECT n.tenant_id, n.name, n.properties || jsonb_build_object('contactId', n.contact_id, 'eventId', n.id)
    FROM new_rows n
    WHERE n.name IN ('email.sent', 'email.delivered', 'email.opened', 'email.clicked', 'email.bounced',
                     'email.complained', 'email.unsubscribed')
      AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = n.tenant_id AND e.enabled
                  AND (cardinality(e.events) = 0 OR n.name = ANY (e.events)));
    IF FOUND THEN
        PERFORM pg_notify('tidings_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_on_timeline_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhook_endpoints e
                   WHERE e.enabled AND e.tenant_id IN (SELECT n.tenant_id FROM new_rows n)) THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_outbox (tenant_id, type, data)
    SELECT n.tenant_id, replace(n.type, '_', '.'), n.data || jsonb_build_object('contactId', n.contact_id)
    FROM new_rows n
    WHERE n.type IN ('sequence_entered', 'sequence_exited', 'sequence_completed')
      AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = n.tenant_id AND e.enabled
                  AND (cardinality(e.events) = 0 OR replace(n.type, '_', '.') = ANY (e.events)));
    IF FOUND THEN
        PERFORM pg_notify('tidings_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_on_contact_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhook_endpoints e
                   WHERE e.enabled AND e.tenant_id IN (SELECT n.tenant_id FROM new_rows n)) THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_outbox (tenant_id, type, data)
    SELECT n.tenant_id, 'contact.created', jsonb_build_object('contactId', n.id, 'email', n.email,
        'userId', n.user_id, 'properties', n.properties, 'subscribed', n.subscribed, 'suppressed', n.suppressed)
    FROM new_rows n
    WHERE EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = n.tenant_id AND e.enabled
                  AND (cardinality(e.events) = 0 OR 'contact.created' = ANY (e.events)));
    IF FOUND THEN
        PERFORM pg_notify('tidings_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_on_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (tenant_id, type, data)
    SELECT n.tenant_id, n.name, n.properties || jsonb_build_object('contactId', n.contact_id, 'eventId', n.id)
    FROM new_rows n
    WHERE n.name IN ('email.sent', 'email.delivered', 'email.opened', 'email.clicked', 'email.bounced',
                     'email.complained', 'email.unsubscribed')
      AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = n.tenant_id AND e.enabled
                  AND (cardinality(e.events) = 0 OR n.name = ANY (e.events)));
    IF FOUND THEN
        PERFORM pg_notify('tidings_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_on_timeline_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (tenant_id, type, data)
    SELECT n.tenant_id, replace(n.type, '_', '.'), n.data || jsonb_build_object('contactId', n.contact_id)
    FROM new_rows n
    WHERE n.type IN ('sequence_entered', 'sequence_exited', 'sequence_completed')
      AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = n.tenant_id AND e.enabled
                  AND (cardinality(e.events) = 0 OR replace(n.type, '_', '.') = ANY (e.events)));
    IF FOUND THEN
        PERFORM pg_notify('tidings_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_on_contact_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (tenant_id, type, data)
    SELECT n.tenant_id, 'contact.created', jsonb_build_object('contactId', n.id, 'email', n.email,
        'userId', n.user_id, 'properties', n.properties, 'subscribed', n.subscribed, 'suppressed', n.suppressed)
    FROM new_rows n
    WHERE EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = n.tenant_id AND e.enabled
                  AND (cardinality(e.events) = 0 OR 'contact.created' = ANY (e.events)));
    IF FOUND THEN
        PERFORM pg_notify('tidings_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
