-- Topics (internal/topics, schema 0021). Every statement is scoped by
-- tenant.

-- name: TopicInsert :one
INSERT INTO topics (tenant_id, id, name, description, default_mode)
VALUES (@tenant_id, @id, @name, @description, @default_mode)
ON CONFLICT (tenant_id, id) DO NOTHING
RETURNING *;

-- name: TopicGet :one
SELECT * FROM topics WHERE tenant_id = @tenant_id AND id = @id;

-- name: TopicList :many
SELECT * FROM topics
WHERE tenant_id = @tenant_id AND (created_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @lim;

-- name: TopicAll :many
-- Every topic of the tenant, by name (the preference page; at most
-- MaxTopics).
SELECT * FROM topics WHERE tenant_id = @tenant_id ORDER BY name, id;

-- name: TopicCount :one
SELECT count(*)::int FROM topics WHERE tenant_id = @tenant_id;

-- name: TopicUpdate :one
UPDATE topics SET name = coalesce(sqlc.narg(name), name), description = coalesce(sqlc.narg(description), description),
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: TopicUses :many
-- What still names the topic: templates, sequences (their definition's
-- topic) and broadcasts not yet sent or cancelled; a topic in use cannot
-- be deleted.
SELECT ('template ' || t.id)::text AS what FROM templates t WHERE t.tenant_id = @tenant_id AND t.topic = @id::text
UNION ALL
SELECT 'sequence ' || s.id FROM sequences s WHERE s.tenant_id = @tenant_id AND s.definition ->> 'topic' = @id::text
UNION ALL
SELECT 'broadcast ' || b.id FROM broadcasts b WHERE b.tenant_id = @tenant_id AND b.topic = @id::text
    AND b.status NOT IN ('sent', 'cancelled')
LIMIT 10;

-- name: TopicDelete :execrows
DELETE FROM topics WHERE tenant_id = @tenant_id AND id = @id;

-- name: TopicsExist :one
-- How many of ids are topics of the tenant.
SELECT count(*)::int FROM topics WHERE tenant_id = @tenant_id AND id = ANY (@ids::text[]);

-- name: ContactSetTopics :one
-- Merges choices into the contact's topics: true or false sets a choice,
-- null removes it (the topic's default applies again).
UPDATE contacts SET topics = jsonb_strip_nulls(topics || @choices::jsonb), updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: TemplateTopic :one
SELECT topic FROM templates WHERE tenant_id = @tenant_id AND id = @id;
