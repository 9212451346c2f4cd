-- name: SegmentLockGraph :exec
-- Serialises changes to a tenant's segment references, so two concurrent
-- PATCHes cannot each close half of a cycle.
SELECT pg_advisory_xact_lock(hashtextextended('segments:' || @tenant_id::text, 0));

-- name: SegmentInsert :one
INSERT INTO segments (tenant_id, id, name, description, rules, enabled, depends_on)
VALUES (@tenant_id, @id, @name, sqlc.narg(description), @rules, @enabled, @depends_on::text[])
RETURNING *;

-- name: SegmentGet :one
SELECT * FROM segments WHERE tenant_id = @tenant_id AND id = @id;

-- name: SegmentGetForUpdate :one
SELECT * FROM segments WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: SegmentEdgesFrom :many
-- The dependency edges reachable from the given segments, theirs included,
-- and never a rule tree: all that the cycle check needs. It reads only the
-- segments a rule tree reaches, however many the tenant has (UNION drops
-- rows already seen, so a stored cycle cannot make it run forever).
WITH RECURSIVE reach (id, depends_on) AS (
    SELECT s.id, s.depends_on FROM segments s
    WHERE s.tenant_id = @tenant_id AND s.id = ANY (@ids::text[])
  UNION
    SELECT s.id, s.depends_on FROM reach r
    JOIN segments s ON s.tenant_id = @tenant_id AND s.id = ANY (r.depends_on)
)
SELECT id::text AS id, depends_on::text[] AS depends_on FROM reach;

-- name: SegmentRulesFrom :many
-- The rules of the segments reachable from the given ones (theirs
-- included): what a compute resolves segment leaves against.
WITH RECURSIVE reach (id, depends_on) AS (
    SELECT s.id, s.depends_on FROM segments s
    WHERE s.tenant_id = @tenant_id AND s.id = ANY (@ids::text[])
  UNION
    SELECT s.id, s.depends_on FROM reach r
    JOIN segments s ON s.tenant_id = @tenant_id AND s.id = ANY (r.depends_on)
)
SELECT s.id, s.rules, s.depends_on FROM segments s
WHERE s.tenant_id = @tenant_id AND s.id IN (SELECT reach.id FROM reach);

-- name: SegmentDependedBy :many
SELECT id FROM segments WHERE tenant_id = @tenant_id AND @id::text = ANY (depends_on) ORDER BY id;

-- name: SegmentDependedByMany :many
-- dependedBy of a page of segments in one query: (segment, referrer) pairs.
SELECT d.id::text AS segment_id, s.id AS depended_by
FROM segments s CROSS JOIN LATERAL unnest(s.depends_on) AS d(id)
WHERE s.tenant_id = @tenant_id AND s.depends_on && @ids::text[] AND d.id = ANY (@ids::text[])
ORDER BY s.id;

-- name: SegmentList :many
SELECT * FROM segments
WHERE tenant_id = @tenant_id
  AND (created_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @lim;

-- name: SegmentUpdate :one
UPDATE segments SET
    name        = @name,
    description = sqlc.narg(description),
    rules       = @rules,
    enabled     = @enabled,
    version     = @version,
    depends_on  = @depends_on::text[],
    updated_at  = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: SegmentDelete :execrows
DELETE FROM segments WHERE tenant_id = @tenant_id AND id = @id;

-- name: SegmentComputed :one
UPDATE segments SET
    member_count     = (SELECT count(*) FROM segment_members m WHERE m.tenant_id = @tenant_id AND m.segment_id = @id),
    computed_version = version,
    last_computed_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: SegmentMembers :many
-- A page of members with their email, in contact id order.
SELECT m.contact_id, c.email FROM segment_members m
JOIN contacts c ON c.tenant_id = m.tenant_id AND c.id = m.contact_id
WHERE m.tenant_id = @tenant_id AND m.segment_id = @segment_id AND m.contact_id > @after::text
ORDER BY m.contact_id
LIMIT @lim;

-- name: SegmentsOfContact :many
SELECT s.id, s.name, s.member_count, s.last_computed_at
FROM segment_members m JOIN segments s ON s.tenant_id = m.tenant_id AND s.id = m.segment_id
WHERE m.tenant_id = @tenant_id AND m.contact_id = @contact_id
ORDER BY s.name, s.id;

-- name: SegmentsExisting :many
SELECT id FROM segments WHERE tenant_id = @tenant_id AND id = ANY (@ids::text[]);
