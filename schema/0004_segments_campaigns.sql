-- +goose Up
CREATE TABLE segments (
    tenant_id        text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id               text NOT NULL,
    name             text NOT NULL,
    description      text,
    rules            jsonb NOT NULL,
    enabled          boolean NOT NULL DEFAULT true,
    -- version changes when, and only when, rules change.
    version          integer NOT NULL DEFAULT 1,
    -- Segments these rules reference; dependedBy is the reverse lookup.
    depends_on       text[] NOT NULL DEFAULT '{}',
    member_count     bigint NOT NULL DEFAULT 0,
    computed_version integer,
    last_computed_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX segments_list ON segments (tenant_id, created_at DESC, id DESC);

-- Current members only. Every row was confirmed by the segment's last
-- compute, so its computedAt and version are the segment's.
CREATE TABLE segment_members (
    tenant_id  text NOT NULL,
    segment_id text NOT NULL,
    contact_id text NOT NULL,
    PRIMARY KEY (tenant_id, segment_id, contact_id),
    FOREIGN KEY (tenant_id, segment_id) REFERENCES segments (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, contact_id) REFERENCES contacts (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX segment_members_contact ON segment_members (tenant_id, contact_id);

-- Sequences are defined by their own capability; the table exists so that
-- campaigns can associate them.
CREATE TABLE sequences (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            text NOT NULL,
    name          text NOT NULL,
    content       text NOT NULL,
    trigger_event text NOT NULL,
    enabled       boolean NOT NULL DEFAULT true,
    version       integer NOT NULL DEFAULT 1,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

CREATE TABLE campaigns (
    tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           text NOT NULL,
    name         text NOT NULL,
    description  text NOT NULL DEFAULT '',
    status       text NOT NULL DEFAULT 'draft'
                 CHECK (status IN ('draft', 'active', 'paused', 'completed', 'archived')),
    -- A deleted segment leaves the id in place; it simply resolves no members.
    segment_id   text,
    goals        text[] NOT NULL DEFAULT '{}',
    sequence_ids text[] NOT NULL DEFAULT '{}',
    template_ids text[] NOT NULL DEFAULT '{}',
    started_at   timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX campaigns_list ON campaigns (tenant_id, created_at DESC, id DESC);
CREATE INDEX campaigns_status ON campaigns (tenant_id, status, created_at DESC, id DESC);

-- +goose Down
DROP TABLE campaigns;
DROP TABLE sequences;
DROP TABLE segment_members;
DROP TABLE segments;
