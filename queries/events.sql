-- name: EventRecordByEmail :one
-- One round trip records a custom event: find the contact by email, move its
-- lastEventAt forward (when asked), insert the event, and return the contact
-- as it now stands. An event older than lastEventAt writes no contact row
-- (no dead tuple, no row lock held against a burst on one contact).
-- The event is stored with its processed sequences, the enabled sequences
-- its name triggers (index sequences_trigger), read here rather than
-- written afterwards: an update of the new row cost an event that
-- triggers sequences a statement and, when its page was full, a second
-- copy of the row and of its five index entries.
WITH c AS (
    SELECT ct.* FROM contacts ct WHERE ct.tenant_id = @tenant_id AND ct.email = @email
), touched AS (
    UPDATE contacts SET last_event_at = @occurred_at::timestamptz
    WHERE @update_contact::boolean AND tenant_id = @tenant_id AND id = (SELECT id FROM c)
      AND (last_event_at IS NULL OR last_event_at < @occurred_at::timestamptz)
    RETURNING last_event_at
), ins AS (
    INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at, processed_sequences)
    SELECT @tenant_id, @id, c.id, @name, @properties, @occurred_at,
        ARRAY(SELECT s.id FROM sequences s WHERE s.tenant_id = @tenant_id AND s.trigger_event = @name AND s.enabled ORDER BY s.id)
    FROM c
    RETURNING id, occurred_at, processed_sequences
)
SELECT ins.id AS event_id, ins.occurred_at AS event_occurred_at, ins.processed_sequences,
       c.id AS contact_id, c.email, c.user_id, c.properties AS contact_properties, c.subscribed, c.suppressed, c.topics,
       c.total_sends, c.total_opens, c.total_clicks,
       CASE WHEN @update_contact::boolean THEN greatest(c.last_event_at, @occurred_at::timestamptz) ELSE c.last_event_at END AS last_event_at,
       c.created_at, c.updated_at
FROM ins, c;

-- name: EventInsert :one
INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
VALUES (@tenant_id, @id, @contact_id, @name, @properties, @occurred_at)
RETURNING *;

-- name: ContactTouchDerived :one
-- Applies a system event to the derived counters.
UPDATE contacts SET
    last_event_at = greatest(last_event_at, @occurred_at::timestamptz),
    total_sends   = total_sends + @sends::bigint,
    total_opens   = total_opens + @opens::bigint,
    total_clicks  = total_clicks + @clicks::bigint
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- The feeds come in pairs, with and without a name filter, rather than one
-- query with "(@name IS NULL OR name = @name)": each is then one index range
-- whatever plan PostgreSQL caches for the prepared statement.

