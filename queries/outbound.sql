-- Outbound webhooks (internal/outbound, schema 0016). Every statement is
-- scoped by tenant but the worker's claim and sweeps, which serve every
-- tenant and carry each row's tenant with it.

-- name: WebhookEndpointInsert :one
-- At most @max_endpoints per tenant: the count and the insert are one
-- statement under the tenant's row lock, so concurrent creates cannot pass
-- it together.
WITH t AS (SELECT id FROM tenants WHERE id = @tenant_id FOR UPDATE)
INSERT INTO webhook_endpoints (tenant_id, id, url, events, description, enabled, secret)
SELECT t.id, @id, @url, @events::text[], @description, @enabled, @secret FROM t
WHERE (SELECT count(*) FROM webhook_endpoints e WHERE e.tenant_id = @tenant_id) < @max_endpoints::int
RETURNING *;

-- name: WebhookEndpointGet :one
SELECT * FROM webhook_endpoints WHERE tenant_id = @tenant_id AND id = @id;

-- name: WebhookEndpointList :many
SELECT * FROM webhook_endpoints
WHERE tenant_id = @tenant_id AND (created_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @lim;

-- name: WebhookEndpointUpdate :one
-- Enabling an endpoint clears why it was disabled and its failing streak.
UPDATE webhook_endpoints SET url = @url, events = @events::text[], description = @description, enabled = @enabled,
    disabled_reason = CASE WHEN @enabled THEN NULL ELSE disabled_reason END,
    failing_since = CASE WHEN @enabled AND NOT enabled THEN NULL ELSE failing_since END,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: WebhookEndpointDelete :execrows
DELETE FROM webhook_endpoints WHERE tenant_id = @tenant_id AND id = @id;

-- name: WebhookEndpointRotate :one
-- The new secret signs from now on; the old one too for 24 hours.
UPDATE webhook_endpoints SET previous_secret = secret, previous_until = now() + interval '24 hours',
    secret = @secret, updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: WebhookTestInsert :exec
-- A webhook.test message for one endpoint (it goes to that endpoint only,
-- whatever its event filter).
WITH m AS (
    INSERT INTO webhook_messages (tenant_id, id, type, data)
    VALUES (@tenant_id, @message_id, 'webhook.test', jsonb_build_object('webhookId', @endpoint_id::text))
    RETURNING tenant_id, id
)
INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id)
SELECT m.tenant_id, @endpoint_id, m.id FROM m;

-- name: WebhookNotify :exec
SELECT pg_notify('tidings_webhooks', '');

-- name: WebhookDeliveryList :many
SELECT d.*, m.type FROM webhook_deliveries d
JOIN webhook_messages m ON m.tenant_id = d.tenant_id AND m.id = d.message_id
WHERE d.tenant_id = @tenant_id AND d.endpoint_id = @endpoint_id
  AND (sqlc.narg(status)::text IS NULL OR d.status = sqlc.narg(status))
  AND (d.created_at, d.message_id) < (@before_time::timestamptz, @before_id::text)
ORDER BY d.created_at DESC, d.message_id DESC
LIMIT @lim;

-- name: WebhookDeliveryRetry :execrows
-- One more attempt of the same message, at once.
UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), updated_at = now()
WHERE tenant_id = @tenant_id AND endpoint_id = @endpoint_id AND message_id = @message_id;

-- name: WebhookFanOut :execrows
-- Turns up to lim outbox rows (schema 0017) into messages, with one
-- delivery per enabled endpoint of the tenant that wants the type, and
-- deletes them, in one transaction: a crash before its commit leaves the
-- rows to the next fan-out. A fact naming a contact gets its email here
-- (null if the contact was deleted in between: its contact.deleted message
-- names it); a fact whose tenant no longer has a matching endpoint is
-- dropped.
WITH o AS (
    DELETE FROM webhook_outbox WHERE id IN (
        SELECT id FROM webhook_outbox ORDER BY id LIMIT @lim FOR UPDATE SKIP LOCKED)
    RETURNING tenant_id, type, data, created_at
), m AS (
    INSERT INTO webhook_messages (tenant_id, id, type, data, created_at)
    SELECT o.tenant_id, 'msg_' || replace(gen_random_uuid()::text, '-', ''), o.type,
        CASE WHEN o.data ? 'email' OR NOT o.data ? 'contactId' THEN o.data
             ELSE o.data || jsonb_build_object('email',
                 (SELECT c.email FROM contacts c WHERE c.tenant_id = o.tenant_id AND c.id = o.data->>'contactId'))
        END,
        o.created_at
    FROM o
    WHERE EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = o.tenant_id AND e.enabled
                  AND (cardinality(e.events) = 0 OR o.type = ANY (e.events)))
    RETURNING tenant_id, id, type
)
INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id)
SELECT m.tenant_id, e.id, m.id FROM m
JOIN webhook_endpoints e ON e.tenant_id = m.tenant_id AND e.enabled
    AND (cardinality(e.events) = 0 OR m.type = ANY (e.events));

