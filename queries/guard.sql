-- The deliverability guard (internal/tenants/guard.go, schema 0022).

-- name: GuardWindow :one
-- A tenant's last @size outcomes since its last resume: sends delivered,
-- bounced or complained, newest outcome first (a send counts once, by its
-- final status), with the hard bounces and complaints among them.
SELECT count(*)::int AS outcomes,
       count(*) FILTER (WHERE w.delivery_status = 'complained')::int AS complaints,
       count(*) FILTER (WHERE w.delivery_status = 'bounced' AND w.bounce_type = 'hard')::int AS hard_bounces
FROM (
    SELECT s.delivery_status, s.bounce_type FROM sends s
    WHERE s.tenant_id = @tenant_id AND s.delivery_status IN ('delivered', 'bounced', 'complained')
      AND coalesce(s.complained_at, s.bounced_at, s.delivered_at) > coalesce((SELECT t.guard_since FROM tenants t WHERE t.id = @tenant_id), '-infinity')
    ORDER BY coalesce(s.complained_at, s.bounced_at, s.delivered_at) DESC
    LIMIT @size
) w;

-- name: GuardPause :one
-- Pauses a tenant that is sending (not already paused): the guard's own
-- move. Returns nothing when it was paused already.
UPDATE tenants SET sending_status = 'paused', paused_reason = @reason, paused_at = now(), updated_at = now()
WHERE id = @id AND sending_status <> 'paused'
RETURNING *;

-- name: TenantsPaused :many
-- Paused tenants by reason, for Prometheus.
SELECT coalesce(paused_reason, 'manual')::text AS reason, count(*)::bigint AS n FROM tenants
WHERE sending_status = 'paused' GROUP BY 1;

-- name: FrequencyLock :exec
-- Serialises the record writes of one contact (the frequency cap's count
-- and the record it allows), to the transaction's end.
SELECT pg_advisory_xact_lock(hashtextextended('cap:' || @tenant_id::text || ':' || @contact_id::text, 0));

-- name: FrequencyCount :one
-- The contact's sequence and broadcast messages in [from_time, to_time).
SELECT count(*)::int FROM sends
WHERE tenant_id = @tenant_id AND contact_id = @contact_id
  AND (sequence_id IS NOT NULL OR broadcast_id IS NOT NULL)
  AND sent_at >= @from_time AND sent_at < @to_time;
