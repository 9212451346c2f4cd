-- +goose Up
-- A template's current state; content is the source as stored (sanitised,
-- otherwise byte-for-byte what the client sent) and compiled_html the MJML
-- output, compiled once per version at PUT.
CREATE TABLE templates (
    tenant_id          text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id                 text NOT NULL,
    name               text NOT NULL,
    subject            text NOT NULL,
    content            text NOT NULL,
    compiled_html      text NOT NULL,
    required_variables text[] NOT NULL DEFAULT '{}',
    current_version    integer NOT NULL DEFAULT 1,
    enabled            boolean NOT NULL DEFAULT true,
    disable_reason     text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX templates_list ON templates (tenant_id, created_at DESC, id DESC);

-- Every version stays renderable: scheduled sends name the version they
-- were planned with.
CREATE TABLE template_versions (
    tenant_id     text NOT NULL,
    template_id   text NOT NULL,
    version       integer NOT NULL,
    name          text NOT NULL,
    subject       text NOT NULL,
    content       text NOT NULL,
    compiled_html text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, template_id, version),
    FOREIGN KEY (tenant_id, template_id) REFERENCES templates (tenant_id, id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE template_versions;
DROP TABLE templates;
