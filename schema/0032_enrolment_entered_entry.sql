-- +goose Up
-- An enrolment's sequence_entered timeline entry is read from the
-- enrolment itself instead of being written beside it (issue 27;
-- docs/decisions.md "Timeline"): an event that enrols
-- a contact in five sequences wrote five of these rows, each with its
-- foreign-key check, two index entries and a pass through the webhook
-- trigger, though every field of the entry is the enrolment's. The
-- timeline reads enrolments_contact as its third source, and the entry
-- keeps its id (tle_<enrolment>:entered), time (enrolled_at, the now() the
-- entry was written at) and data.
--
-- sequence_version and trigger_event_name are the two fields the entry
-- has that the enrolment did not. Enrolments written before this
-- migration keep their stored entry and leave both null, which is how the
-- timeline tells the two apart (no rewrite of the table, no entry shown
-- twice).
ALTER TABLE enrolments ADD COLUMN sequence_version integer, ADD COLUMN trigger_event_name text;

-- The entry's data, as the stored entry had it: what the timeline shows
-- (queries/events.sql Timeline), what the sequence.entered fact carries
-- with the contact's id, and what the Down below writes. Inlined by the
-- planner (a STABLE SQL function of one expression).
-- +goose StatementBegin
CREATE FUNCTION timeline_entered_data(sequence_id text, enrolment_id text, sequence_version integer, event_id text,
    event_name text) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('sequenceId', sequence_id, 'enrolmentId', enrolment_id, 'sequenceVersion', sequence_version)
        || CASE WHEN event_id IS NULL THEN '{}'::jsonb
                ELSE jsonb_build_object('eventId', event_id, 'eventName', event_name) END
$$;
-- +goose StatementEnd

-- The sequence.entered fact, which the stored entry's trigger wrote, with
-- the same payload: the entry's data and the contact's id.
-- +goose StatementBegin
CREATE FUNCTION webhook_on_enrolment_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_outbox (tenant_id, type, data)
    SELECT n.tenant_id, 'sequence.entered',
        timeline_entered_data(n.sequence_id, n.id, n.sequence_version, n.trigger_event_id, n.trigger_event_name)
        || jsonb_build_object('contactId', n.contact_id)
    FROM new_rows n
    WHERE n.sequence_version IS NOT NULL
      AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = n.tenant_id AND e.enabled
                  AND (cardinality(e.events) = 0 OR 'sequence.entered' = ANY (e.events)));
    IF FOUND THEN
        PERFORM pg_notify('tidings_webhooks', '');
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER webhook_on_enrolment_insert AFTER INSERT ON enrolments REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_on_enrolment_insert();

-- +goose Down
-- The derived entries become stored ones again.
INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
SELECT e.tenant_id, 'tle_' || e.id || ':entered', e.contact_id, 'sequence_entered', e.enrolled_at,
    timeline_entered_data(e.sequence_id, e.id, e.sequence_version, e.trigger_event_id, e.trigger_event_name)
FROM enrolments e WHERE e.sequence_version IS NOT NULL
ON CONFLICT DO NOTHING;
DROP TRIGGER webhook_on_enrolment_insert ON enrolments;
DROP FUNCTION webhook_on_enrolment_insert;
DROP FUNCTION timeline_entered_data;
ALTER TABLE enrolments DROP COLUMN sequence_version, DROP COLUMN trigger_event_name;
