-- +goose NO TRANSACTION
-- +goose Up
-- The contact list's index in ascending order (issue 26; docs/benchmarks.md
-- "Contact import"). Contacts are created in (created_at, id) order (ids
-- are ULIDs), so every insert went to the left end of the tenant's range in
-- a descending index: no right-end fast path, and every page split in
-- half left half-empty pages (200,000 imported contacts: 26 MB, and a
-- ninth of the import's insert time; ascending, 15 MB). PostgreSQL reads a
-- btree backwards for ORDER BY created_at DESC, id DESC as fast as
-- forwards. Built CONCURRENTLY so a large install keeps taking writes;
-- a build that failed half-way leaves an invalid index of the new name,
-- dropped first so the run after it builds it again.
DROP INDEX CONCURRENTLY IF EXISTS contacts_created_asc;
CREATE INDEX CONCURRENTLY IF NOT EXISTS contacts_created_asc ON contacts (tenant_id, created_at, id);
DROP INDEX CONCURRENTLY IF EXISTS contacts_created;
ALTER INDEX contacts_created_asc RENAME TO contacts_created;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS contacts_created_desc;
CREATE INDEX CONCURRENTLY IF NOT EXISTS contacts_created_desc ON contacts (tenant_id, created_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS contacts_created;
ALTER INDEX contacts_created_desc RENAME TO contacts_created;
