-- +goose Up
-- Sequence experiments (ADDENDUM 20; docs/decisions.md "Sequence
-- experiments: splits, holdouts and goals").
--
-- An enrolment's branch is drawn when it is created (a hash of sequence
-- and contact id, internal/experiments): a split's branch name, `holdout`
-- for the control group, `default` for a sequence without a split (and
-- for every enrolment made before this migration). A holdout enrolment
-- sends nothing and completes at holdout_until, the moment the sequence
-- would have reached its last email step; the sweep completes it. Both
-- are written with the enrolment, so they cost its insert nothing more.
ALTER TABLE enrolments
    ADD COLUMN branch        text NOT NULL DEFAULT 'default',
    ADD COLUMN holdout_until timestamptz;
-- The sweep's read: holdout enrolments that are due to complete.
CREATE INDEX enrolments_holdout_due ON enrolments (holdout_until) WHERE status = 'active' AND holdout_until IS NOT NULL;

-- The goal, read from the stored definition (its JSON form), so that an
-- event finds the sequences whose goal it is with one index probe and the
-- sequence store writes nothing more. goal_within_seconds is the goal's
-- window ("7d") in seconds: the parser allows a whole number and one unit
-- of s, m, h, d, w only.
ALTER TABLE sequences
    ADD COLUMN goal_event text GENERATED ALWAYS AS (definition -> 'goal' ->> 'event') STORED,
    ADD COLUMN goal_within_seconds bigint GENERATED ALWAYS AS (
        CASE WHEN definition -> 'goal' ->> 'within' ~ '^[0-9]{1,12}[smhdw]$' THEN
            left(definition -> 'goal' ->> 'within', -1)::bigint *
            CASE right(definition -> 'goal' ->> 'within', 1)
                WHEN 's' THEN 1 WHEN 'm' THEN 60 WHEN 'h' THEN 3600 WHEN 'd' THEN 86400 ELSE 604800 END
        END) STORED,
    ADD COLUMN exit_on_goal boolean GENERATED ALWAYS AS (coalesce((definition ->> 'exitOnGoal')::boolean, false)) STORED;
CREATE INDEX sequences_goal ON sequences (tenant_id, goal_event) WHERE goal_event IS NOT NULL;

-- An enrolment's conversion: the goal event that converted it (the first
-- within the window) and that event's time, written where the event is
-- recorded. A row of its own rather than a column of enrolments: an
-- update of an enrolment row writes a new version of it and, unless its
-- page has room, an entry into each of its five indexes, where this
-- insert writes one small row and one index entry (docs/benchmarks.md
-- "Goal conversions at event ingest"). No foreign key, whose check would
-- lock the enrolment row and write it after all; a conversion counts only joined
-- to its enrolment, so the row of a deleted contact's enrolment counts
-- nowhere (it holds ids and a time, nothing of the contact).
CREATE TABLE enrolment_conversions (
    tenant_id    text NOT NULL,
    enrolment_id text NOT NULL,
    event_id     text NOT NULL,
    converted_at timestamptz NOT NULL,
    -- exits: the sequence had exitOnGoal when it converted (the writer
    -- reads it back from its INSERT to know whether to exit it).
    exits        boolean NOT NULL,
    PRIMARY KEY (tenant_id, enrolment_id)
);

-- A pending send of an enrolment that converted with exitOnGoal is
-- cancelled `converted`. NOT VALID, as in 0021: old rows hold old reasons.
ALTER TABLE scheduled_sends DROP CONSTRAINT scheduled_sends_cancel_reason_check;
ALTER TABLE scheduled_sends ADD CONSTRAINT scheduled_sends_cancel_reason_check CHECK (cancel_reason IN
    ('contact_deleted', 'unsubscribed', 'suppressed', 'sequence_deleted', 'exit_condition', 'gate_blocked',
     'manual', 'step_removed', 'topic_opt_out', 'converted')) NOT VALID;

-- +goose Down
ALTER TABLE scheduled_sends DROP CONSTRAINT scheduled_sends_cancel_reason_check;
ALTER TABLE scheduled_sends ADD CONSTRAINT scheduled_sends_cancel_reason_check CHECK (cancel_reason IN
    ('contact_deleted', 'unsubscribed', 'suppressed', 'sequence_deleted', 'exit_condition', 'gate_blocked',
     'manual', 'step_removed', 'topic_opt_out')) NOT VALID;
DROP TABLE enrolment_conversions;
DROP INDEX sequences_goal;
ALTER TABLE sequences DROP COLUMN exit_on_goal, DROP COLUMN goal_within_seconds, DROP COLUMN goal_event;
DROP INDEX enrolments_holdout_due;
ALTER TABLE enrolments DROP COLUMN holdout_until, DROP COLUMN branch;
