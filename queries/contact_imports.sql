-- Contact imports (internal/contacts, import.go; schema 0027). Every
-- statement takes the tenant; the staging rows are reached through their
-- import's (tenant_id, id). The sweep's statement serves every tenant and
-- carries each row's tenant with it.

-- name: ContactImportInsert :one
INSERT INTO contact_imports (tenant_id, id, format, columns, email_column, parts)
VALUES (@tenant_id, @id, @format, @columns::text[], @email_column, @parts)
RETURNING seq;

-- name: ContactImportPartsAdd :exec
-- The progress rows of a new import's parts.
INSERT INTO contact_import_parts (import_seq, part)
SELECT @import_seq::bigint, generate_series(0, @last_part::int);

-- name: ContactImportRowsAdd :copyfrom
INSERT INTO contact_import_rows (import_seq, part, line, fields, doc, problem)
VALUES (@import_seq, @part, @line, @fields, @doc, @problem);

-- name: ContactImportSetTotal :execrows
UPDATE contact_imports SET total = @total WHERE tenant_id = @tenant_id AND id = @id;

-- name: ContactImportGet :one
SELECT * FROM contact_imports WHERE tenant_id = @tenant_id AND id = @id;

-- name: ContactImportPartLock :one
-- Serialises the chunks of one part of an import: two tasks that run it at
-- once (a re-queued one beside a slow one) take turns, each on the rows
-- the other left. No row: the import is unknown.
SELECT p.next_line, p.done FROM contact_import_parts p
WHERE p.import_seq = (SELECT i.seq FROM contact_imports i WHERE i.tenant_id = @tenant_id AND i.id = @id)
  AND p.part = @part
FOR UPDATE;

-- name: ContactImportPartProgress :exec
UPDATE contact_import_parts SET next_line = @next_line, done = @done
WHERE import_seq = (SELECT i.seq FROM contact_imports i WHERE i.tenant_id = @tenant_id AND i.id = @id)
  AND part = @part;

-- name: ContactImportPartsOpen :one
-- How many parts of an import have rows left (read after ContactImportLock,
-- so a part that another chunk finished and committed meanwhile counts
-- as done).
SELECT count(*) FROM contact_import_parts
WHERE import_seq = (SELECT i.seq FROM contact_imports i WHERE i.tenant_id = @tenant_id AND i.id = @id)
  AND NOT done;

-- name: ContactImportLock :one
-- Taken by a chunk after its contacts are written, to add its counts: the
-- chunks of the parts take turns here only.
SELECT * FROM contact_imports WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: ContactImportAttempt :one
-- Counts a task run that starts on a running import; a chunk that commits
-- sets it back to 0.
UPDATE contact_imports SET attempts = attempts + 1
WHERE tenant_id = @tenant_id AND id = @id AND status = 'running'
RETURNING attempts;

-- name: ContactImportRows :many
-- The next @lim rows of a part after line @after, in line order.
SELECT r.line, r.fields, r.doc, r.problem FROM contact_import_rows r
WHERE r.import_seq = (SELECT i.seq FROM contact_imports i WHERE i.tenant_id = @tenant_id AND i.id = @id)
  AND r.part = @part AND r.line > @after::int
ORDER BY r.line
LIMIT @lim;

-- name: ContactImportDropRows :execrows
-- The staging rows of a finished import.
WITH gone AS (
    DELETE FROM contact_import_rows
    WHERE import_seq = (SELECT i.seq FROM contact_imports i WHERE i.tenant_id = @tenant_id AND i.id = @id
                        AND i.status <> 'running')
)
UPDATE contact_imports ci SET staged = false
WHERE ci.tenant_id = @tenant_id AND ci.id = @id AND ci.status <> 'running';

-- name: ContactImportStagedLeft :many
-- The sweep: finished imports (every tenant) whose staging rows are still
-- there (their task died between the last chunk and the delete).
SELECT tenant_id, id FROM contact_imports
WHERE staged AND status <> 'running' AND updated_at < @before
ORDER BY updated_at
LIMIT @lim;

