-- +goose Up
-- Live segments: one queue row per write statement, not per contact
-- (docs/decisions.md "Live segments: a queue row per statement").
--
-- Schema 0071 queued one row per contact a write touched, with two index
-- entries each, in the write's transaction: a batch of 100 events cost 100
-- rows, and ingest with 10 live segments reading the event ran at 0.49 of
-- ingest with none. A row now names the contacts of one statement
-- (contact_ids) and the live segments to re-judge them for, so a batch of
-- events of one name queues one row, whatever its size. The contact update
-- trigger becomes a statement trigger with transition tables for the same
-- reason: one call per UPDATE statement, not one per row, and none of the
-- per-row function calls for a tenant without live segments reading
-- contact fields.
ALTER TABLE segment_live_queue ADD COLUMN contact_ids text[];
UPDATE segment_live_queue SET contact_ids = ARRAY[contact_id];
ALTER TABLE segment_live_queue ALTER COLUMN contact_ids SET NOT NULL;
-- The reconcile reads the tenant's queued contacts once per statement
-- (segments.reconcileJoinSQL), not a probe per contact: no index by
-- contact is needed, and each queue row costs one index entry (its key).
DROP INDEX segment_live_queue_contact;
ALTER TABLE segment_live_queue DROP COLUMN contact_id;

-- A statement's new contacts, one row per tenant, for every live segment
-- of the tenant.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION segment_live_on_contact_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO segment_live_queue (tenant_id, contact_ids, segment_ids)
    SELECT g.tenant_id, g.ids, l.ids
    FROM (SELECT n.tenant_id, array_agg(n.id ORDER BY n.id) AS ids FROM new_rows n GROUP BY n.tenant_id) g
    CROSS JOIN LATERAL (SELECT array_agg(s.id ORDER BY s.id) AS ids FROM segments s
                        WHERE s.tenant_id = g.tenant_id AND s.live) l
    WHERE l.ids IS NOT NULL;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- An update statement queues, per tenant and set of segments, the contacts
-- whose read fields changed. The first probe leaves at once when no tenant
-- of the statement has a live segment reading a contact field (the common
-- case, and every update of a tenant without live segments).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION segment_live_on_contact_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM (SELECT DISTINCT tenant_id FROM new_rows) t
                   WHERE EXISTS (SELECT 1 FROM segment_live_reads r WHERE r.tenant_id = t.tenant_id
                                 AND r.kind IN ('property', 'derived', 'topic'))) THEN
        RETURN NULL;
    END IF;
    -- Per row, which column groups changed (computed once per row, not
    -- once per row and read), then the tenant's reads of contact fields
    -- joined by hash and judged against those flags first.
    INSERT INTO segment_live_queue (tenant_id, contact_ids, segment_ids)
    SELECT y.tenant_id, array_agg(y.id ORDER BY y.id), y.segs
    FROM (
        SELECT x.tenant_id, x.id, array_agg(DISTINCT r.segment_id ORDER BY r.segment_id) AS segs
        FROM (
            SELECT n.tenant_id, n.id, o.properties AS op, n.properties AS np, o.topics AS ot, n.topics AS nt,
                o.properties IS DISTINCT FROM n.properties AS props, o.topics IS DISTINCT FROM n.topics AS topics,
                o.total_sends <> n.total_sends AS sends, o.total_opens <> n.total_opens AS opens,
                o.total_clicks <> n.total_clicks AS clicks, o.last_event_at IS DISTINCT FROM n.last_event_at AS last
            FROM new_rows n JOIN old_rows o ON o.tenant_id = n.tenant_id AND o.id = n.id
        ) x
        JOIN segment_live_reads r ON r.tenant_id = x.tenant_id AND r.kind IN ('property', 'derived', 'topic')
        WHERE CASE r.kind
            WHEN 'property' THEN x.props AND (x.op -> r.key) IS DISTINCT FROM (x.np -> r.key)
            WHEN 'topic' THEN x.topics AND (x.ot -> r.key) IS DISTINCT FROM (x.nt -> r.key)
            ELSE CASE r.key
                WHEN 'totalSends' THEN x.sends
                WHEN 'totalOpens' THEN x.opens
                WHEN 'totalClicks' THEN x.clicks
                ELSE x.last -- lastEventAt, inactiveDays
                END
            END
        GROUP BY x.tenant_id, x.id
    ) y
    GROUP BY y.tenant_id, y.segs;
    RETURN NULL;
END $$;
-- +goose StatementEnd
DROP TRIGGER segment_live_on_contact_update ON contacts;
CREATE TRIGGER segment_live_on_contact_update AFTER UPDATE ON contacts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION segment_live_on_contact_update();

-- Events queue, per tenant and event name of the statement, its contacts
-- for the live segments that read the name: one row for a batch.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION segment_live_on_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO segment_live_queue (tenant_id, contact_ids, segment_ids)
    SELECT g.tenant_id, g.contact_ids, r.ids
    FROM (SELECT n.tenant_id, n.name, array_agg(DISTINCT n.contact_id ORDER BY n.contact_id) AS contact_ids
          FROM new_rows n GROUP BY n.tenant_id, n.name) g
    CROSS JOIN LATERAL (SELECT array_agg(r.segment_id ORDER BY r.segment_id) AS ids FROM segment_live_reads r
                        WHERE r.tenant_id = g.tenant_id AND r.kind = 'event' AND r.key = g.name) r
    WHERE r.ids IS NOT NULL;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION segment_live_on_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO segment_live_queue (tenant_id, contact_id, segment_ids)
    SELECT n.tenant_id, n.contact_id, array_agg(DISTINCT r.segment_id)
    FROM new_rows n
    JOIN segment_live_reads r ON r.tenant_id = n.tenant_id AND r.kind = 'event' AND r.key = n.name
    GROUP BY n.tenant_id, n.contact_id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
DROP TRIGGER segment_live_on_contact_update ON contacts;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION segment_live_on_contact_update() RETURNS trigger LANGUAGE plpgsql AS $$
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
            ELSE OLD.last_event_at IS DISTINCT FROM NEW.last_event_at
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
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION segment_live_on_contact_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO segment_live_queue (tenant_id, contact_id, segment_ids)
    SELECT n.tenant_id, n.id, l.ids FROM new_rows n
    CROSS JOIN LATERAL (SELECT array_agg(s.id) AS ids FROM segments s
                        WHERE s.tenant_id = n.tenant_id AND s.live) l
    WHERE l.ids IS NOT NULL;
    RETURN NULL;
END $$;
-- +goose StatementEnd
ALTER TABLE segment_live_queue ADD COLUMN contact_id text;
INSERT INTO segment_live_queue (tenant_id, contact_id, contact_ids, segment_ids, created_at)
SELECT q.tenant_id, c, '{}', q.segment_ids, q.created_at FROM segment_live_queue q, unnest(q.contact_ids) c;
DELETE FROM segment_live_queue WHERE contact_id IS NULL;
ALTER TABLE segment_live_queue ALTER COLUMN contact_id SET NOT NULL, DROP COLUMN contact_ids;
CREATE INDEX segment_live_queue_contact ON segment_live_queue (tenant_id, contact_id);
