-- name: CampaignInsert :one
INSERT INTO campaigns (tenant_id, id, name, description, segment_id, goals, sequence_ids, template_ids)
VALUES (@tenant_id, @id, @name, @description, sqlc.narg(segment_id), @goals::text[], @sequence_ids::text[], @template_ids::text[])
RETURNING *;

-- name: CampaignGet :one
SELECT * FROM campaigns WHERE tenant_id = @tenant_id AND id = @id;

-- name: CampaignList :many
SELECT * FROM campaigns
WHERE tenant_id = @tenant_id
  AND (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status))
  AND (created_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @lim;

-- name: CampaignUpdate :one
-- startedAt is set the first time the campaign becomes active.
UPDATE campaigns SET
    name        = coalesce(sqlc.narg(name), name),
    description = coalesce(sqlc.narg(description), description),
    status      = coalesce(sqlc.narg(status), status),
    segment_id  = CASE WHEN @set_segment::boolean THEN sqlc.narg(segment_id) ELSE segment_id END,
    goals       = CASE WHEN @set_goals::boolean THEN @goals::text[] ELSE goals END,
    started_at  = CASE WHEN started_at IS NULL AND coalesce(sqlc.narg(status), status) = 'active' THEN now() ELSE started_at END,
    updated_at  = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: CampaignDelete :execrows
DELETE FROM campaigns WHERE tenant_id = @tenant_id AND id = @id;

-- name: CampaignAddSequence :one
UPDATE campaigns SET
    sequence_ids = CASE WHEN @sequence_id::text = ANY (sequence_ids) THEN sequence_ids ELSE array_append(sequence_ids, @sequence_id::text) END,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: CampaignRemoveSequence :one
UPDATE campaigns SET sequence_ids = array_remove(sequence_ids, @sequence_id::text), updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: CampaignAddTemplate :one
UPDATE campaigns SET
    template_ids = CASE WHEN @template_id::text = ANY (template_ids) THEN template_ids ELSE array_append(template_ids, @template_id::text) END,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: CampaignRemoveTemplate :one
UPDATE campaigns SET template_ids = array_remove(template_ids, @template_id::text), updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: SequenceExists :one
SELECT EXISTS (SELECT 1 FROM sequences WHERE tenant_id = @tenant_id AND id = @id);

-- name: TemplateExists :one
SELECT EXISTS (SELECT 1 FROM templates WHERE tenant_id = @tenant_id AND id = @id);

-- name: SegmentExists :one
SELECT EXISTS (SELECT 1 FROM segments WHERE tenant_id = @tenant_id AND id = @id);

-- name: SequencesExisting :many
SELECT id FROM sequences WHERE tenant_id = @tenant_id AND id = ANY (@ids::text[]);

-- name: TemplatesExisting :many
SELECT id FROM templates WHERE tenant_id = @tenant_id AND id = ANY (@ids::text[]);
