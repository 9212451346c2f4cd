-- +goose Up
CREATE TABLE contacts (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            text NOT NULL,
    email         text NOT NULL,
    user_id       text,
    properties    jsonb NOT NULL DEFAULT '{}',
    subscribed    boolean NOT NULL DEFAULT true,
    suppressed    boolean NOT NULL DEFAULT false,
    -- Derived fields (ADDENDUM section 4), maintained by events.Record.
    total_sends   bigint NOT NULL DEFAULT 0,
    total_opens   bigint NOT NULL DEFAULT 0,
    total_clicks  bigint NOT NULL DEFAULT 0,
    last_event_at timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    -- Uniqueness under concurrency is the database's job, not a read-then-write.
    CONSTRAINT contacts_email_key UNIQUE (tenant_id, email)
);
-- Keyset pagination, newest first, and the "added in the last N days" stats.
CREATE INDEX contacts_created ON contacts (tenant_id, created_at DESC, id DESC);
CREATE INDEX contacts_suppressed ON contacts (tenant_id) WHERE suppressed;

-- Custom and system events. Rows go when their contact goes.
CREATE TABLE events (
    tenant_id           text NOT NULL,
    id                  text NOT NULL,
    contact_id          text NOT NULL,
    name                text NOT NULL,
    properties          jsonb NOT NULL DEFAULT '{}',
    occurred_at         timestamptz NOT NULL,
    processed_sequences text[] NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, contact_id) REFERENCES contacts (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX events_feed ON events (tenant_id, occurred_at DESC, id DESC);
CREATE INDEX events_feed_name ON events (tenant_id, name, occurred_at DESC, id DESC);
-- The per-contact feed and timeline; also "has this contact had event X since T".
CREATE INDEX events_contact ON events (tenant_id, contact_id, occurred_at DESC, id DESC);
CREATE INDEX events_contact_name ON events (tenant_id, contact_id, name, occurred_at DESC);

-- Timeline entries that are not events (sequence lifecycle, scheduled sends).
-- Later capabilities only append rows here; the timeline merges this table
-- with events.
CREATE TABLE timeline_entries (
    tenant_id   text NOT NULL,
    id          text NOT NULL,
    contact_id  text NOT NULL,
    type        text NOT NULL,
    occurred_at timestamptz NOT NULL,
    data        jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, contact_id) REFERENCES contacts (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX timeline_entries_contact ON timeline_entries (tenant_id, contact_id, occurred_at DESC, id DESC);

-- +goose Down
DROP TABLE timeline_entries;
DROP TABLE events;
DROP TABLE contacts;