-- name: ContactImportProgress :exec
-- A chunk's counts, under ContactImportLock; @errors (and @warnings) are
-- the first 100 failed rows (duplicate rows) of the import so far (the
-- parts' chunks commit out of line order, so the caller merges).
UPDATE contact_imports SET
    processed    = processed + @processed::bigint,
    created      = created + @created::bigint,
    updated      = updated + @updated::bigint,
    failed       = failed + @failed::bigint,
    errors       = @errors::jsonb,
    plan_refused = plan_refused + @plan_refused::bigint,
    duplicates   = duplicates + @duplicates::bigint,
    warnings     = @warnings::jsonb,
    next_line    = greatest(next_line, @next_line::int),
    attempts     = 0,
    status       = CASE WHEN @done::boolean THEN 'completed' ELSE status END,
    completed_at = CASE WHEN @done::boolean THEN now() ELSE completed_at END,
    updated_at   = now()
WHERE tenant_id = @tenant_id AND id = @id;

-- name: ContactImportFail :execrows
-- An import that cannot run at all: failed, with why; its rows go with it.
WITH gone AS (
    DELETE FROM contact_import_rows
    WHERE import_seq = (SELECT i.seq FROM contact_imports i WHERE i.tenant_id = @tenant_id AND i.id = @id)
)
UPDATE contact_imports ci SET status = 'failed', reason = @reason, completed_at = now(), updated_at = now(),
    staged = false
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

-- name: ContactImportCreate :many
-- The new contacts of one round of an import chunk (each email at most
-- once, none of them a contact at the round's lookup,
-- ContactEmailsExisting), set-based, as PUT /api/contacts creates one
-- (ContactInsert's rules: subscribed unless it says false, nulls
-- dropped). A row whose properties would pass @max_bytes
-- (MaxPropertiesBytes) is left out. A contact whose email is on the
-- suppression list is suppressed from the start (schema 0028). It
-- returns the ids of the contacts it created.
-- A plain insert, not ON CONFLICT DO NOTHING: the speculative insertion
-- (a pre-check, a token and a confirmation written per row) was a fifth
-- of a large import's time. An email another writer created since the
-- lookup fails it with a unique violation; the caller runs it under a
-- savepoint and takes the round's rows as not written.
INSERT INTO contacts (tenant_id, id, email, user_id, properties, subscribed, topics, suppressed)
SELECT @tenant_id, r.id, r.email, CASE WHEN r.set_user_id THEN r.user_id END, jsonb_strip_nulls(r.patch),
       CASE WHEN r.set_subscribed THEN r.subscribed ELSE true END, jsonb_strip_nulls(r.topics),
       EXISTS (SELECT 1 FROM suppressions s WHERE s.tenant_id = @tenant_id AND s.email = r.email)
FROM (SELECT unnest(@ids::text[]) AS id, unnest(@emails::text[]) AS email,
             unnest(@set_user_id::boolean[]) AS set_user_id, unnest(@user_ids::text[]) AS user_id,
             unnest(@patches::jsonb[]) AS patch, unnest(@set_subscribed::boolean[]) AS set_subscribed,
             unnest(@subscribed::boolean[]) AS subscribed, unnest(@topics::jsonb[]) AS topics) r
WHERE octet_length(jsonb_strip_nulls(r.patch)::text) <= @max_bytes::int
RETURNING id;

-- name: ContactImportMerge :many
-- The rows of an import round whose email is already a contact, merged
-- into it as PUT /api/contacts merges (ContactUpdateByEmail's rules:
-- userId when given, properties merged with null removing a key,
-- subscribed only set back to true, topics merged). A row whose merged
-- properties would pass @max_bytes is not, nor is one whose contact was
-- deleted meanwhile: the caller tells them apart (ContactImportTooLarge).
-- The contacts are found by email = ANY, so the plan probes the email
-- index once per row whatever the statistics say: joined on the email
-- alone, the planner, trusting statistics that lag far behind a tenant
-- whose import is adding a million contacts, hashed every contact of the
-- tenant at every chunk (measured: the import slowed as it grew).
UPDATE contacts c SET
    user_id    = CASE WHEN r.set_user_id THEN r.user_id ELSE c.user_id END,
    properties = jsonb_strip_nulls(c.properties || r.patch),
    subscribed = c.subscribed OR (r.set_subscribed AND r.subscribed),
    topics     = jsonb_strip_nulls(c.topics || r.topics),
    updated_at = now()
FROM (SELECT unnest(@lines::int[]) AS line, unnest(@emails::text[]) AS email,
             unnest(@set_user_id::boolean[]) AS set_user_id, unnest(@user_ids::text[]) AS user_id,
             unnest(@patches::jsonb[]) AS patch, unnest(@set_subscribed::boolean[]) AS set_subscribed,
             unnest(@subscribed::boolean[]) AS subscribed, unnest(@topics::jsonb[]) AS topics) r
WHERE c.tenant_id = @tenant_id AND c.email = ANY (@emails::text[]) AND c.email = r.email
  AND octet_length(jsonb_strip_nulls(c.properties || r.patch)::text) <= @max_bytes::int
RETURNING r.line::int AS line, c.id;

-- name: ContactImportTooLarge :many
-- Which of an import round's rows that were not written would take their
-- contact's properties past @max_bytes (the others met a contact created
-- or deleted meanwhile and go again).
SELECT r.line::int AS line FROM (SELECT unnest(@lines::int[]) AS line, unnest(@emails::text[]) AS email,
                                        unnest(@patches::jsonb[]) AS patch) r
