-- +goose Up
-- A scheduled send's `scheduled` timeline entry is read from the scheduled
-- send while the row lives, and written only when the row is pruned
-- (issue 27; docs/decisions.md "Timeline"), as schema 0033 did for the
-- enrolment's entered entry: every field of the entry is the row's except
-- the time the send was first scheduled for, which scheduled_for stops
-- being once a window, a cap, a held tenant or a retry moves it. That
-- time is kept here. Rows written before this migration leave it null and
-- keep their stored entry.
ALTER TABLE scheduled_sends ADD COLUMN first_scheduled_for timestamptz;

-- +goose Down
INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
SELECT s.tenant_id, 'tle_' || s.id || ':scheduled', s.contact_id, 'scheduled', s.created_at,
    jsonb_build_object('scheduledSendId', s.id, 'sequenceId', s.sequence_id, 'stepId', s.step_id,
        'templateId', s.template_id,
        'scheduledFor', to_char(s.first_scheduled_for AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
FROM scheduled_sends s
WHERE s.first_scheduled_for IS NOT NULL
  AND EXISTS (SELECT 1 FROM contacts c WHERE c.tenant_id = s.tenant_id AND c.id = s.contact_id)
ON CONFLICT DO NOTHING;
ALTER TABLE scheduled_sends DROP COLUMN first_scheduled_for;
