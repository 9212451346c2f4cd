-- +goose Up
-- Broadcasts (ADDENDUM 13): one template to a segment's members, at one
-- instant or at one wall-clock time in each contact's zone. The audience is
-- snapshotted into broadcast_recipients when sending starts; each recipient
-- row is the truth of what became of that contact, and its message goes
-- through the send ledger like every other (sends.broadcast_id).
CREATE TABLE broadcasts (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            text NOT NULL,
    name          text NOT NULL,
    template_id   text NOT NULL,
    segment_id    text NOT NULL,
    campaign_id   text,
    from_address  text,
    topic         text,
    status        text NOT NULL DEFAULT 'draft'
        CHECK (status IN ('draft', 'scheduled', 'sending', 'paused', 'sent', 'cancelled')),
    -- sendAt as given: an instant, or (local_time) a wall-clock time with
    -- no zone, read in each recipient's zone.
    send_at       timestamptz,
    local_send_at text,
    local_time    boolean NOT NULL DEFAULT false,
    -- When a scheduled broadcast starts: send_at, or for local_time the
    -- earliest instant its wall-clock time occurs in any of the tenant's
    -- zones when it was scheduled.
    starts_at     timestamptz,
    -- The status a paused broadcast resumes to (scheduled or sending).
    resume_to     text,
    -- The audience has been written (recipients holds its size).
    snapshotted   boolean NOT NULL DEFAULT false,
    -- The audience's size; what became of it is in broadcast_counts.
    recipients    bigint NOT NULL DEFAULT 0,
    -- The latest scheduledFor of a recipient: when a local-time broadcast
    -- will have reached its last zone.
    last_scheduled_for timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    completed_at  timestamptz,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX broadcasts_list ON broadcasts (tenant_id, created_at DESC, id DESC);
-- The sweep: scheduled broadcasts whose start has come, and started ones
-- whose audience is not written yet.
CREATE INDEX broadcasts_due ON broadcasts (starts_at) WHERE status = 'scheduled' OR (status = 'sending' AND NOT snapshotted);

CREATE TABLE broadcast_recipients (
    tenant_id     text NOT NULL,
    broadcast_id  text NOT NULL,
    contact_id    text NOT NULL,
    email         text NOT NULL,
    status        text NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'sent', 'skipped', 'failed', 'cancelled')),
    skip_reason   text,
    send_id       text,
    scheduled_for timestamptz NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    -- A worker holds a queued recipient from claimed_at until its message is
    -- settled; a claim older than SEND_CLAIM_TIMEOUT is taken again (its
    -- worker died), and finds the message's record if it was written.
    claimed_at    timestamptz,
    last_error    text,
    PRIMARY KEY (tenant_id, broadcast_id, contact_id)
);
-- The dispatch claim: a broadcast's queued recipients by due time.
CREATE INDEX broadcast_recipients_due ON broadcast_recipients (tenant_id, broadcast_id, scheduled_for) WHERE status = 'queued';

-- Recipient counters (queued is recipients minus the others), moved by the
-- statements that move recipients, on the transaction's shard of 16: a
-- broadcast's stats are a few rows read, not a count over a million, and
-- concurrent dispatch batches do not queue on one hot row.
CREATE TABLE broadcast_counts (
    tenant_id    text NOT NULL,
    broadcast_id text NOT NULL,
    shard        smallint NOT NULL CHECK (shard BETWEEN 0 AND 15),
    sent         bigint NOT NULL DEFAULT 0,
    skipped      bigint NOT NULL DEFAULT 0,
    failed       bigint NOT NULL DEFAULT 0,
    cancelled    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, broadcast_id, shard)
);

-- A broadcast's send records; unique per recipient, so however a claim is
-- repeated, one contact gets at most one message of a broadcast.
ALTER TABLE sends ADD COLUMN broadcast_id text;
CREATE UNIQUE INDEX sends_broadcast ON sends (tenant_id, broadcast_id, contact_id) WHERE broadcast_id IS NOT NULL;
-- GET /api/sends?broadcastId=, newest first.
CREATE INDEX sends_broadcast_list ON sends (tenant_id, broadcast_id, sent_at DESC, id DESC) WHERE broadcast_id IS NOT NULL;

-- Broadcast counters beside the sequence and template ones; unsubscribes
-- that a message caused are counted too.
ALTER TABLE metric_counts DROP CONSTRAINT metric_counts_scope_check;
ALTER TABLE metric_counts ADD CONSTRAINT metric_counts_scope_check
    CHECK (scope IN ('tenant', 'sequence', 'template', 'broadcast'));
ALTER TABLE metric_counts ADD COLUMN unsubscribed bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE metric_counts DROP COLUMN unsubscribed;
ALTER TABLE metric_counts DROP CONSTRAINT metric_counts_scope_check;
ALTER TABLE metric_counts ADD CONSTRAINT metric_counts_scope_check CHECK (scope IN ('tenant', 'sequence', 'template'));
DROP INDEX sends_broadcast_list;
DROP INDEX sends_broadcast;
ALTER TABLE sends DROP COLUMN broadcast_id;
DROP TABLE broadcast_counts;
DROP TABLE broadcast_recipients;
DROP TABLE broadcasts;
