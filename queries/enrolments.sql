-- Enrolments (schema 0010) and the two reads of sequences the engine owns.
-- Timeline entries of an enrolment's life have ids derived from the
-- enrolment's id (tle_<enrolment>:entered, :exited, :completed): each
-- happens once per enrolment, and statements that end many enrolments at
-- once write them in SQL without a round trip per row. The entered entry
-- is not written at all since schema 0032: the timeline reads it from the
-- enrolment.

-- name: SequencesTriggeredBy :many
-- The enabled sequences of a tenant that the custom event name triggers
-- (index sequences_trigger).
SELECT id, name, enabled, version, definition FROM sequences
WHERE tenant_id = @tenant_id AND trigger_event = @name AND enabled
ORDER BY id;

-- name: SequencesTriggeredByMany :many
-- SequencesTriggeredBy for every (tenant, event name) pair of a batch of
-- events, in one read.
SELECT s.tenant_id, s.trigger_event, s.id, s.name, s.enabled, s.version, s.definition FROM sequences s
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@names::text[]) AS name) k
  ON s.tenant_id = k.tenant_id AND s.trigger_event = k.name
WHERE s.enabled
ORDER BY s.tenant_id, s.trigger_event, s.id;

-- name: SequenceForStep :one
-- What the engine needs of one sequence to run a step.
SELECT id, name, enabled, version, definition FROM sequences
WHERE tenant_id = @tenant_id AND id = @id;

-- name: EnrolmentSequenceStatus :one
-- GET /api/sequences/{id}/status: the sequence and its enrolment counts.
SELECT s.id, s.name, s.enabled, s.version, s.created_at, s.updated_at,
    count(e.id) FILTER (WHERE e.status = 'active')::bigint AS active,
    count(e.id) FILTER (WHERE e.status = 'paused')::bigint AS paused,
    count(e.id) FILTER (WHERE e.status = 'completed')::bigint AS completed,
    count(e.id) FILTER (WHERE e.status = 'exited')::bigint AS exited
FROM sequences s
LEFT JOIN enrolments e ON e.tenant_id = s.tenant_id AND e.sequence_id = s.id AND e.enrolled_at >= s.created_at
WHERE s.tenant_id = @tenant_id AND s.id = @id
GROUP BY s.tenant_id, s.id;

-- name: EnrolmentLatest :one
-- The contact's newest enrolment in the sequence as it now exists, open or
-- ended: enrolments of a deleted sequence that was created again under
-- the same id (enrolled before its creation) do not count.
SELECT e.* FROM enrolments e
JOIN sequences s ON s.tenant_id = e.tenant_id AND s.id = e.sequence_id
WHERE e.tenant_id = @tenant_id AND e.sequence_id = @sequence_id AND e.contact_id = @contact_id
  AND e.enrolled_at >= s.created_at
ORDER BY e.enrolled_at DESC, e.id DESC
LIMIT 1;

-- name: EnrolmentInsert :one
-- No row when the contact already has an open enrolment in the sequence
-- (enrolments_open): a concurrent enrolment won. The enrolment is its own
-- sequence_entered timeline entry (see Timeline in events.sql).
INSERT INTO enrolments (tenant_id, id, sequence_id, contact_id, current_step, current_step_index, trigger_event_id,
    sequence_version, trigger_event_name, branch, holdout_until)
VALUES (@tenant_id, @id, @sequence_id, @contact_id, @current_step, @current_step_index, @trigger_event_id,
    @sequence_version, @trigger_event_name, @branch,
    CASE WHEN sqlc.narg(holdout_seconds)::float8 IS NOT NULL THEN now() + make_interval(secs => sqlc.narg(holdout_seconds)::float8) END)
ON CONFLICT (tenant_id, sequence_id, contact_id) WHERE status IN ('active', 'paused') DO NOTHING
RETURNING *;

-- name: EnrolmentOpen :one
-- The contact's open (active or paused) enrolment in the sequence.
SELECT * FROM enrolments
WHERE tenant_id = @tenant_id AND sequence_id = @sequence_id AND contact_id = @contact_id
  AND status IN ('active', 'paused');

