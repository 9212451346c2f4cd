-- +goose Up
-- Each send record names the provider of the pool that has (or may have)
-- its message (ADDENDUM 22): the one first tried when the record is
-- written, moved to the next before a failover hands the message on.
-- Outcomes are applied from whichever provider sent it. Null on records
-- written before pools: the one provider of the time sent them.
ALTER TABLE sends ADD COLUMN provider text;

-- +goose Down
ALTER TABLE sends DROP COLUMN provider;
