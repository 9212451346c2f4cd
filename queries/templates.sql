-- name: TemplateCount :one
SELECT count(*) FROM templates WHERE tenant_id = @tenant_id;

-- name: TemplateInsert :one
INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html, required_variables, topic)
VALUES (@tenant_id, @id, @name, @subject, @content, @compiled_html, @required_variables::text[], sqlc.narg(topic))
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
    updated_at         = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: TemplateList :many
SELECT tenant_id, id, name, subject, required_variables, current_version, enabled, disable_reason, topic, created_at, updated_at
FROM templates
WHERE tenant_id = @tenant_id
  AND (created_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @lim;

-- name: TemplateDelete :execrows
DELETE FROM templates WHERE tenant_id = @tenant_id AND id = @id;

-- name: TemplateVersionInsert :exec
INSERT INTO template_versions (tenant_id, template_id, version, name, subject, content, compiled_html)
VALUES (@tenant_id, @template_id, @version, @name, @subject, @content, @compiled_html);

-- name: TemplateVersionList :many
SELECT version, subject, created_at FROM template_versions
WHERE tenant_id = @tenant_id AND template_id = @template_id
ORDER BY version DESC;

-- name: TemplateVersionGet :one
SELECT * FROM template_versions
WHERE tenant_id = @tenant_id AND template_id = @template_id AND version = @version;