-- name: EventList :many
SELECT * FROM events
WHERE tenant_id = @tenant_id
  AND (occurred_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY occurred_at DESC, id DESC
LIMIT @lim;

-- name: EventListByName :many
SELECT * FROM events
WHERE tenant_id = @tenant_id AND name = @name
  AND (occurred_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY occurred_at DESC, id DESC
LIMIT @lim;

-- name: EventListByContact :many
SELECT * FROM events
WHERE tenant_id = @tenant_id AND contact_id = @contact_id
  AND (occurred_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY occurred_at DESC, id DESC
LIMIT @lim;

-- name: EventListByContactAndName :many
SELECT * FROM events
WHERE tenant_id = @tenant_id AND contact_id = @contact_id AND name = @name
  AND (occurred_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY occurred_at DESC, id DESC
LIMIT @lim;

-- name: TimelineEntryInsert :exec
INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
VALUES (@tenant_id, @id, @contact_id, @type, @occurred_at, @data);

-- name: Timeline :many
-- Events, other entries, the contact's enrolments (each its
-- sequence_entered entry, schema 0032) and scheduled sends (each its
-- scheduled entry until it is pruned, schema 0033) merged newest first.
-- Events, entries and enrolments are index ranges in the order read, so
-- a page costs O(limit) however long the history; a contact's scheduled
-- sends are the pending ones and those of the last 7 days, sorted.
-- Enrolments and scheduled sends from before those schemas have their
-- entries stored.
(SELECT e.id, 'event'::text AS kind, e.name, e.occurred_at, e.properties AS data
   FROM events e
  WHERE e.tenant_id = @tenant_id AND e.contact_id = @contact_id
    AND e.occurred_at >= @from_time::timestamptz
    AND (e.occurred_at, e.id) < (@before_time::timestamptz, @before_id::text)
  ORDER BY e.occurred_at DESC, e.id DESC
  LIMIT @lim)
UNION ALL
(SELECT t.id, 'entry'::text AS kind, t.type AS name, t.occurred_at, t.data
   FROM timeline_entries t
  WHERE t.tenant_id = @tenant_id AND t.contact_id = @contact_id
    AND t.occurred_at >= @from_time::timestamptz
    AND (t.occurred_at, t.id) < (@before_time::timestamptz, @before_id::text)
  ORDER BY t.occurred_at DESC, t.id DESC
  LIMIT @lim)
UNION ALL
(SELECT 'tle_' || n.id || ':entered', 'entry'::text, 'sequence_entered'::text, n.enrolled_at,
        timeline_entered_data(n.sequence_id, n.id, n.sequence_version, n.trigger_event_id, n.trigger_event_name)
   FROM enrolments n
  WHERE n.tenant_id = @tenant_id AND n.contact_id = @contact_id AND n.sequence_version IS NOT NULL
    AND n.enrolled_at >= @from_time::timestamptz
    AND (n.enrolled_at, 'tle_' || n.id || ':entered') < (@before_time::timestamptz, @before_id::text)
  ORDER BY n.enrolled_at DESC, 'tle_' || n.id || ':entered' DESC
  LIMIT @lim)
UNION ALL
(SELECT 'tle_' || s.id || ':scheduled', 'entry'::text, 'scheduled'::text, s.created_at,
        timeline_scheduled_data(s.id, s.sequence_id, s.step_id, s.template_id, s.first_scheduled_for)
   FROM scheduled_sends s
  WHERE s.tenant_id = @tenant_id AND s.contact_id = @contact_id AND s.first_scheduled_for IS NOT NULL
    AND s.created_at >= @from_time::timestamptz
    AND (s.created_at, 'tle_' || s.id || ':scheduled') < (@before_time::timestamptz, @before_id::text)
  ORDER BY s.created_at DESC, 'tle_' || s.id || ':scheduled' DESC
  LIMIT @lim)
ORDER BY occurred_at DESC, id DESC
LIMIT @lim;

-- name: EventInsertMany :exec
-- Inserts many events in one statement; rows is a JSON array of objects
-- with the columns below.
INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
SELECT r.tenant_id, r.id, r.contact_id, r.name, r.properties, r.occurred_at
FROM jsonb_to_recordset(@rows::jsonb) AS r(tenant_id text, id text, contact_id text, name text,
    properties jsonb, occurred_at timestamptz);

-- name: ContactTouchDerivedMany :exec
-- ContactTouchDerived for many contacts at once; rows holds one object per
-- contact (deltas summed, occurred_at the newest).
UPDATE contacts c SET
    last_event_at = greatest(c.last_event_at, r.occurred_at),
    total_sends   = c.total_sends + r.sends,
    total_opens   = c.total_opens + r.opens,
    total_clicks  = c.total_clicks + r.clicks
FROM jsonb_to_recordset(@rows::jsonb) AS r(tenant_id text, id text, occurred_at timestamptz,
    sends bigint, opens bigint, clicks bigint)
WHERE c.tenant_id = r.tenant_id AND c.id = r.id;

-- name: EventRecordByEmailMany :many
-- EventRecordByEmail for a batch of events of distinct contacts (the group
-- commit of POST /api/events): one event per array position (the arrays
-- are as long as each other), and a row comes back for each event whose
-- contact exists, named by its event_id. Each contact is found by a probe
-- of contacts_email_key, then locked by a probe of its key, in key order
-- (docs/decisions.md "Lock order"; LATERAL, so each is one index lookup
-- whatever the statistics say): two batches sharing a contact, or a batch
-- and a webhook batch, wait for each other rather than deadlock.
-- lastEventAt then moves as EventRecordByEmail moves it, and each event
-- is stored with its processed sequences as there.
WITH u AS (
    SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@emails::text[]) AS email, unnest(@ids::text[]) AS id,
        unnest(@names::text[]) AS name, unnest(@properties::jsonb[]) AS properties,
        unnest(@occurred_ats::timestamptz[]) AS occurred_at, unnest(@update_contacts::boolean[]) AS update_contact
), found AS (
    SELECT f.tenant_id, f.id, u.id AS event_id, u.name AS event_name, u.properties AS event_properties,
        u.occurred_at AS event_occurred_at, u.update_contact
    FROM u CROSS JOIN LATERAL (
        SELECT x.tenant_id, x.id FROM contacts x WHERE x.tenant_id = u.tenant_id AND x.email = u.email
        -- OFFSET 0 keeps the subquery apart: a probe per event, never a
        -- join the statistics choose.
        OFFSET 0) f
), c AS (
    SELECT ct.tenant_id, ct.id, ct.email, ct.user_id, ct.properties, ct.subscribed, ct.suppressed, ct.topics,
        ct.total_sends, ct.total_opens, ct.total_clicks, ct.last_event_at, ct.created_at, ct.updated_at,
        o.event_id, o.event_name, o.event_properties, o.event_occurred_at, o.update_contact
    FROM (SELECT * FROM found ORDER BY tenant_id, id) o CROSS JOIN LATERAL (
        SELECT * FROM contacts x WHERE x.tenant_id = o.tenant_id AND x.id = o.id FOR UPDATE) ct
), touched AS (
    UPDATE contacts t SET last_event_at = c.event_occurred_at
    FROM c
    WHERE c.update_contact AND t.tenant_id = c.tenant_id AND t.id = c.id
      AND (t.last_event_at IS NULL OR t.last_event_at < c.event_occurred_at)
    RETURNING t.id
), ins AS (
    INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at, processed_sequences)
    SELECT c.tenant_id, c.event_id, c.id, c.event_name, c.event_properties, c.event_occurred_at,
        ARRAY(SELECT s.id FROM sequences s WHERE s.tenant_id = c.tenant_id AND s.trigger_event = c.event_name AND s.enabled ORDER BY s.id)
    FROM c
    RETURNING tenant_id, id, occurred_at, processed_sequences
)
SELECT ins.id AS event_id, ins.occurred_at AS event_occurred_at, ins.processed_sequences,
       c.id AS contact_id, c.email, c.user_id, c.properties AS contact_properties, c.subscribed, c.suppressed, c.topics,
       c.total_sends, c.total_opens, c.total_clicks,
       CASE WHEN c.update_contact THEN greatest(c.last_event_at, c.event_occurred_at) ELSE c.last_event_at END AS last_event_at,
       c.created_at, c.updated_at
FROM c JOIN ins ON ins.tenant_id = c.tenant_id AND ins.id = c.event_id;
