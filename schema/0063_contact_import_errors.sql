-- +goose Up
-- Every failed row of an import, kept (issue 37; docs/decisions.md
-- "Contact import: failed rows"). contact_imports.errors keeps the first
-- 100 for the progress resource; the rows here are what GET
-- /api/contacts/import/{id}/errors downloads, each with the row as it was
-- read (the CSV fields or the NDJSON line) so that a person can fix and
-- send it again. A line has at most one error and one warning (a
-- duplicate of an earlier line), and an import at most MaxImportRows
-- (1,000,000) lines: the table holds at most two rows per imported line.
-- Written by the chunk transaction that judged the rows (a repeated chunk
-- writes them again only if the first did not commit); deleted with the
-- import.
CREATE TABLE contact_import_errors (
    import_seq bigint NOT NULL REFERENCES contact_imports (seq) ON DELETE CASCADE,
    line       integer NOT NULL,
    -- false: the row was not imported; true: imported, but worth telling
    -- (a duplicate).
    warning    boolean NOT NULL DEFAULT false,
    code       text NOT NULL,
    message    text NOT NULL,
    fields     text[],
    doc        text
);
-- The download reads an import's rows in (line, warning) order, a page at
-- a time. Not unique: a row that broke it would fail the chunk again and
-- again.
CREATE INDEX contact_import_errors_line ON contact_import_errors (import_seq, line, warning);

-- Rows refused by the plan's contact limit (the result names the limit
-- and the setting), rows that repeat an earlier line's email, and the
-- first 100 of those warnings.
ALTER TABLE contact_imports
    ADD COLUMN plan_refused bigint NOT NULL DEFAULT 0,
    ADD COLUMN duplicates bigint NOT NULL DEFAULT 0,
    ADD COLUMN warnings jsonb NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE contact_imports DROP COLUMN warnings, DROP COLUMN duplicates, DROP COLUMN plan_refused;
DROP TABLE contact_import_errors;
