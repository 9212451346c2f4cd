-- +goose Up
-- An import's rows are processed in parts (docs/decisions.md "Contact
-- import"): each row goes to the part its email hashes to, so every row of
-- one email is in one part, in line order, and the parts run side by side,
-- each on its own connection, a chunk transaction at a time. A part's
-- progress is its row here, locked by the chunk that moves it, so two
-- runners of one part take turns as two runners of an import did.
ALTER TABLE contact_imports ADD COLUMN parts integer NOT NULL DEFAULT 1 CHECK (parts BETWEEN 1 AND 64);
ALTER TABLE contact_import_rows ADD COLUMN part smallint NOT NULL DEFAULT 0;
ALTER TABLE contact_import_rows DROP CONSTRAINT contact_import_rows_pkey;
ALTER TABLE contact_import_rows ADD PRIMARY KEY (import_seq, part, line);

CREATE TABLE contact_import_parts (
    import_seq bigint NOT NULL REFERENCES contact_imports (seq) ON DELETE CASCADE,
    part       smallint NOT NULL,
    -- The last line of the part processed; done once its last chunk has.
    next_line  integer NOT NULL DEFAULT 0,
    done       boolean NOT NULL DEFAULT false,
    PRIMARY KEY (import_seq, part)
);
-- A running import from before takes up where it was, as one part.
INSERT INTO contact_import_parts (import_seq, part, next_line)
SELECT seq, 0, next_line FROM contact_imports WHERE status = 'running';
-- contact_imports.next_line is from now on the highest line any part has
-- processed (shown to operators only); where each part is, is its row here.

-- +goose Down
DROP TABLE contact_import_parts;
ALTER TABLE contact_import_rows DROP CONSTRAINT contact_import_rows_pkey;
ALTER TABLE contact_import_rows ADD PRIMARY KEY (import_seq, line);
ALTER TABLE contact_import_rows DROP COLUMN part;
ALTER TABLE contact_imports DROP COLUMN parts;