-- name: EnrolmentGetForUpdate :one
SELECT * FROM enrolments WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: EnrolmentForAdvance :one
-- The enrolment, locked, and its sequence's version and definition (null
-- when deleted): what moving on after a sent step reads, in one round trip.
SELECT sqlc.embed(e), sq.version AS seq_version, sq.definition AS seq_definition
FROM enrolments e
LEFT JOIN sequences sq ON sq.tenant_id = e.tenant_id AND sq.id = e.sequence_id
WHERE e.tenant_id = @tenant_id AND e.id = @id
FOR UPDATE OF e;

-- name: EnrolmentAdvance :one
-- Moves an active enrolment to the step its next scheduled send is for.
UPDATE enrolments SET current_step = @current_step, current_step_index = @current_step_index, updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id AND status = 'active'
RETURNING *;

-- name: EnrolmentEnd :one
-- Ends one open enrolment (completed, or exited with a reason) and writes
-- its timeline entry. No row: it had ended already.
WITH ended AS (
    UPDATE enrolments SET status = @status::text, exit_reason = sqlc.narg(exit_reason)::text,
        current_step = coalesce(sqlc.narg(current_step)::text, current_step),
        current_step_index = coalesce(sqlc.narg(current_step_index)::integer, current_step_index),
        ended_at = now(), updated_at = now()
    WHERE enrolments.tenant_id = @tenant_id AND enrolments.id = @id AND enrolments.status IN ('active', 'paused')
    RETURNING *
), entry AS (
    INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
    SELECT e.tenant_id, 'tle_' || e.id || ':' || e.status, e.contact_id,
        CASE WHEN e.status = 'completed' THEN 'sequence_completed' ELSE 'sequence_exited' END, now(),
        jsonb_strip_nulls(jsonb_build_object('sequenceId', e.sequence_id, 'enrolmentId', e.id, 'reason', e.exit_reason))
    FROM ended e
)
SELECT * FROM ended;

-- name: EnrolmentExitByContact :exec
-- Exits the contact's open enrolments (unsubscribed, suppressed), with
-- their timeline entries.
WITH ended AS (
    UPDATE enrolments SET status = 'exited', exit_reason = @reason::text, ended_at = now(), updated_at = now()
    WHERE enrolments.tenant_id = @tenant_id AND enrolments.contact_id = @contact_id AND enrolments.status IN ('active', 'paused')
    RETURNING tenant_id, id, sequence_id, contact_id
), entry AS (
    INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
    SELECT x.tenant_id, 'tle_' || x.id || ':exited', x.contact_id, 'sequence_exited', now(),
        jsonb_build_object('sequenceId', x.sequence_id, 'enrolmentId', x.id, 'reason', @reason::text)
    FROM ended x
)
SELECT count(*) FROM ended;

-- name: EnrolmentExitBySequence :exec
-- Exits the sequence's open enrolments (sequence_deleted).
WITH ended AS (
    UPDATE enrolments SET status = 'exited', exit_reason = @reason::text, ended_at = now(), updated_at = now()
    WHERE enrolments.tenant_id = @tenant_id AND enrolments.sequence_id = @sequence_id AND enrolments.status IN ('active', 'paused')
    RETURNING tenant_id, id, sequence_id, contact_id
), entry AS (
    INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
    SELECT x.tenant_id, 'tle_' || x.id || ':exited', x.contact_id, 'sequence_exited', now(),
        jsonb_build_object('sequenceId', x.sequence_id, 'enrolmentId', x.id, 'reason', @reason::text)
    FROM ended x
)
SELECT count(*) FROM ended;

-- name: EnrolmentSetPaused :execrows
-- Disabling pauses the sequence's active enrolments; enabling resumes the
-- paused ones.
UPDATE enrolments SET status = CASE WHEN @paused::boolean THEN 'paused' ELSE 'active' END, updated_at = now()
WHERE tenant_id = @tenant_id AND sequence_id = @sequence_id
  AND status = CASE WHEN @paused::boolean THEN 'active' ELSE 'paused' END;

