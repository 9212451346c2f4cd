-- name: DomainWarmupSet :one
-- Sets a domain's warm-up (each argument NULL: unchanged; @reset_schedule
-- puts the default schedule back). Turning it on from off starts again
-- at day 1 with the next message.
UPDATE domains SET
    warmup_enabled    = coalesce(sqlc.narg(enabled)::boolean, warmup_enabled),
    warmup_schedule   = CASE WHEN @reset_schedule::boolean THEN NULL
                             ELSE coalesce(sqlc.narg(schedule)::integer[], warmup_schedule) END,
    warmup_started_on = CASE WHEN sqlc.narg(enabled)::boolean AND NOT warmup_enabled THEN NULL
                             ELSE warmup_started_on END,
    updated_at        = now()
WHERE tenant_id = @tenant_id AND domain = @domain
RETURNING *;

-- name: WarmupLock :one
-- The warm-up of a sending domain, locked until the commit of the records
-- it counts (no row: warm-up is off), with what was counted on @day.
SELECT d.warmup_schedule, d.warmup_started_on,
    coalesce((SELECT w.sent FROM domain_warmup_days w
              WHERE w.tenant_id = d.tenant_id AND w.domain = d.domain AND w.day = @day::date), 0)::integer AS sent
FROM domains d
WHERE d.tenant_id = @tenant_id AND d.domain = @domain AND d.warmup_enabled
FOR NO KEY UPDATE OF d;

-- name: WarmupCount :exec
-- Counts @n messages on @day, and makes @day the domain's day 1 when it
-- has none yet.
WITH started AS (
    UPDATE domains SET warmup_started_on = @day::date
    WHERE tenant_id = @tenant_id AND domain = @domain AND warmup_started_on IS NULL
)
INSERT INTO domain_warmup_days (tenant_id, domain, day, sent) VALUES (@tenant_id, @domain, @day::date, @n::integer)
ON CONFLICT (tenant_id, domain, day) DO UPDATE SET sent = domain_warmup_days.sent + excluded.sent;

-- name: WarmupSentOn :one
SELECT coalesce((SELECT sent FROM domain_warmup_days
                 WHERE tenant_id = @tenant_id AND domain = @domain AND day = @day::date), 0)::integer;

-- name: WarmupPrune :execrows
-- Deletes counts of days long past (a week is more than any timezone's
-- "today" can be behind).
DELETE FROM domain_warmup_days WHERE day < @before::date;

-- name: WarmupSentAround :many
-- The tenant's time zone and what its listed domains counted on the days
-- from @from to @to: one query for a page of domains, whose "today" (in
-- that zone) is among those days; a domain that counted nothing has no row.
SELECT t.timezone, w.domain, w.day, w.sent
FROM tenants t
LEFT JOIN domain_warmup_days w ON w.tenant_id = t.id AND w.domain = ANY(@domains::text[])
    AND w.day BETWEEN @from_day::date AND @to_day::date
WHERE t.id = @tenant_id;
