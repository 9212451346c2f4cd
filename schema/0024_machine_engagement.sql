-- +goose Up
-- Opens and clicks by machines (mail scanners, prefetchers: ADDENDUM 17)
-- are counted apart from people's.
ALTER TABLE metric_counts ADD COLUMN machine_opened bigint NOT NULL DEFAULT 0,
    ADD COLUMN machine_clicked bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE metric_counts DROP COLUMN machine_clicked, DROP COLUMN machine_opened;