-- name: EnrolmentListBySequence :many
-- Open enrolments of a sequence, newest first, with the contact's email.
SELECT e.contact_id, c.email, e.status, e.enrolled_at, e.current_step_index, e.id, e.branch
FROM enrolments e
JOIN contacts c ON c.tenant_id = e.tenant_id AND c.id = e.contact_id
WHERE e.tenant_id = @tenant_id AND e.sequence_id = @sequence_id AND e.status IN ('active', 'paused')
  AND (e.enrolled_at, e.id) < (@before_time::timestamptz, @before_id::text)
ORDER BY e.enrolled_at DESC, e.id DESC
LIMIT @lim;

-- name: EnrolmentListByContact :many
-- Every enrolment of a contact, newest first (bounded by lim).
SELECT * FROM enrolments
WHERE tenant_id = @tenant_id AND contact_id = @contact_id
ORDER BY enrolled_at DESC, id DESC
LIMIT @lim;

-- name: EnrolmentHasEvent :one
-- Whether the contact had an event called name at or after after, the
-- event that enrolled it (exclude_id) left out, and an open or click by a
-- machine too (ADDENDUM 17: never engagement).
SELECT EXISTS (SELECT 1 FROM events
    WHERE tenant_id = @tenant_id AND contact_id = @contact_id AND name = @name
      AND occurred_at >= @after::timestamptz AND id <> @exclude_id::text
      AND NOT (name IN ('email.opened', 'email.clicked') AND properties @> '{"machine": true}'));

-- name: EnrolmentTriggerEvent :one
-- The event that enrolled a contact, for the render context.
SELECT name, properties, occurred_at FROM events WHERE tenant_id = @tenant_id AND id = @id;

-- name: EnrolmentLatestForContacts :many
-- EnrolmentLatestMany for many contacts: the newest enrolment, open or
-- ended, of each (tenant, contact, sequence) triple of the arrays, in one
-- read of one index range per triple (LATERAL, whatever the statistics
-- say); a re-created sequence's earlier enrolments do not count.
SELECT l.* FROM (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@contact_ids::text[]) AS contact_id,
        unnest(@sequence_ids::text[]) AS sequence_id) k
CROSS JOIN LATERAL (
    SELECT e.* FROM enrolments e JOIN sequences s ON s.tenant_id = e.tenant_id AND s.id = e.sequence_id
    WHERE e.tenant_id = k.tenant_id AND e.contact_id = k.contact_id AND e.sequence_id = k.sequence_id
      AND e.enrolled_at >= s.created_at
    ORDER BY e.enrolled_at DESC, e.id DESC
    LIMIT 1) l;

-- name: EnrolmentActiveWithExitForContacts :many
-- The active enrolments of these contacts (tenant and contact arrays)
-- whose sequence has an exit condition, unlocked: the only ones an event
-- can end, usually none. Each contact's enrolments are one range of
-- enrolments_contact: OFFSET 0 keeps the subquery apart (a probe per
-- contact, never a join the statistics choose) and the status is tested
-- outside it, so the partial enrolments_open, whose contact column is not
-- a prefix, is never scanned for a tenant's every open enrolment.
SELECT l.* FROM (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@contact_ids::text[]) AS contact_id) k
CROSS JOIN LATERAL (
    SELECT e.* FROM enrolments e WHERE e.tenant_id = k.tenant_id AND e.contact_id = k.contact_id
    OFFSET 0) l
WHERE l.status = 'active' AND EXISTS (SELECT 1 FROM sequences sq WHERE sq.tenant_id = l.tenant_id AND sq.id = l.sequence_id
    AND sq.definition ? 'exit' AND sq.definition->'exit' <> 'null'::jsonb);

-- name: EnrolmentActiveWithExitOfContact :many
-- EnrolmentActiveWithExitForContacts for one contact, the statement of a
-- lone event: with scalar parameters its plan is cached, where the arrays'
-- estimate follows their length and is planned again at every execution.
SELECT l.* FROM (
    SELECT e.* FROM enrolments e WHERE e.tenant_id = @tenant_id AND e.contact_id = @contact_id
    OFFSET 0) l
WHERE l.status = 'active' AND EXISTS (SELECT 1 FROM sequences sq WHERE sq.tenant_id = l.tenant_id AND sq.id = l.sequence_id
    AND sq.definition ? 'exit' AND sq.definition->'exit' <> 'null'::jsonb);