-- name: WebhookOutboxWaiting :one
SELECT EXISTS (SELECT 1 FROM webhook_outbox);

-- name: WebhookDeliveryClaimLock :exec
-- Serialises claims (WebhookDeliveryClaim, in the same transaction, after
-- this): each claim then counts the leases of every claim before it, so a
-- tenant's share holds across workers exactly.
SELECT pg_advisory_xact_lock(hashtext('webhook_delivery_claim'));

-- name: WebhookDeliveryClaim :many
-- Claims up to lim due deliveries of enabled endpoints, moving each a
-- lease ahead (next_attempt_at, and leased_until, which the outcome
-- clears): a worker that dies mid-attempt leaves it due again then. A
-- tenant has at most @per_tenant deliveries in flight, one endpoint at
-- most @per_endpoint, counting those other claims hold (schema 0046): one
-- tenant's hanging endpoints cannot take every slot, nor one endpoint its
-- tenant's. Every tenant with pending deliveries is looked at, each
-- endpoint's oldest first, then the oldest across tenants are taken.
-- Deliveries of a disabled endpoint wait.
WITH RECURSIVE tenants_pending AS (
    (SELECT d.tenant_id FROM webhook_deliveries d WHERE d.status = 'pending' ORDER BY d.tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.tenant_id FROM webhook_deliveries d WHERE d.status = 'pending' AND d.tenant_id > t.tenant_id
            ORDER BY d.tenant_id LIMIT 1)
    FROM tenants_pending t WHERE t.tenant_id IS NOT NULL
), busy AS (
    SELECT l.tenant_id, l.endpoint_id, count(*)::int AS n FROM webhook_deliveries l
    WHERE l.leased_until IS NOT NULL AND l.leased_until > now()
    GROUP BY l.tenant_id, l.endpoint_id
), busy_tenant AS (
    SELECT busy.tenant_id, sum(busy.n)::int AS n FROM busy GROUP BY busy.tenant_id
), heads AS (
    -- Each endpoint with room, by its oldest due delivery; the lim oldest
    -- hold every delivery the claim can take.
    SELECT e.tenant_id, e.id AS endpoint_id, coalesce(b.n, 0) AS busy_endpoint, coalesce(bt.n, 0) AS busy_tenant
    FROM tenants_pending t
    JOIN webhook_endpoints e ON e.tenant_id = t.tenant_id AND e.enabled
    LEFT JOIN busy b ON b.tenant_id = e.tenant_id AND b.endpoint_id = e.id
    LEFT JOIN busy_tenant bt ON bt.tenant_id = e.tenant_id
    CROSS JOIN LATERAL (
        SELECT d.next_attempt_at FROM webhook_deliveries d
        WHERE d.tenant_id = e.tenant_id AND d.endpoint_id = e.id AND d.status = 'pending' AND d.next_attempt_at <= now()
        ORDER BY d.next_attempt_at
        LIMIT 1
    ) h
    WHERE coalesce(b.n, 0) < sqlc.arg(per_endpoint)::int AND coalesce(bt.n, 0) < @per_tenant::int
    ORDER BY h.next_attempt_at
    LIMIT @lim
), due AS (
    SELECT c.tenant_id, c.endpoint_id, c.message_id, c.created_at, c.next_attempt_at,
        row_number() OVER (PARTITION BY c.tenant_id ORDER BY c.next_attempt_at, c.message_id) + h.busy_tenant AS tenant_n
    FROM heads h
    CROSS JOIN LATERAL (
        SELECT d.tenant_id, d.endpoint_id, d.message_id, d.created_at, d.next_attempt_at FROM webhook_deliveries d
        WHERE d.tenant_id = h.tenant_id AND d.endpoint_id = h.endpoint_id AND d.status = 'pending'
            AND d.next_attempt_at <= now()
        ORDER BY d.next_attempt_at
        LIMIT sqlc.arg(per_endpoint)::int - h.busy_endpoint
    ) c
), picked AS (
    SELECT due.tenant_id, due.endpoint_id, due.message_id, due.created_at FROM due
    WHERE due.tenant_n <= @per_tenant::int
    ORDER BY due.next_attempt_at
    LIMIT @lim
)
UPDATE webhook_deliveries d SET next_attempt_at = now() + make_interval(secs => @lease_seconds::float8),
    leased_until = now() + make_interval(secs => @lease_seconds::float8), updated_at = now()
FROM picked
-- created_at too: joined on the key alone, the planner took the list index
-- (tenant, endpoint, created_at, message) for as cheap as the primary key
-- and walked a backlog's whole endpoint for each row (9-25 ms a row with
-- 200,000 waiting); with it, either index finds the row at once.
WHERE d.tenant_id = picked.tenant_id AND d.endpoint_id = picked.endpoint_id AND d.message_id = picked.message_id
    AND d.created_at = picked.created_at AND d.status = 'pending' AND d.next_attempt_at <= now()
