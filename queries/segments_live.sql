-- Live segments (ADDENDUM 21): the index of what they read, the queue of
-- contacts to re-judge, and the incremental membership writes.

-- name: SegmentLiveAll :many
-- A tenant's live, enabled segments with their rules: what the drain and
-- the tick judge against.
SELECT id, rules, version, depends_on, enabled FROM segments WHERE tenant_id = @tenant_id AND live;

-- name: SegmentLiveDependedBy :many
-- The live segments whose rules name segment id.
SELECT id FROM segments WHERE tenant_id = @tenant_id AND live AND @id::text = ANY (depends_on) ORDER BY id;

-- name: SegmentLiveReadsDelete :exec
DELETE FROM segment_live_reads WHERE tenant_id = @tenant_id AND segment_id = @segment_id;

-- name: SegmentLiveReadsInsert :exec
INSERT INTO segment_live_reads (tenant_id, kind, key, segment_id)
SELECT @tenant_id, r.kind, r.key, @segment_id
FROM jsonb_to_recordset(@rows::jsonb) AS r(kind text, key text)
ON CONFLICT DO NOTHING;

-- name: SegmentSetLive :one
UPDATE segments SET live = @live, live_judged_at = CASE WHEN @live THEN now() END, updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: SegmentLiveQueueClaim :many
-- Takes up to lim queued rows that no other worker holds; the caller
-- deletes them (SegmentLiveQueueDelete) in the transaction that writes
-- their outcome, so a worker that dies leaves them queued. A row names
-- the contacts of one write statement (schema 0085).
SELECT id, tenant_id, contact_ids, segment_ids FROM segment_live_queue
ORDER BY id
LIMIT @lim
FOR UPDATE SKIP LOCKED;

-- name: SegmentLiveQueueDelete :exec
DELETE FROM segment_live_queue WHERE id = ANY (@ids::bigint[]);

-- name: SegmentLiveQueueLength :one
-- Contacts waiting to be judged (one contact queued by two writes counts
-- twice).
SELECT coalesce(sum(cardinality(contact_ids)), 0)::bigint AS contacts FROM segment_live_queue;

-- name: SegmentLiveLockContacts :exec
-- Serialises the judging of one contact: two workers holding two queue
-- rows of one contact write one after the other, the later one reading
-- what the earlier wrote. Key order, so two batches cannot deadlock.
SELECT pg_advisory_xact_lock(hashtextextended('live:' || @tenant_id::text || ':' || c, 0))
FROM unnest(@contact_ids::text[]) AS c ORDER BY c;

-- name: SegmentLiveLockShared :exec
-- Taken by incremental judging for each segment it writes; a reconcile
-- takes the same key exclusively (SegmentLiveLockExclusive).
SELECT pg_advisory_xact_lock_shared(hashtextextended('live-seg:' || @tenant_id::text || ':' || s, 0))
FROM unnest(@segment_ids::text[]) AS s ORDER BY s;

-- name: SegmentLiveLockExclusive :exec
SELECT pg_advisory_xact_lock(hashtextextended('live-seg:' || @tenant_id::text || ':' || @segment_id::text, 0));

-- name: SegmentLiveContacts :many
-- The contacts to judge, each held against deletion until commit (a member
-- row needs its contact); a deleted one is simply not returned.
SELECT * FROM contacts WHERE tenant_id = @tenant_id AND id = ANY (@ids::text[])
ORDER BY id
FOR KEY SHARE;

-- name: SegmentLiveLatestEvents :many
-- Per contact and event name, the newest event that rules count (an open
-- or click by a machine never counts: ADDENDUM 17).
SELECT c::text AS contact_id, n::text AS name, l.occurred_at
FROM unnest(@contact_ids::text[]) AS c
CROSS JOIN unnest(@names::text[]) AS n
CROSS JOIN LATERAL (
    SELECT e.occurred_at FROM events e
    WHERE e.tenant_id = @tenant_id AND e.contact_id = c AND e.name = n
      AND NOT (e.name IN ('email.opened', 'email.clicked') AND e.properties @> '{"machine": true}')
    ORDER BY e.occurred_at DESC
    LIMIT 1
) l;

-- name: SegmentLiveMembership :many
SELECT segment_id, contact_id FROM segment_members
WHERE tenant_id = @tenant_id AND contact_id = ANY (@contact_ids::text[]) AND segment_id = ANY (@segment_ids::text[]);