-- name: EnrolmentLockActive :many
-- Locks the enrolments named by the (tenant, id) arrays, in the arrays'
-- order (the caller sorts them by key), and returns those still active.
SELECT l.* FROM (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ids::text[]) AS id) k
CROSS JOIN LATERAL (
    SELECT e.* FROM enrolments e WHERE e.tenant_id = k.tenant_id AND e.id = k.id AND e.status = 'active'
    FOR UPDATE) l;

-- name: EnrolmentStartForContacts :many
-- EnrolmentStartMany for many contacts, each enrolled by its own event: one
-- enrolment per array position (each its own sequence_entered timeline
-- entry, as for EnrolmentInsert). A position whose contact already has an
-- open enrolment in the sequence (a concurrent event won) is left out of
-- what comes back.
INSERT INTO enrolments (tenant_id, id, sequence_id, contact_id, current_step, current_step_index, trigger_event_id,
    sequence_version, trigger_event_name, branch, holdout_until)
SELECT unnest(@tenant_ids::text[]), unnest(@ids::text[]), unnest(@sequence_ids::text[]), unnest(@contact_ids::text[]),
    unnest(@current_steps::text[]), unnest(@current_step_indexes::integer[]), unnest(@event_ids::text[]),
    unnest(@versions::integer[]), unnest(@event_names::text[]), unnest(@branches::text[]),
    -- A negative holdout_seconds: not held out (NULL holdout_until).
    now() + make_interval(secs => nullif(unnest(@holdout_seconds::float8[]), -1))
ON CONFLICT (tenant_id, sequence_id, contact_id) WHERE status IN ('active', 'paused') DO NOTHING
RETURNING *;

-- name: EnrolmentConvert :many
-- Converts the contact's enrolments whose sequence has the event's name as
-- its goal (sequences_goal) and whose window holds the event's time:
-- enrolled at or before it, within goal.within after. Any status converts
-- (an enrolment that completed or exited still counts in its window); each
-- converts once, at the first goal event (a later one conflicts and writes
-- nothing). The event that enrolled the contact does not convert its own
-- enrolment. It returns the enrolments it converted and whether each
-- exits (the sequence's exitOnGoal, kept with the conversion). One INSERT
-- ... SELECT, no CTE: an event that is no sequence's goal stops at the
-- sequences_goal probe.
INSERT INTO enrolment_conversions (tenant_id, enrolment_id, event_id, converted_at, exits)
SELECT e.tenant_id, e.id, @event_id::text, @at::timestamptz, s.exit_on_goal
FROM sequences s
JOIN enrolments e ON e.tenant_id = s.tenant_id AND e.sequence_id = s.id
WHERE s.tenant_id = @tenant_id AND s.goal_event = @name::text
  AND e.contact_id = @contact_id
  AND e.enrolled_at >= s.created_at
  AND e.enrolled_at <= @at::timestamptz
  AND @at::timestamptz <= e.enrolled_at + make_interval(secs => s.goal_within_seconds)
  AND e.trigger_event_id IS DISTINCT FROM @event_id::text
ON CONFLICT DO NOTHING
RETURNING tenant_id, enrolment_id, exits;

-- name: EnrolmentConvertMany :many
-- EnrolmentConvert for a batch of events of distinct contacts, one array
-- position per event.
INSERT INTO enrolment_conversions (tenant_id, enrolment_id, event_id, converted_at, exits)
SELECT e.tenant_id, e.id, ev.event_id, ev.at, s.exit_on_goal
FROM (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@contact_ids::text[]) AS contact_id,
        unnest(@names::text[]) AS name, unnest(@ats::timestamptz[]) AS at, unnest(@event_ids::text[]) AS event_id) ev
JOIN sequences s ON s.tenant_id = ev.tenant_id AND s.goal_event = ev.name
JOIN enrolments e ON e.tenant_id = ev.tenant_id AND e.contact_id = ev.contact_id AND e.sequence_id = s.id
WHERE e.enrolled_at >= s.created_at
  AND e.enrolled_at <= ev.at AND ev.at <= e.enrolled_at + make_interval(secs => s.goal_within_seconds)
  AND e.trigger_event_id IS DISTINCT FROM ev.event_id
