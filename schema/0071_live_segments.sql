-- +goose Up
-- Live segments (ADDENDUM 21; docs/decisions.md "Live segments").
--
-- A write that can change a live segment's answer for a contact leaves a
-- row in segment_live_queue in its own transaction (the triggers below),
-- so nothing is lost whatever the worker is doing: the segments role drains
-- the table, re-judges each contact for the segments its row names with
-- the Go evaluator, and writes the membership changes with their
-- segment_entered / segment_exited timeline entries.
ALTER TABLE segments
    ADD COLUMN live boolean NOT NULL DEFAULT false,
    -- The instant up to which the time rules (inactiveDays, event within)
    -- of a live segment have been judged: the tick re-judges the contacts
    -- whose answer flipped between it and now.
    ADD COLUMN live_judged_at timestamptz;
CREATE INDEX segments_live ON segments (tenant_id) WHERE live;

-- The index from inputs to live segments: which live segment reads which
-- property, derived field, topic or event name (references to other
-- segments flattened, so a segment reads what the segments it refers to
-- read). Rewritten whenever a live segment's rules or liveness change.
CREATE TABLE segment_live_reads (
    tenant_id  text NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('property', 'derived', 'event', 'topic')),
    key        text NOT NULL,
    segment_id text NOT NULL,
    PRIMARY KEY (tenant_id, kind, key, segment_id),
    FOREIGN KEY (tenant_id, segment_id) REFERENCES segments (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX segment_live_reads_segment ON segment_live_reads (tenant_id, segment_id);

-- Contacts to re-judge, and for which segments. Append-only; the worker
-- claims rows with SKIP LOCKED and deletes them in the transaction that
-- writes their outcome.
CREATE TABLE segment_live_queue (
    id          bigserial PRIMARY KEY,
    tenant_id   text NOT NULL,
    contact_id  text NOT NULL,
    segment_ids text[] NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX segment_live_queue_contact ON segment_live_queue (tenant_id, contact_id);

-- A new contact may belong to any live segment of its tenant.
-- +goose StatementBegin
CREATE FUNCTION segment_live_on_contact_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO segment_live_queue (tenant_id, contact_id, segment_ids)
    SELECT n.tenant_id, n.id, l.ids FROM new_rows n
    CROSS JOIN LATERAL (SELECT array_agg(s.id) AS ids FROM segments s
                        WHERE s.tenant_id = n.tenant_id AND s.live) l
    WHERE l.ids IS NOT NULL;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER segment_live_on_contact_insert AFTER INSERT ON contacts REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION segment_live_on_contact_insert();

-- An update queues the contact for the live segments that read a field
-- that changed: one probe of the tenant's (few) index rows.
-- +goose StatementBegin
CREATE FUNCTION segment_live_on_contact_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    segs text[];
BEGIN
    SELECT array_agg(DISTINCT r.segment_id) INTO segs FROM segment_live_reads r
    WHERE r.tenant_id = NEW.tenant_id AND CASE r.kind
        WHEN 'property' THEN (OLD.properties -> r.key) IS DISTINCT FROM (NEW.properties -> r.key)
        WHEN 'topic' THEN (OLD.topics -> r.key) IS DISTINCT FROM (NEW.topics -> r.key)
        WHEN 'derived' THEN CASE r.key
            WHEN 'totalSends' THEN OLD.total_sends <> NEW.total_sends
            WHEN 'totalOpens' THEN OLD.total_opens <> NEW.total_opens
            WHEN 'totalClicks' THEN OLD.total_clicks <> NEW.total_clicks
            ELSE OLD.last_event_at IS DISTINCT FROM NEW.last_event_at -- lastEventAt, inactiveDays
            END
        ELSE FALSE END;
    IF segs IS NOT NULL THEN
        INSERT INTO segment_live_queue (tenant_id, contact_id, segment_ids) VALUES (NEW.tenant_id, NEW.id, segs);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER segment_live_on_contact_update AFTER UPDATE ON contacts FOR EACH ROW
    WHEN (OLD.properties IS DISTINCT FROM NEW.properties OR OLD.topics IS DISTINCT FROM NEW.topics
          OR OLD.total_sends <> NEW.total_sends OR OLD.total_opens <> NEW.total_opens
          OR OLD.total_clicks <> NEW.total_clicks OR OLD.last_event_at IS DISTINCT FROM NEW.last_event_at)
    EXECUTE FUNCTION segment_live_on_contact_update();

-- A deleted contact leaves every segment (the member rows go by cascade):
-- the live segments' counts follow at once. BEFORE, so the rows are still
-- there to count.
-- +goose StatementBegin
CREATE FUNCTION segment_live_on_contact_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE segments s SET member_count = s.member_count - 1
    FROM segment_members m
    WHERE m.tenant_id = OLD.tenant_id AND m.contact_id = OLD.id
      AND s.tenant_id = m.tenant_id AND s.id = m.segment_id AND s.live;
    RETURN OLD;
END $$;
-- +goose StatementEnd
CREATE TRIGGER segment_live_on_contact_delete BEFORE DELETE ON contacts FOR EACH ROW
    EXECUTE FUNCTION segment_live_on_contact_delete();

-- Events (custom events, email outcomes) queue their contact for the live
-- segments that ask about their name, once per statement.
-- +goose StatementBegin
CREATE FUNCTION segment_live_on_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO segment_live_queue (tenant_id, contact_id, segment_ids)
    SELECT n.tenant_id, n.contact_id, array_agg(DISTINCT r.segment_id)
    FROM new_rows n
    JOIN segment_live_reads r ON r.tenant_id = n.tenant_id AND r.kind = 'event' AND r.key = n.name
    GROUP BY n.tenant_id, n.contact_id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER segment_live_on_events AFTER INSERT ON events REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION segment_live_on_events();

-- segment.entered / segment.exited are facts of their timeline entries, as
-- sequence.* are (schema 0030), with the instant as at.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION webhook_on_timeline_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (tenant_id, type, data)
    SELECT n.tenant_id, replace(n.type, '_', '.'),
        CASE WHEN n.type LIKE 'segment\_%'
             THEN n.data || jsonb_build_object('contactId', n.contact_id,
                 'at', to_char(n.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
             ELSE n.data || jsonb_build_object('contactId', n.contact_id) END
    FROM new_rows n
    WHERE n.type IN ('sequence_entered', 'sequence_exited', 'sequence_completed', 'segment_entered', 'segment_exited')
      AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = n.tenant_id AND e.enabled
                  AND (cardinality(e.events) = 0 OR replace(n.type, '_', '.') = ANY (e.events)));
    IF FOUND THEN
        PERFORM pg_notify('tidings_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- Sequences started by a live segment's entered or exited
-- (trigger: {segment, on}); their trigger_event is '' (no custom event has
-- a blank name, so no event starts them).
ALTER TABLE sequences ADD COLUMN trigger_segment text, ADD COLUMN trigger_on text;
CREATE INDEX sequences_trigger_segment ON sequences (tenant_id, trigger_segment) WHERE trigger_segment IS NOT NULL;

-- +goose Down
DROP INDEX sequences_trigger_segment;
ALTER TABLE sequences DROP COLUMN trigger_segment, DROP COLUMN trigger_on;
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
DROP TRIGGER segment_live_on_events ON events;
DROP TRIGGER segment_live_on_contact_delete ON contacts;
DROP TRIGGER segment_live_on_contact_update ON contacts;
DROP TRIGGER segment_live_on_contact_insert ON contacts;
DROP FUNCTION segment_live_on_events, segment_live_on_contact_delete, segment_live_on_contact_update,
    segment_live_on_contact_insert;
DROP TABLE segment_live_queue;
DROP TABLE segment_live_reads;
DROP INDEX segments_live;
ALTER TABLE segments DROP COLUMN live, DROP COLUMN live_judged_at;
