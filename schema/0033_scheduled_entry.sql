-- +goose Up
-- A scheduled send's `scheduled` timeline entry is read from the scheduled
-- send while the row lives, and written only when the row is pruned
-- (issue 27; docs/decisions.md "Timeline"), as schema 0032 did for the
-- enrolment's entered entry: every field of the entry is the row's except
-- the time the send was first scheduled for, which scheduled_for stops
-- being once a window, a cap, a held tenant or a retry moves it. That
-- time is kept here. Rows written before this migration leave it null and
-- keep their stored entry.
ALTER TABLE scheduled_sends ADD COLUMN first_scheduled_for timestamptz;

-- The entry's data, as the stored entry had it (scheduledFor as responses
-- show times): what the timeline shows (queries/events.sql Timeline) and
-- what the prune and the Down below write.
-- +goose StatementBegin
CREATE FUNCTION timeline_scheduled_data(scheduled_send_id text, sequence_id text, step_id text, template_id text,
    scheduled_for timestamptz) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('scheduledSendId', scheduled_send_id, 'sequenceId', sequence_id, 'stepId', step_id,
        'templateId', template_id,
        'scheduledFor', to_char(scheduled_for AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
$$;
-- +goose StatementEnd

-- +goose Down
INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
SELECT s.tenant_id, 'tle_' || s.id || ':scheduled', s.contact_id, 'scheduled', s.created_at,
    timeline_scheduled_data(s.id, s.sequence_id, s.step_id, s.template_id, s.first_scheduled_for)
FROM scheduled_sends s
WHERE s.first_scheduled_for IS NOT NULL
  AND EXISTS (SELECT 1 FROM contacts c WHERE c.tenant_id = s.tenant_id AND c.id = s.contact_id)
ON CONFLICT DO NOTHING;
ALTER TABLE scheduled_sends DROP COLUMN first_scheduled_for;
DROP FUNCTION timeline_scheduled_data;
