-- +goose Up
-- What an event that enrols a contact writes, made cheaper (issue 27;
-- docs/benchmarks.md "Event fan-out"): an event enrolling in five
-- sequences writes five enrolments, five scheduled sends and ten timeline
-- entries.
--
-- sequence.* facts are written per statement, as contact.created and the
-- email.* facts are: the row trigger called plpgsql (and webhook_emit's
-- endpoint probe) for every timeline entry, a fifth of the enrolling
-- statement's time, though only three of its types are facts. Same facts,
-- same payloads, in the same order.
-- +goose StatementBegin
CREATE FUNCTION webhook_on_timeline_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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
DROP TRIGGER webhook_on_timeline ON timeline_entries;
CREATE TRIGGER webhook_on_timeline_insert AFTER INSERT ON timeline_entries REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_on_timeline_insert();
DROP FUNCTION webhook_on_timeline;

-- The open sends of an enrolment are found through scheduled_sends_step,
-- whose key starts with the same two columns under the same predicate:
-- this index was a copy written with every scheduled send.
DROP INDEX scheduled_sends_enrolment;

-- +goose Down
CREATE INDEX scheduled_sends_enrolment ON scheduled_sends (tenant_id, enrolment_id)
    WHERE status IN ('pending', 'claimed', 'failed');
-- +goose StatementBegin
CREATE FUNCTION webhook_on_timeline() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.type IN ('sequence_entered', 'sequence_exited', 'sequence_completed') THEN
        PERFORM webhook_emit(NEW.tenant_id, replace(NEW.type, '_', '.'),
            NEW.data || jsonb_build_object('contactId', NEW.contact_id));
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
DROP TRIGGER webhook_on_timeline_insert ON timeline_entries;
CREATE TRIGGER webhook_on_timeline AFTER INSERT ON timeline_entries FOR EACH ROW EXECUTE FUNCTION webhook_on_timeline();
DROP FUNCTION webhook_on_timeline_insert;