LEFT JOIN contacts c ON c.tenant_id = @tenant_id AND c.email = r.email
WHERE octet_length(jsonb_strip_nulls(coalesce(c.properties, '{}') || r.patch)::text) > @max_bytes::int;

-- name: ContactImportSlotsLock :exec
-- Serialises the count and the taking of a tenant's import places
-- (IMPORT_MAX_RUNNING) across api instances, to the transaction's end.
SELECT pg_advisory_xact_lock(hashtextextended('import-slots:' || @tenant_id::text, 0));

-- name: ContactImportSlotsTaken :one
-- The tenant's imports uploading (places not expired) or running, once
-- its expired places are gone.
WITH purged AS (
    DELETE FROM contact_import_uploads WHERE tenant_id = @tenant_id AND expires_at <= now()
)
SELECT ((SELECT count(*) FROM contact_import_uploads u WHERE u.tenant_id = @tenant_id AND u.expires_at > now())
     + (SELECT count(*) FROM contact_imports i WHERE i.tenant_id = @tenant_id AND i.status = 'running'))::bigint AS taken;

-- name: ContactImportUploadInsert :exec
-- The place of a new upload, expiring @ttl_seconds from now by the
-- database's clock (every instance's).
INSERT INTO contact_import_uploads (tenant_id, id, expires_at)
VALUES (@tenant_id, @id, now() + make_interval(secs => @ttl_seconds::float8));

-- name: ContactImportUploadDelete :execrows
-- An upload's place: freed when it fails, or taken over by its import in
-- the staging transaction.
DELETE FROM contact_import_uploads WHERE tenant_id = @tenant_id AND id = @id;

-- name: ContactImportUploadsPurge :execrows
-- The sweep: places of uploads whose instance died (every tenant).
DELETE FROM contact_import_uploads WHERE expires_at <= now();

-- name: ContactImportErrorsAdd :copyfrom
-- A chunk's failed rows and warnings (schema 0063), in its transaction.
INSERT INTO contact_import_errors (import_seq, line, warning, code, message, fields, doc)
VALUES (@import_seq, @line, @warning, @code, @message, @fields, @doc);

-- name: ContactImportErrorsPage :many
-- The failed rows and warnings of an import after (@after_line,
-- @after_warning), in that order: GET /api/contacts/import/{id}/errors
-- reads them a page at a time.
SELECT e.line, e.warning, e.code, e.message, e.fields, e.doc FROM contact_import_errors e
WHERE e.import_seq = (SELECT i.seq FROM contact_imports i WHERE i.tenant_id = @tenant_id AND i.id = @id)
  AND (e.line, e.warning) > (@after_line::int, @after_warning::boolean)
ORDER BY e.line, e.warning
LIMIT @lim;
