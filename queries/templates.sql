-- name: TemplateCount :one
SELECT count(*) FROM templates WHERE tenant_id = @tenant_id;

-- name: TemplateInsert :one
INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html, required_variables, topic,
                       layout, strict_variables, refs, missing_partials)
VALUES (@tenant_id, @id, @name, @subject, @content, @compiled_html, @required_variables::text[], sqlc.narg(topic),
        sqlc.narg(layout), @strict_variables, coalesce(@refs::text[], '{}'), coalesce(@missing_partials::text[], '{}'))
ON CONFLICT (tenant_id, id) DO NOTHING
RETURNING *;

-- name: TemplateGet :one
SELECT * FROM templates WHERE tenant_id = @tenant_id AND id = @id;

-- name: TemplateGetForUpdate :one
SELECT * FROM templates WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: TemplateUpdate :one
UPDATE templates SET
    name               = @name,
    subject            = @subject,
    content            = @content,
    compiled_html      = @compiled_html,
    required_variables = @required_variables::text[],
    current_version    = @current_version,
    enabled            = @enabled,
    disable_reason     = sqlc.narg(disable_reason),
    topic              = sqlc.narg(topic),
    layout             = sqlc.narg(layout),
    strict_variables   = @strict_variables,
    refs               = @refs::text[],
    missing_partials   = @missing_partials::text[],
    updated_at         = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: TemplateList :many
SELECT tenant_id, id, name, subject, required_variables, current_version, enabled, disable_reason, topic,
       layout, strict_variables, created_at, updated_at
FROM templates
WHERE tenant_id = @tenant_id
  AND (created_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @lim;

-- name: TemplateDelete :execrows
DELETE FROM templates WHERE tenant_id = @tenant_id AND id = @id;

-- name: TemplateVersionInsert :exec
INSERT INTO template_versions (tenant_id, template_id, version, name, subject, content, compiled_html, layout)
VALUES (@tenant_id, @template_id, @version, @name, @subject, @content, @compiled_html, sqlc.narg(layout));

-- name: TemplateVersionList :many
SELECT version, subject, created_at FROM template_versions
WHERE tenant_id = @tenant_id AND template_id = @template_id
ORDER BY version DESC;

-- name: TemplateVersionGet :one
SELECT * FROM template_versions
WHERE tenant_id = @tenant_id AND template_id = @template_id AND version = @version;

-- name: TemplateSourcesLock :exec
-- Serialises the writes that change what a tenant's templates compile
-- from (a template's source, a partial, a locale version): each compiles
-- against the partials as they stand once it holds the lock, so none
-- commits a message built from a partial another has just replaced.
SELECT pg_advisory_xact_lock(hashtextextended('template-sources:' || @tenant_id::text, 0));

-- name: TemplateRecompiled :exec
-- A partial the template uses changed: its message is compiled again. Not
-- a new version (the template's own source did not change).
UPDATE templates SET compiled_html = @compiled_html, required_variables = @required_variables::text[],
    missing_partials = @missing_partials::text[]
WHERE tenant_id = @tenant_id AND id = @id;

-- name: TemplateRefsList :many
-- The templates whose source names a partial (layout or include), with
-- what a recompile needs.
SELECT id, subject, content, layout, refs FROM templates
WHERE tenant_id = @tenant_id AND cardinality(refs) > 0;

-- name: TemplateSetLocales :exec
UPDATE templates SET locales = @locales::text[] WHERE tenant_id = @tenant_id AND id = @id;

-- name: TemplateLocaleUpsert :one
INSERT INTO template_locales (tenant_id, template_id, locale, subject, content, compiled_html, required_variables,
                              refs, missing_partials)
VALUES (@tenant_id, @template_id, @locale, @subject, @content, @compiled_html, @required_variables::text[],
        @refs::text[], @missing_partials::text[])
ON CONFLICT (tenant_id, template_id, locale) DO UPDATE SET
    subject = excluded.subject, content = excluded.content, compiled_html = excluded.compiled_html,
    required_variables = excluded.required_variables, refs = excluded.refs,
    missing_partials = excluded.missing_partials, updated_at = now()
RETURNING *;

-- name: TemplateLocaleGet :one
SELECT * FROM template_locales WHERE tenant_id = @tenant_id AND template_id = @template_id AND locale = @locale;

-- name: TemplateLocaleList :many
SELECT * FROM template_locales WHERE tenant_id = @tenant_id AND template_id = @template_id ORDER BY locale;

-- name: TemplateLocaleDelete :execrows
DELETE FROM template_locales WHERE tenant_id = @tenant_id AND template_id = @template_id AND locale = @locale;

-- name: TemplateLocaleRefsList :many
-- The locale versions whose source names a partial, with what a recompile
-- needs (the template's layout included).
SELECT l.template_id, l.locale, l.subject, l.content, t.layout, l.refs
FROM template_locales l
JOIN templates t ON t.tenant_id = l.tenant_id AND t.id = l.template_id
WHERE l.tenant_id = @tenant_id AND cardinality(l.refs) > 0;

-- name: TemplateLocaleRecompiled :exec
UPDATE template_locales SET compiled_html = @compiled_html, required_variables = @required_variables::text[],
    refs = @refs::text[], missing_partials = @missing_partials::text[]
WHERE tenant_id = @tenant_id AND template_id = @template_id AND locale = @locale;
