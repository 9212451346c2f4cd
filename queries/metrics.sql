-- Metrics counters (schema 0011, internal/metrics). The readers' updated_at
-- is 0001-01-01 (Go's zero time) when nothing was counted yet.

-- name: MetricsAdd :exec
-- Adds counts to the counter rows of the calling transaction's shard, all
-- scopes of all facts in one statement (internal/metrics.Count). rows is a
-- JSON array of objects with the columns below; a null `at` means the
-- transaction's now(). Rows are grouped by key first (ON CONFLICT may touch
-- a row only once per statement) and written in one fixed order, each
-- tenant's day rows first, so that two transactions do not lock the same
-- rows in opposite orders. The shard is the transaction id mod 16: every
-- statement of one transaction writes the same shard, and concurrent
-- transactions mostly different ones.
INSERT INTO metric_counts AS m (tenant_id, scope, scope_id, period, shard, scheduled, sent, cancelled, delivered,
    bounced_hard, bounced_soft, complained, opened, clicked, unsubscribed, machine_opened, machine_clicked, updated_at)
SELECT r.tenant_id, r.scope, r.scope_id, r.period, (pg_current_xact_id()::text::bigint % 16)::smallint,
    sum(r.scheduled), sum(r.sent), sum(r.cancelled), sum(r.delivered), sum(r.bounced_hard), sum(r.bounced_soft),
    sum(r.complained), sum(r.opened), sum(r.clicked), sum(r.unsubscribed), sum(r.machine_opened), sum(r.machine_clicked), now()
FROM (
    SELECT u.tenant_id, u.scope, u.scope_id,
        CASE WHEN u.scope = 'tenant' THEN (coalesce(u.at, now()) AT TIME ZONE 'UTC')::date
             ELSE date_trunc('month', coalesce(u.at, now()) AT TIME ZONE 'UTC')::date END AS period,
        coalesce(u.scheduled, 0) AS scheduled, coalesce(u.sent, 0) AS sent, coalesce(u.cancelled, 0) AS cancelled,
        coalesce(u.delivered, 0) AS delivered, coalesce(u.bounced_hard, 0) AS bounced_hard,
        coalesce(u.bounced_soft, 0) AS bounced_soft, coalesce(u.complained, 0) AS complained,
        coalesce(u.opened, 0) AS opened, coalesce(u.clicked, 0) AS clicked, coalesce(u.unsubscribed, 0) AS unsubscribed,
        coalesce(u.machine_opened, 0) AS machine_opened, coalesce(u.machine_clicked, 0) AS machine_clicked
    FROM jsonb_to_recordset(@rows::jsonb) AS u(tenant_id text, scope text, scope_id text, at timestamptz,
        scheduled bigint, sent bigint, cancelled bigint, delivered bigint, bounced_hard bigint, bounced_soft bigint,
        complained bigint, opened bigint, clicked bigint, unsubscribed bigint, machine_opened bigint, machine_clicked bigint)
) r
GROUP BY r.tenant_id, r.scope, r.scope_id, r.period
ORDER BY r.tenant_id, r.scope <> 'tenant', r.scope, r.scope_id, r.period
ON CONFLICT (tenant_id, scope, scope_id, period, shard) DO UPDATE SET
    scheduled    = m.scheduled + EXCLUDED.scheduled,
    sent         = m.sent + EXCLUDED.sent,
    cancelled    = m.cancelled + EXCLUDED.cancelled,
    delivered    = m.delivered + EXCLUDED.delivered,
    bounced_hard = m.bounced_hard + EXCLUDED.bounced_hard,
    bounced_soft = m.bounced_soft + EXCLUDED.bounced_soft,
    complained   = m.complained + EXCLUDED.complained,
    opened       = m.opened + EXCLUDED.opened,
    clicked      = m.clicked + EXCLUDED.clicked,
    unsubscribed = m.unsubscribed + EXCLUDED.unsubscribed,
    machine_opened  = m.machine_opened + EXCLUDED.machine_opened,
    machine_clicked = m.machine_clicked + EXCLUDED.machine_clicked,
    updated_at   = greatest(m.updated_at, EXCLUDED.updated_at);

-- name: MetricsTenantDays :many
-- The tenant's counters per UTC day from first_day to last_day inclusive,
-- summed over shards; days without counts are absent.
SELECT period,
    sum(scheduled)::bigint AS scheduled, sum(sent)::bigint AS sent, sum(cancelled)::bigint AS cancelled,
    sum(delivered)::bigint AS delivered, sum(bounced_hard)::bigint AS bounced_hard,
    sum(bounced_soft)::bigint AS bounced_soft, sum(complained)::bigint AS complained,
    sum(opened)::bigint AS opened, sum(clicked)::bigint AS clicked, sum(machine_opened)::bigint AS machine_opened, sum(machine_clicked)::bigint AS machine_clicked, max(updated_at)::timestamptz AS updated_at
FROM metric_counts
WHERE tenant_id = @tenant_id AND scope = 'tenant' AND scope_id = ''
  AND period BETWEEN @first_day::date AND @last_day::date
GROUP BY period
ORDER BY period;

-- name: MetricsTenantSent :one
-- The tenant's sends from first_day to last_day inclusive (monthlySendCount).
SELECT coalesce(sum(sent), 0)::bigint
FROM metric_counts
WHERE tenant_id = @tenant_id AND scope = 'tenant' AND scope_id = ''
  AND period BETWEEN @first_day::date AND @last_day::date;

