-- name: TenantReserveContact :one
-- Takes one slot of the plan's contact limit atomically, after the
-- contact's insert in the same transaction; no row means the limit is
-- reached (or the tenant is gone) and the insert is rolled back. The row
-- lock it takes serialises contact creation per tenant until commit.
UPDATE tenants SET contact_count = contact_count + 1
WHERE id = @id AND (plan <> 'free' OR contact_count < @free_limit::bigint)
RETURNING contact_count;

-- name: TenantReleaseContacts :exec
UPDATE tenants SET contact_count = greatest(contact_count - @n::bigint, 0) WHERE id = @id;

-- name: ContactInsert :one
-- A contact whose email is on the suppression list is suppressed from the
-- start (schema 0028: each insert applies the list itself).
INSERT INTO contacts (tenant_id, id, email, user_id, properties, subscribed, suppressed)
VALUES (@tenant_id, @id, @email, sqlc.narg(user_id), @properties, @subscribed,
        EXISTS (SELECT 1 FROM suppressions s WHERE s.tenant_id = @tenant_id AND s.email = @email))
ON CONFLICT (tenant_id, email) DO NOTHING
RETURNING *;

-- name: ContactGet :one
SELECT * FROM contacts WHERE tenant_id = @tenant_id AND id = @id;

-- name: ContactExists :one
SELECT EXISTS (SELECT 1 FROM contacts WHERE tenant_id = @tenant_id AND id = @id);

-- name: ContactGetByEmail :one
SELECT * FROM contacts WHERE tenant_id = @tenant_id AND email = @email;

-- name: ContactList :many
SELECT * FROM contacts
WHERE tenant_id = @tenant_id
  AND (created_at, id) < (@before_time::timestamptz, @before_id::text)
ORDER BY created_at DESC, id DESC
LIMIT @lim;

-- name: ContactUpdate :one
-- Properties merge: keys in set_props are written, keys in remove_props
-- (sent as null) are dropped.
UPDATE contacts SET
    user_id    = CASE WHEN @set_user_id::boolean THEN sqlc.narg(user_id) ELSE user_id END,
    properties = (properties || @set_props::jsonb) - @remove_props::text[],
    subscribed = coalesce(sqlc.narg(subscribed), subscribed),
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;

-- name: ContactUpdateByEmail :one
UPDATE contacts SET
    user_id    = CASE WHEN @set_user_id::boolean THEN sqlc.narg(user_id) ELSE user_id END,
    properties = (properties || @set_props::jsonb) - @remove_props::text[],
    subscribed = coalesce(sqlc.narg(subscribed), subscribed),
    updated_at = now()
WHERE tenant_id = @tenant_id AND email = @email
RETURNING *;

-- name: ContactDelete :execrows
DELETE FROM contacts WHERE tenant_id = @tenant_id AND id = @id;

-- name: ContactStats :one
-- Each figure is its own index probe: the total is the tenant's maintained
-- counter, suppressed contacts have a partial index, and the recent counts
-- are index-only range scans; nothing scans the whole audience.
SELECT
    (SELECT t.contact_count FROM tenants t WHERE t.id = @tenant_id)::bigint AS total,
    (SELECT count(*) FROM contacts c WHERE c.tenant_id = @tenant_id AND c.suppressed) AS suppressed_count,
    (SELECT count(*) FROM contacts c WHERE c.tenant_id = @tenant_id AND c.created_at > now() - interval '24 hours') AS added_last_24h,
    (SELECT count(*) FROM contacts c WHERE c.tenant_id = @tenant_id AND c.created_at > now() - interval '7 days') AS added_last_7d;

-- name: ContactLockMany :exec
-- Locks contacts in key order before a batch of outcomes changes them
-- (counters, suppression), for the same reason as SendLockMany.
SELECT c.id FROM contacts c
JOIN (SELECT unnest(@tenant_ids::text[]) AS tenant_id, unnest(@ids::text[]) AS id) k
  ON c.tenant_id = k.tenant_id AND c.id = k.id
ORDER BY c.tenant_id, c.id
FOR UPDATE OF c;

-- name: ContactGetForUpdate :one
SELECT * FROM contacts WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: ContactSetOptOut :one
-- Unsubscribes and/or suppresses; never the reverse (re-subscribing is
-- ContactUpdate's, and suppression is not lifted through the API).
UPDATE contacts SET
    subscribed = subscribed AND NOT @unsubscribe::boolean,
    suppressed = suppressed OR @suppress::boolean,
    updated_at = now()
WHERE tenant_id = @tenant_id AND id = @id
RETURNING *;
