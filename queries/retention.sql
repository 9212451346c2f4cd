-- Event retention and archive (internal/retention, schema 0019). The
-- worker's queries serve every tenant and carry each row's tenant; the
-- api's are scoped by tenant.

-- name: EventsEnsurePartitions :one
-- Creates the monthly partitions up to @ahead months past this one.
SELECT events_ensure_partitions(@ahead::int)::int;

-- name: RetentionDue :many
-- Tenants holding events older than their retention, with the cutoff.
SELECT t.id, (now() - make_interval(days => t.event_retention_days))::timestamptz AS cutoff
FROM tenants t
WHERE EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = t.id
              AND e.occurred_at < now() - make_interval(days => t.event_retention_days))
ORDER BY t.id;

-- name: RetentionOldest :one
-- The time of a tenant's oldest event (one index probe per partition),
-- now when it has none.
SELECT coalesce(min(occurred_at), now())::timestamptz FROM events WHERE tenant_id = @tenant_id;

-- name: ArchiveLock :one
-- One archiver per tenant and month at a time (held to the transaction's
-- end); false: another has it.
SELECT pg_try_advisory_xact_lock(hashtext('archive:' || @tenant_id::text || ':' || @month::text));

-- name: ArchiveCommitted :one
-- How much of the month's archive file is committed (0: none yet).
SELECT coalesce((SELECT bytes FROM event_archives WHERE tenant_id = @tenant_id AND month = @month), 0)::bigint;

-- name: ArchiveEventsPage :many
-- A page of the events to archive, in the order they are written.
SELECT * FROM events
WHERE tenant_id = @tenant_id AND occurred_at >= @from_time AND occurred_at < @to_time
  AND (occurred_at, id) > (@after_time::timestamptz, @after_id::text)
ORDER BY occurred_at, id
LIMIT @lim;

-- name: ArchiveEventsDelete :execrows
-- Deletes what ArchiveEventsPage read, in the same repeatable-read
-- snapshot: an event recorded since is not visible here and stays.
DELETE FROM events WHERE tenant_id = @tenant_id AND occurred_at >= @from_time AND occurred_at < @to_time;

-- name: ArchiveRecord :exec
-- Commits an append: the file's new length and the events it added.
INSERT INTO event_archives (tenant_id, month, events, bytes) VALUES (@tenant_id, @month, @events, @bytes)
ON CONFLICT (tenant_id, month) DO UPDATE SET events = event_archives.events + EXCLUDED.events,
    bytes = EXCLUDED.bytes, updated_at = now();

-- name: ArchiveList :many
SELECT * FROM event_archives WHERE tenant_id = @tenant_id AND events > 0 ORDER BY month DESC;

-- name: ArchiveGet :one
SELECT * FROM event_archives WHERE tenant_id = @tenant_id AND month = @month AND events > 0;
