-- name: PartialGet :one
SELECT * FROM partials WHERE tenant_id = @tenant_id AND id = @id;

-- name: PartialAll :many
-- Every partial of the tenant: what includes resolve against. A tenant has
-- a handful; a compile needs the ones a template reaches, transitively.
SELECT id, content, refs FROM partials WHERE tenant_id = @tenant_id;

-- name: PartialUpsert :one
INSERT INTO partials (tenant_id, id, content, refs)
VALUES (@tenant_id, @id, @content, @refs::text[])
ON CONFLICT (tenant_id, id) DO UPDATE SET
    content = excluded.content, refs = excluded.refs,
    version = partials.version + 1, updated_at = now()
WHERE partials.content IS DISTINCT FROM excluded.content
RETURNING *, (xmax = 0)::boolean AS created;

-- name: PartialList :many
SELECT * FROM partials
WHERE tenant_id = @tenant_id
  AND (created_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @lim;

-- name: PartialReferrers :many
-- Who names the partial directly: templates (their own source or layout),
-- locale versions and other partials. A partial that is referred to is
-- not deleted.
SELECT 'template' AS kind, id AS name FROM templates t
WHERE t.tenant_id = @tenant_id AND @id::text = ANY(t.refs)
UNION ALL
SELECT 'locale', l.template_id || '/' || l.locale FROM template_locales l
WHERE l.tenant_id = @tenant_id AND @id::text = ANY(l.refs)
UNION ALL
SELECT 'partial', p.id FROM partials p
WHERE p.tenant_id = @tenant_id AND @id::text = ANY(p.refs) AND p.id <> @id::text
ORDER BY 1, 2;

-- name: PartialDelete :execrows
DELETE FROM partials WHERE tenant_id = @tenant_id AND id = @id;