-- The sequence and template reads take the scope ('sequence' or 'template')
-- as a parameter: each reads its objects from one branch of a UNION ALL that
-- the other scope switches off (a one-time filter: the planner skips the
-- branch, and each branch keeps its table's index).

-- name: MetricsScopedGet :one
-- One sequence's or template's counters for the month starting at month
-- (summed over shards); no row when the tenant has no such object.
SELECT o.id,
    coalesce(c.scheduled, 0)::bigint AS scheduled, coalesce(c.sent, 0)::bigint AS sent, coalesce(c.cancelled, 0)::bigint AS cancelled,
    coalesce(c.delivered, 0)::bigint AS delivered, coalesce(c.bounced_hard, 0)::bigint AS bounced_hard, coalesce(c.bounced_soft, 0)::bigint AS bounced_soft,
    coalesce(c.complained, 0)::bigint AS complained, coalesce(c.opened, 0)::bigint AS opened, coalesce(c.clicked, 0)::bigint AS clicked, coalesce(c.machine_opened, 0)::bigint AS machine_opened, coalesce(c.machine_clicked, 0)::bigint AS machine_clicked,
    coalesce(c.updated_at, '0001-01-01 00:00:00+00')::timestamptz AS updated_at
FROM (
    SELECT sequences.id FROM sequences WHERE @scope::text = 'sequence' AND sequences.tenant_id = @tenant_id AND sequences.id = @id
    UNION ALL
    SELECT templates.id FROM templates WHERE @scope::text = 'template' AND templates.tenant_id = @tenant_id AND templates.id = @id
) o
LEFT JOIN LATERAL (
    SELECT sum(m.scheduled)::bigint AS scheduled, sum(m.sent)::bigint AS sent, sum(m.cancelled)::bigint AS cancelled,
        sum(m.delivered)::bigint AS delivered, sum(m.bounced_hard)::bigint AS bounced_hard, sum(m.bounced_soft)::bigint AS bounced_soft,
        sum(m.complained)::bigint AS complained, sum(m.opened)::bigint AS opened, sum(m.clicked)::bigint AS clicked, sum(m.machine_opened)::bigint AS machine_opened, sum(m.machine_clicked)::bigint AS machine_clicked,
        max(m.updated_at)::timestamptz AS updated_at
    FROM metric_counts m
    WHERE m.tenant_id = @tenant_id AND m.scope = @scope::text AND m.scope_id = o.id AND m.period = @month::date
) c ON true;

-- name: MetricsScopedList :many
-- A page of the tenant's sequences or templates (newest first, as GET
-- /api/sequences and /api/templates list them) with their counters for the
-- month starting at month.
SELECT o.id, o.created_at,
    coalesce(c.scheduled, 0)::bigint AS scheduled, coalesce(c.sent, 0)::bigint AS sent, coalesce(c.cancelled, 0)::bigint AS cancelled,
    coalesce(c.delivered, 0)::bigint AS delivered, coalesce(c.bounced_hard, 0)::bigint AS bounced_hard, coalesce(c.bounced_soft, 0)::bigint AS bounced_soft,
    coalesce(c.complained, 0)::bigint AS complained, coalesce(c.opened, 0)::bigint AS opened, coalesce(c.clicked, 0)::bigint AS clicked, coalesce(c.machine_opened, 0)::bigint AS machine_opened, coalesce(c.machine_clicked, 0)::bigint AS machine_clicked,
    coalesce(c.updated_at, '0001-01-01 00:00:00+00')::timestamptz AS updated_at
FROM (
    (SELECT sequences.id, sequences.created_at FROM sequences
     WHERE @scope::text = 'sequence' AND sequences.tenant_id = @tenant_id
       AND (sequences.created_at, sequences.id) < (@before_time::timestamptz, @before_id::text)
     ORDER BY sequences.created_at DESC, sequences.id DESC
     LIMIT @lim)
    UNION ALL
    (SELECT templates.id, templates.created_at FROM templates
     WHERE @scope::text = 'template' AND templates.tenant_id = @tenant_id
       AND (templates.created_at, templates.id) < (@before_time::timestamptz, @before_id::text)
     ORDER BY templates.created_at DESC, templates.id DESC
     LIMIT @lim)
) o
LEFT JOIN LATERAL (
    SELECT sum(m.scheduled)::bigint AS scheduled, sum(m.sent)::bigint AS sent, sum(m.cancelled)::bigint AS cancelled,
        sum(m.delivered)::bigint AS delivered, sum(m.bounced_hard)::bigint AS bounced_hard, sum(m.bounced_soft)::bigint AS bounced_soft,
        sum(m.complained)::bigint AS complained, sum(m.opened)::bigint AS opened, sum(m.clicked)::bigint AS clicked, sum(m.machine_opened)::bigint AS machine_opened, sum(m.machine_clicked)::bigint AS machine_clicked,
        max(m.updated_at)::timestamptz AS updated_at
    FROM metric_counts m
    WHERE m.tenant_id = @tenant_id AND m.scope = @scope::text AND m.scope_id = o.id AND m.period = @month::date
) c ON true
ORDER BY o.created_at DESC, o.id DESC;
