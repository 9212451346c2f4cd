-- Sequence definitions (internal/sequences). The engine's own queries on
-- sequences (SequencesTriggeredBy, SequenceForStep) live with the engine.

-- name: SequenceCount :one
SELECT count(*) FROM sequences WHERE tenant_id = @tenant_id;

-- name: SequenceInsert :one
-- No row means a concurrent PUT created the sequence first.
INSERT INTO sequences (tenant_id, id, name, content, definition, trigger_event, enabled)
VALUES (@tenant_id, @id, @name, @content, @definition, @trigger_event, @enabled)
ON CONFLICT (tenant_id, id) DO NOTHING
RETURNING *;

-- name: SequenceGet :one
SELECT * FROM sequences WHERE tenant_id = @tenant_id AND id = @id;

-- name: SequenceGetForUpdate :one
SELECT * FROM sequences WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: SequenceList :many
SELECT tenant_id, id, name, trigger_event, enabled, version, created_at, updated_at
FROM sequences
WHERE tenant_id = @tenant_id
  AND (created_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @lim;

-- name: SequenceUpdate :one
-- Writes a new state of the definition; the caller decides the version.
UPDATE sequences SET
    name          = @name,
    content       = @content,
    definition    = @definition,
    trigger_event = @trigger_event,
    version       = @version,
    updated_at    = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: SequenceSetEnabled :one
UPDATE sequences SET enabled = @enabled, updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: SequenceDelete :execrows
DELETE FROM sequences WHERE tenant_id = @tenant_id AND id = @id;
