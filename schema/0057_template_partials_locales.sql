-- +goose Up
-- Templates grown up (ADDENDUM 24; docs/decisions.md "Templates: layouts,
-- partials, locales").
--
-- A partial is a piece of source (MJML fragment or HTML, with Liquid) that
-- templates include ({% include 'footer' %}) or use as their layout. refs
-- are the partials it includes itself. version counts its changes.
CREATE TABLE partials (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         text NOT NULL,
    content    text NOT NULL,
    refs       text[] NOT NULL DEFAULT '{}',
    version    integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX partials_list ON partials (tenant_id, created_at DESC, id DESC);

-- A template's compiled_html is the whole message: its layout and the
-- partials it includes are put in place and compiled when the template, or
-- one of those partials, is saved (the worker compiles nothing). refs are
-- the partials its source names (layout and includes, transitively not);
-- missing_partials those of its closure that did not exist when it was
-- last compiled: a message of it fails with partial_missing until they do.
-- locales lists the tags of its locale versions, so a send needs no read to
-- learn a contact's locale has none.
ALTER TABLE templates
    ADD COLUMN layout           text,
    ADD COLUMN strict_variables boolean NOT NULL DEFAULT false,
    ADD COLUMN refs             text[] NOT NULL DEFAULT '{}',
    ADD COLUMN missing_partials text[] NOT NULL DEFAULT '{}',
    ADD COLUMN locales          text[] NOT NULL DEFAULT '{}';
ALTER TABLE template_versions ADD COLUMN layout text;

-- A template's version in another language: its own subject and content,
-- in the template's layout. locale is the canonical BCP 47 tag.
CREATE TABLE template_locales (
    tenant_id          text NOT NULL,
    template_id        text NOT NULL,
    locale             text NOT NULL,
    subject            text NOT NULL,
    content            text NOT NULL,
    compiled_html      text NOT NULL,
    required_variables text[] NOT NULL DEFAULT '{}',
    refs               text[] NOT NULL DEFAULT '{}',
    missing_partials   text[] NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, template_id, locale),
    FOREIGN KEY (tenant_id, template_id) REFERENCES templates (tenant_id, id) ON DELETE CASCADE
);

-- The tag of the locale version a message used; null for the template's own.
ALTER TABLE sends ADD COLUMN locale text;

-- +goose Down
ALTER TABLE sends DROP COLUMN locale;
DROP TABLE template_locales;
ALTER TABLE template_versions DROP COLUMN layout;
ALTER TABLE templates
    DROP COLUMN layout,
    DROP COLUMN strict_variables,
    DROP COLUMN refs,
    DROP COLUMN missing_partials,
    DROP COLUMN locales;
DROP TABLE partials;