RETURNING d.tenant_id, d.endpoint_id, d.message_id, d.created_at, d.attempts,
    (SELECT m.type FROM webhook_messages m WHERE m.tenant_id = d.tenant_id AND m.id = d.message_id) AS type,
    (SELECT m.data FROM webhook_messages m WHERE m.tenant_id = d.tenant_id AND m.id = d.message_id) AS data,
    (SELECT m.created_at FROM webhook_messages m WHERE m.tenant_id = d.tenant_id AND m.id = d.message_id)::timestamptz AS message_at,
    (SELECT e.url FROM webhook_endpoints e WHERE e.tenant_id = d.tenant_id AND e.id = d.endpoint_id) AS url,
    (SELECT e.secret FROM webhook_endpoints e WHERE e.tenant_id = d.tenant_id AND e.id = d.endpoint_id) AS secret,
    coalesce((SELECT CASE WHEN e.previous_until > now() THEN e.previous_secret END FROM webhook_endpoints e
              WHERE e.tenant_id = d.tenant_id AND e.id = d.endpoint_id), '')::text AS previous_secret;

-- name: WebhookDeliveryFinish :exec
-- Writes a batch of attempts: rows holds {tenant_id, endpoint_id,
-- message_id, created_at, ok, status_code, error, next_attempt_at}; a row with ok
-- false and no next_attempt_at has failed for good. Endpoints move their
-- failing streak (a success ends it), and one failing for 5 days is
-- disabled with the reason.
WITH done AS (
    UPDATE webhook_deliveries d SET attempts = d.attempts + 1,
        status = CASE WHEN r.ok THEN 'succeeded' WHEN r.next_attempt_at IS NULL THEN 'failed' ELSE 'pending' END,
        next_attempt_at = coalesce(r.next_attempt_at, d.next_attempt_at),
        last_status_code = r.status_code, last_error = r.error, leased_until = NULL, updated_at = now()
    FROM jsonb_to_recordset(@rows::jsonb) AS r(tenant_id text, endpoint_id text, message_id text, created_at timestamptz,
        ok boolean, status_code integer, error text, next_attempt_at timestamptz)
    -- created_at as in WebhookDeliveryClaim: on the key alone the planner
    -- walked the list index (43 ms a row with 200,000 waiting).
    WHERE d.tenant_id = r.tenant_id AND d.endpoint_id = r.endpoint_id AND d.message_id = r.message_id
        AND d.created_at = r.created_at
    RETURNING d.tenant_id, d.endpoint_id, d.status
), e AS (
    SELECT done.tenant_id, done.endpoint_id, bool_or(done.status = 'succeeded') AS ok
    FROM done GROUP BY done.tenant_id, done.endpoint_id
), changed AS (
    -- Only the endpoints whose streak or state changes, locked in key
    -- order: batches of one deliverer finishing side by side (outcomes are
    -- written as attempts end) locked the same endpoints in different
    -- orders and deadlocked, and a healthy endpoint's row was rewritten at
    -- every batch.
    SELECT ep.tenant_id, ep.id, e.ok FROM webhook_endpoints ep
    JOIN e ON ep.tenant_id = e.tenant_id AND ep.id = e.endpoint_id
    WHERE (e.ok AND ep.failing_since IS NOT NULL)
       OR (NOT e.ok AND (ep.failing_since IS NULL OR (ep.enabled AND ep.failing_since < now() - interval '5 days')))
    ORDER BY ep.tenant_id, ep.id
    FOR UPDATE OF ep
)
UPDATE webhook_endpoints ep SET
    failing_since = CASE WHEN c.ok THEN NULL ELSE coalesce(ep.failing_since, now()) END,
    enabled = CASE WHEN NOT c.ok AND ep.failing_since < now() - interval '5 days' THEN false ELSE ep.enabled END,
    disabled_reason = CASE WHEN NOT c.ok AND ep.failing_since < now() - interval '5 days'
        THEN 'every delivery failed for 5 days' ELSE ep.disabled_reason END,
    updated_at = now()
FROM changed c
WHERE ep.tenant_id = c.tenant_id AND ep.id = c.id;

-- name: WebhookDeliveryDue :one
SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= now());

-- name: WebhookDeliveryPrune :execrows
-- Delivery attempts are kept 30 days; then they and their messages go.
WITH gone AS (
    DELETE FROM webhook_deliveries d
    WHERE d.created_at < now() - interval '30 days' AND d.status <> 'pending'
    RETURNING d.tenant_id, d.message_id
)
DELETE FROM webhook_messages m
USING (SELECT DISTINCT tenant_id, message_id FROM gone) g
WHERE m.tenant_id = g.tenant_id AND m.id = g.message_id
  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d2 WHERE d2.tenant_id = m.tenant_id AND d2.message_id = m.id
                  AND d2.status = 'pending');

-- name: WebhookDeliveryCounts :many
-- Queue depth per state, for Prometheus; 'outbox' counts facts not yet
-- fanned out into messages.
SELECT status, count(*)::bigint AS n FROM webhook_deliveries GROUP BY status
UNION ALL
SELECT 'outbox', count(*)::bigint FROM webhook_outbox;
