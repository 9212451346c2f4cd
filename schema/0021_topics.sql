-- +goose Up
-- Topics (ADDENDUM 16; docs/decisions.md "Consent"): what a message is
-- about, so a contact can leave the weekly digest and keep product news.
-- A contact's explicit choices are contacts.topics ({topicId: bool}); a
-- topic it has not chosen on follows the topic's default: opt_out means
-- subscribed until they leave, opt_in means only once they join.
CREATE TABLE topics (
    tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           text NOT NULL,
    name         text NOT NULL,
    description  text NOT NULL DEFAULT '',
    default_mode text NOT NULL CHECK (default_mode IN ('opt_in', 'opt_out')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX topics_list ON topics (tenant_id, created_at DESC, id DESC);

ALTER TABLE contacts ADD COLUMN topics jsonb NOT NULL DEFAULT '{}';
ALTER TABLE templates ADD COLUMN topic text;

-- topic_subscribed is the one rule of who a topic message may go to, for
-- SQL (the broadcast dispatch, segment rules); Go has the same rule in
-- topics.Subscribed.
-- +goose StatementBegin
CREATE FUNCTION topic_subscribed(p_choices jsonb, p_topic text, p_default text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce((p_choices ->> p_topic)::boolean, p_default = 'opt_out')
$$;
-- +goose StatementEnd

-- A step whose topic the contact left is cancelled topic_opt_out. NOT
-- VALID: the rows there hold the older reasons only, and the check of new
-- rows needs no scan of the table under this lock.
ALTER TABLE scheduled_sends DROP CONSTRAINT scheduled_sends_cancel_reason_check;
ALTER TABLE scheduled_sends ADD CONSTRAINT scheduled_sends_cancel_reason_check CHECK (cancel_reason IN
    ('contact_deleted', 'unsubscribed', 'suppressed', 'sequence_deleted', 'exit_condition', 'gate_blocked',
     'manual', 'step_removed', 'topic_opt_out')) NOT VALID;

-- +goose Down
ALTER TABLE scheduled_sends DROP CONSTRAINT scheduled_sends_cancel_reason_check;
ALTER TABLE scheduled_sends ADD CONSTRAINT scheduled_sends_cancel_reason_check CHECK (cancel_reason IN
    ('contact_deleted', 'unsubscribed', 'suppressed', 'sequence_deleted', 'exit_condition', 'gate_blocked',
     'manual', 'step_removed')) NOT VALID;
DROP FUNCTION topic_subscribed;
ALTER TABLE templates DROP COLUMN topic;
ALTER TABLE contacts DROP COLUMN topics;
DROP TABLE topics;
