-- +goose Up
-- Sequence experiments (ADDENDUM 20): an enrolment's branch (a split's,
-- "holdout" for the control group, null for a sequence without either),
-- and its conversion: when the sequence's goal event arrived for the
-- contact within the goal's window.
ALTER TABLE enrolments ADD COLUMN branch text;
ALTER TABLE enrolments ADD COLUMN converted_at timestamptz;

-- The goal's event name and window, copied from the definition on every
-- write: an event finds the sequences it converts with one probe of
-- sequences_goal (as sequences_trigger finds those it starts), and then
-- the contact's enrolments of them by enrolments_contact. No scan of
-- events, ever.
ALTER TABLE sequences ADD COLUMN goal_event text;
ALTER TABLE sequences ADD COLUMN goal_within_seconds bigint;
CREATE INDEX sequences_goal ON sequences (tenant_id, goal_event) WHERE goal_event IS NOT NULL;

-- A step cancelled because its enrolment reached the goal (exitOnGoal).
ALTER TABLE scheduled_sends DROP CONSTRAINT scheduled_sends_cancel_reason_check;
ALTER TABLE scheduled_sends ADD CONSTRAINT scheduled_sends_cancel_reason_check CHECK (cancel_reason IN
    ('contact_deleted', 'unsubscribed', 'suppressed', 'sequence_deleted', 'exit_condition', 'gate_blocked',
     'manual', 'step_removed', 'topic_opt_out', 'converted')) NOT VALID;

-- +goose Down
ALTER TABLE scheduled_sends DROP CONSTRAINT scheduled_sends_cancel_reason_check;
ALTER TABLE scheduled_sends ADD CONSTRAINT scheduled_sends_cancel_reason_check CHECK (cancel_reason IN
    ('contact_deleted', 'unsubscribed', 'suppressed', 'sequence_deleted', 'exit_condition', 'gate_blocked',
     'manual', 'step_removed', 'topic_opt_out')) NOT VALID;
DROP INDEX sequences_goal;
ALTER TABLE sequences DROP COLUMN goal_within_seconds;
ALTER TABLE sequences DROP COLUMN goal_event;
ALTER TABLE enrolments DROP COLUMN converted_at;
ALTER TABLE enrolments DROP COLUMN branch;