-- name: SegmentLiveJoin :exec
INSERT INTO segment_members (tenant_id, segment_id, contact_id)
SELECT @tenant_id, j.s, j.c FROM jsonb_to_recordset(@rows::jsonb) AS j(s text, c text)
ON CONFLICT DO NOTHING;

-- name: SegmentLiveLeave :exec
DELETE FROM segment_members m
USING jsonb_to_recordset(@rows::jsonb) AS l(s text, c text)
WHERE m.tenant_id = @tenant_id AND m.segment_id = l.s AND m.contact_id = l.c;

-- name: SegmentLiveCountAdd :exec
UPDATE segments s SET member_count = s.member_count + d.delta
FROM jsonb_to_recordset(@rows::jsonb) AS d(id text, delta bigint)
WHERE s.tenant_id = @tenant_id AND s.id = d.id;

-- name: SegmentLiveTimeline :exec
-- The segment_entered / segment_exited entries of membership changes (and
-- through schema 0071's trigger their outbound webhook messages).
INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
SELECT @tenant_id, 'tle_' || replace(gen_random_uuid()::text, '-', ''), x.c, x.t, now(),
    jsonb_build_object('segmentId', x.s)
FROM jsonb_to_recordset(@rows::jsonb) AS x(s text, c text, t text);

-- name: SegmentLiveDue :many
-- Live segments whose time rules were last judged before the cut-off, one
-- worker each (SKIP LOCKED); the tick judges and advances them.
SELECT tenant_id, id, live_judged_at FROM segments
WHERE live AND enabled AND live_judged_at < @before::timestamptz
ORDER BY live_judged_at
LIMIT @lim
FOR UPDATE SKIP LOCKED;

-- name: SegmentLiveReconcileDue :many
SELECT tenant_id, id FROM segments
WHERE live AND enabled AND (last_computed_at IS NULL OR last_computed_at < @before::timestamptz)
ORDER BY last_computed_at NULLS FIRST
LIMIT @lim;

-- name: SegmentLiveJudged :exec
UPDATE segments SET live_judged_at = @at::timestamptz WHERE tenant_id = @tenant_id AND id = @id;

-- name: SegmentLiveInactiveRange :many
-- Contacts whose inactiveDays reference instant lies in (after, upto]:
-- those whose inactiveDays crossed a whole-day bound in a tick.
SELECT id FROM contacts
WHERE tenant_id = @tenant_id
  AND coalesce(last_event_at, created_at) > @after::timestamptz
  AND coalesce(last_event_at, created_at) <= @upto::timestamptz;

-- name: SegmentLiveEventRange :many
-- Contacts with an event called name in [after, upto): those whose
-- "occurred within" may have run out in a tick.
SELECT DISTINCT contact_id FROM events
WHERE tenant_id = @tenant_id AND name = @name
  AND occurred_at >= @after::timestamptz AND occurred_at < @upto::timestamptz;

-- name: SequencesTriggeredBySegment :many
-- Enabled sequences that a segment's entered or exited starts.
SELECT id, name, enabled, version, definition FROM sequences
WHERE tenant_id = @tenant_id AND trigger_segment = @segment_id::text AND trigger_on = @trigger_on::text AND enabled
ORDER BY id;

-- name: SequencesNamingSegment :many
SELECT id FROM sequences WHERE tenant_id = @tenant_id AND trigger_segment = @segment_id::text ORDER BY id;

-- name: SegmentsNotLive :many
-- Which of ids are segments that are not live: a live segment may refer
-- only to live ones.
SELECT id FROM segments WHERE tenant_id = @tenant_id AND id = ANY (@ids::text[]) AND NOT live ORDER BY id;

-- name: SegmentLiveNow :one
-- The transaction's instant: what now() means in the rules' SQL, so the
-- Go evaluator judges at the same instant.
SELECT now()::timestamptz AS now;

-- name: SegmentIsMember :one
SELECT EXISTS (SELECT 1 FROM segment_members
    WHERE tenant_id = @tenant_id AND segment_id = @segment_id AND contact_id = @contact_id);

-- name: SequenceSetSegmentTrigger :exec
-- A sequence's segment trigger as its definition states it (NULL for one
-- started by an event).
UPDATE sequences SET trigger_segment = sqlc.narg(trigger_segment), trigger_on = sqlc.narg(trigger_on)
WHERE tenant_id = @tenant_id AND id = @id;
