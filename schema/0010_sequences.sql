-- +goose Up
-- Sequences (ADDENDUM section 6). content is the YAML as stored (GET
-- returns it); definition (added here) is its parse (internal/sequences/definition's
-- JSON form), so the engine never parses YAML per step. version grows by one
-- when content or trigger_event changes.
-- The table itself is in 0004 (campaigns associate sequences).
-- Rows that campaign tests insert by hand get an empty definition.
ALTER TABLE sequences ADD COLUMN definition jsonb NOT NULL DEFAULT '{}';
CREATE INDEX sequences_list ON sequences (tenant_id, created_at DESC, id DESC);
-- An event finds the enabled sequences it triggers with one index probe.
CREATE INDEX sequences_trigger ON sequences (tenant_id, trigger_event) WHERE enabled;

-- A contact's passage through a sequence. A contact has at most one open
-- (active or paused) enrolment per sequence; with reenroll it may have
-- several ended ones. Rows outlive a deleted sequence (marked exited), so
-- no foreign key to sequences; they go with their contact.
CREATE TABLE enrolments (
    tenant_id        text NOT NULL,
    id               text NOT NULL,
    sequence_id      text NOT NULL,
    contact_id       text NOT NULL,
    status           text NOT NULL DEFAULT 'active'
        CHECK (status IN ('active', 'paused', 'completed', 'exited')),
    -- The step the enrolment is at: the next step to run, or the last one
    -- run once completed. current_step_index is its 1-based position as
    -- API.md's currentStep (a number) shows it.
    current_step       text NOT NULL,
    current_step_index integer NOT NULL,
    -- The event that enrolled the contact (render context `event`); null
    -- for a manual enrolment.
    trigger_event_id text,
    enrolled_at      timestamptz NOT NULL DEFAULT now(),
    ended_at         timestamptz,
    -- Why an exited enrolment ended: exit_condition, gate_blocked,
    -- unsubscribed, suppressed, manual, sequence_deleted.
    exit_reason      text,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, contact_id) REFERENCES contacts (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX enrolments_open ON enrolments (tenant_id, sequence_id, contact_id)
    WHERE status IN ('active', 'paused');
CREATE INDEX enrolments_sequence ON enrolments (tenant_id, sequence_id, status, enrolled_at DESC, id DESC);
CREATE INDEX enrolments_contact ON enrolments (tenant_id, contact_id, enrolled_at DESC);

-- Scheduled sends (ADDENDUM section 7): the row is the truth, an asynq task
-- with the row's id as task id is the timer. A worker claims a row
-- (pending|failed -> claimed) before sending; sent and cancelled rows are
-- kept 7 days (finished_at). They go with their contact, not with their
-- sequence (a deleted sequence cancels them: sequence_deleted).
CREATE TABLE scheduled_sends (
    tenant_id        text NOT NULL,
    id               text NOT NULL,
    contact_id       text NOT NULL,
    enrolment_id     text NOT NULL,
    sequence_id      text NOT NULL,
    sequence_version integer NOT NULL,
    step_id          text NOT NULL,
    template_id      text NOT NULL,
    scheduled_for    timestamptz NOT NULL,
    status           text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'claimed', 'sent', 'cancelled', 'failed', 'dead')),
    attempts         integer NOT NULL DEFAULT 0,
    last_error       text,
    cancel_reason    text CHECK (cancel_reason IN ('contact_deleted', 'unsubscribed', 'suppressed',
        'sequence_deleted', 'exit_condition', 'gate_blocked', 'manual', 'step_removed')),
    claimed_at       timestamptz,
    send_id          text,
    finished_at      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, contact_id) REFERENCES contacts (tenant_id, id) ON DELETE CASCADE
);
-- The sweep: due rows to (re-)enqueue, claims whose worker vanished.
CREATE INDEX scheduled_sends_due ON scheduled_sends (scheduled_for) WHERE status IN ('pending', 'failed');
CREATE INDEX scheduled_sends_claimed ON scheduled_sends (claimed_at) WHERE status = 'claimed';
-- GET /api/scheduled by status, and by contact.
CREATE INDEX scheduled_sends_status ON scheduled_sends (tenant_id, status, scheduled_for, id);
CREATE INDEX scheduled_sends_contact ON scheduled_sends (tenant_id, contact_id, scheduled_for, id);
CREATE INDEX scheduled_sends_enrolment ON scheduled_sends (tenant_id, enrolment_id) WHERE status IN ('pending', 'claimed', 'failed');
-- One open scheduled send per enrolment and step: a step scheduled twice by
-- a retry or a race is refused by the database.
CREATE UNIQUE INDEX scheduled_sends_step ON scheduled_sends (tenant_id, enrolment_id, step_id)
    WHERE status IN ('pending', 'claimed', 'failed');

-- +goose Down
DROP TABLE scheduled_sends;
DROP TABLE enrolments;
DROP INDEX sequences_trigger;
DROP INDEX sequences_list;
ALTER TABLE sequences DROP COLUMN definition;
