-- Contact imports (internal/contacts, import.go; schema 0027). Every
-- statement takes the tenant; the staging rows are reached through their
-- import's (tenant_id, id). The sweep's statement serves every tenant and
-- carries each row's tenant with it.

-- name: ContactImportInsert :one
INSERT INTO contact_imports (tenant_id, id, format, columns, email_column)
VALUES (@tenant_id, @id, @format, @columns::text[], @email_column)
RETURNING seq;

-- name: ContactImportRowsAdd :copyfrom
INSERT INTO contact_import_rows (import_seq, line, fields, doc, problem)
VALUES (@import_seq, @line, @fields, @doc, @problem);

-- name: ContactImportSetTotal :execrows
UPDATE contact_imports SET total = @total WHERE tenant_id = @tenant_id AND id = @id;

-- name: ContactImportGet :one
SELECT * FROM contact_imports WHERE tenant_id = @tenant_id AND id = @id;

-- name: ContactImportLock :one
-- Serialises the chunks of one import: two tasks that run it at once (a
-- re-queued one beside a slow one) take turns, each on the rows the other
-- left.
SELECT * FROM contact_imports WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: ContactImportAttempt :one
-- Counts a task run that starts on a running import; a chunk that commits
-- sets it back to 0.
UPDATE contact_imports SET attempts = attempts + 1
WHERE tenant_id = @tenant_id AND id = @id AND status = 'running'
RETURNING attempts;

-- name: ContactImportTakeRows :many
-- The next @lim rows in line order, deleted in the chunk's transaction: a
-- rollback puts them back.
WITH c AS (
    SELECT r.import_seq, r.line FROM contact_import_rows r
    WHERE r.import_seq = (SELECT i.seq FROM contact_imports i WHERE i.tenant_id = @tenant_id AND i.id = @id)
    ORDER BY r.line
    LIMIT @lim
)
DELETE FROM contact_import_rows r USING c
WHERE r.import_seq = c.import_seq AND r.line = c.line
RETURNING r.line, r.fields, r.doc, r.problem;

-- name: ContactImportProgress :exec
-- A chunk's counts; @errors are the failed rows that still fit in the
-- first 100.
UPDATE contact_imports SET
    processed    = processed + @processed::bigint,
    created      = created + @created::bigint,
    updated      = updated + @updated::bigint,
    failed       = failed + @failed::bigint,
    errors       = errors || @errors::jsonb,
    attempts     = 0,
    status       = CASE WHEN @done::boolean THEN 'completed' ELSE status END,
    completed_at = CASE WHEN @done::boolean THEN now() ELSE completed_at END,
    updated_at   = now()
WHERE tenant_id = @tenant_id AND id = @id;

-- name: ContactImportFail :execrows
-- An import that cannot run at all: failed, with why; its rows go.
WITH gone AS (
    DELETE FROM contact_import_rows
    WHERE import_seq = (SELECT i.seq FROM contact_imports i WHERE i.tenant_id = @tenant_id AND i.id = @id)
)
UPDATE contact_imports ci SET status = 'failed', reason = @reason, completed_at = now(), updated_at = now()
WHERE ci.tenant_id = @tenant_id AND ci.id = @id AND ci.status = 'running';

-- name: ContactImportStale :many
-- The sweep: running imports (every tenant) that have not moved since
-- @before, oldest first.
SELECT tenant_id, id FROM contact_imports
WHERE status = 'running' AND updated_at < @before
ORDER BY updated_at
LIMIT @lim;

-- name: ContactEmailsExisting :many
-- Which of @emails are contacts of the tenant (an import chunk's new and
-- existing rows).
SELECT email FROM contacts WHERE tenant_id = @tenant_id AND email = ANY (@emails::text[]);

-- name: TenantContactRoom :one
-- The plan and the contact counter, read without a lock: an import chunk
-- admits new contacts up to the free limit and reserves them at its end
-- (TenantReserveContacts), after its contacts are written, so the lock
-- order stays contacts, then tenant.
SELECT plan, contact_count FROM tenants WHERE id = @id;

-- name: TenantReserveContacts :one
-- Takes @n slots of the plan's contact limit at once; no row means another
-- writer took them first (the chunk is tried again).
UPDATE tenants SET contact_count = contact_count + @n::bigint
WHERE id = @id AND (plan <> 'free' OR contact_count + @n::bigint <= @free_limit::bigint)
RETURNING contact_count;

-- name: ContactImportUpsert :many
-- One round of an import chunk (each email at most once), set-based, as
-- PUT /api/contacts writes one contact: a row whose email is a contact is
-- merged into it (ContactUpdateByEmail's rules: userId when given,
-- properties merged with null removing a key, subscribed only re-set to
-- true, topics merged), the others (@is_new, admitted under the plan
-- limit) are inserted with the id given (ContactInsert), subscribed unless
-- it says false. A row whose merged properties would pass
-- MaxPropertiesBytes is left out and reported too_large. A row the
-- statement could not place (a contact created or deleted meanwhile) is
-- not in the result: the caller tries it again.
WITH r AS (
    SELECT unnest(@lines::int[]) AS line, unnest(@ids::text[]) AS id, unnest(@emails::text[]) AS email,
           unnest(@set_user_id::boolean[]) AS set_user_id, unnest(@user_ids::text[]) AS user_id,
           unnest(@patches::jsonb[]) AS patch, unnest(@set_subscribed::boolean[]) AS set_subscribed,
           unnest(@subscribed::boolean[]) AS subscribed, unnest(@topics::jsonb[]) AS topics,
           unnest(@is_new::boolean[]) AS is_new
), big AS (
    SELECT r.line FROM r
    LEFT JOIN contacts c ON c.tenant_id = @tenant_id AND c.email = r.email
    WHERE octet_length(jsonb_strip_nulls(coalesce(c.properties, '{}') || r.patch)::text) > @max_bytes::int
), up AS (
    UPDATE contacts c SET
        user_id    = CASE WHEN r.set_user_id THEN r.user_id ELSE c.user_id END,
        properties = jsonb_strip_nulls(c.properties || r.patch),
        subscribed = c.subscribed OR (r.set_subscribed AND r.subscribed),
        topics     = jsonb_strip_nulls(c.topics || r.topics),
        updated_at = now()
    FROM r
    WHERE c.tenant_id = @tenant_id AND c.email = r.email
      AND octet_length(jsonb_strip_nulls(c.properties || r.patch)::text) <= @max_bytes::int
    RETURNING r.line, c.id
), ins AS (
    INSERT INTO contacts (tenant_id, id, email, user_id, properties, subscribed, topics)
    SELECT @tenant_id, r.id, r.email, CASE WHEN r.set_user_id THEN r.user_id END, jsonb_strip_nulls(r.patch),
           CASE WHEN r.set_subscribed THEN r.subscribed ELSE true END, jsonb_strip_nulls(r.topics)
    FROM r
    WHERE r.is_new AND octet_length(jsonb_strip_nulls(r.patch)::text) <= @max_bytes::int
    ON CONFLICT (tenant_id, email) DO NOTHING
    RETURNING id
)
SELECT up.line::int AS line, up.id::text AS contact_id, 'updated'::text AS status FROM up
UNION ALL
SELECT r.line, ins.id, 'created' FROM ins JOIN r ON r.id = ins.id
UNION ALL
SELECT big.line, '', 'too_large' FROM big;