ON CONFLICT DO NOTHING
RETURNING tenant_id, enrolment_id, exits;

-- name: EnrolmentConversion :one
-- An enrolment's conversion (tests and support).
SELECT * FROM enrolment_conversions WHERE tenant_id = @tenant_id AND enrolment_id = @enrolment_id;

-- name: EnrolmentCompleteHoldouts :many
-- Completes the holdout enrolments whose time has come (holdout_until:
-- when the sequence would have reached its last email step), at most lim
-- of them, with their timeline entries; they end at their last step as a
-- completed enrolment does. Oldest first along enrolments_holdout_due,
-- skipping rows another transaction holds (the next sweep finds them; a
-- skipped lock is never waited for, so the order cannot deadlock).
WITH due AS (
    SELECT e.tenant_id, e.id FROM enrolments e
    WHERE e.status = 'active' AND e.holdout_until IS NOT NULL AND e.holdout_until <= @now::timestamptz
    ORDER BY e.holdout_until
    LIMIT @lim
    FOR UPDATE SKIP LOCKED
), ended AS (
    UPDATE enrolments e SET status = 'completed', ended_at = now(), updated_at = now(),
        current_step = coalesce((SELECT sq.definition -> 'steps' -> -1 ->> 'id' FROM sequences sq
            WHERE sq.tenant_id = e.tenant_id AND sq.id = e.sequence_id), e.current_step),
        current_step_index = coalesce((SELECT jsonb_array_length(sq.definition -> 'steps') FROM sequences sq
            WHERE sq.tenant_id = e.tenant_id AND sq.id = e.sequence_id), e.current_step_index)
    FROM due
    WHERE e.tenant_id = due.tenant_id AND e.id = due.id
    RETURNING e.tenant_id, e.id, e.sequence_id, e.contact_id
), entry AS (
    INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
    SELECT x.tenant_id, 'tle_' || x.id || ':completed', x.contact_id, 'sequence_completed', now(),
        jsonb_build_object('sequenceId', x.sequence_id, 'enrolmentId', x.id)
    FROM ended x
)
SELECT tenant_id, id FROM ended;

-- name: SequenceExperimentEnrolments :many
-- GET /api/sequences/{id}/experiment: the enrolments of the sequence as it
-- now exists, by branch, and the converted ones.
SELECT e.branch, count(*)::bigint AS entered, count(c.enrolment_id)::bigint AS converted
FROM enrolments e
JOIN sequences s ON s.tenant_id = e.tenant_id AND s.id = e.sequence_id
LEFT JOIN enrolment_conversions c ON c.tenant_id = e.tenant_id AND c.enrolment_id = e.id
WHERE e.tenant_id = @tenant_id AND e.sequence_id = @sequence_id AND e.enrolled_at >= s.created_at
GROUP BY e.branch;

-- name: SequenceExperimentSends :many
-- The sequence's messages by the branch of the enrolment that sent them
-- (the contact's newest enrolment at the time; a contact keeps its branch
-- across enrolments, as the draw is a hash of the two ids), and of them
-- the delivered, opened and clicked ones (people's first open and click,
-- as the broadcast variants count them).
SELECT coalesce(b.branch, 'default')::text AS branch, count(*)::bigint AS sent,
    count(m.delivered_at)::bigint AS delivered, count(m.opened_at)::bigint AS opened,
    count(m.clicked_at)::bigint AS clicked
FROM sends m
JOIN sequences s ON s.tenant_id = m.tenant_id AND s.id = m.sequence_id
LEFT JOIN LATERAL (
    SELECT e.branch FROM enrolments e
    WHERE e.tenant_id = m.tenant_id AND e.contact_id = m.contact_id AND e.sequence_id = m.sequence_id
      AND e.enrolled_at <= m.sent_at
    ORDER BY e.enrolled_at DESC LIMIT 1
) b ON true
WHERE m.tenant_id = @tenant_id AND m.sequence_id = @sequence_id::text AND m.sent_at >= s.created_at
GROUP BY 1;
