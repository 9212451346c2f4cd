-- +goose Up
-- Delivery errors stored before issue 36 are Go's network errors word for
-- word: the resolver's address ("lookup x on 10.0.0.2:53"), the addresses
-- a name resolved to, the address dialled. The API answers them as
-- lastError, so those that are not an HTTP answer become general words
-- (what the attempt's cause was is in the worker's log), and the answers
-- kept are cut to the 256 bytes kept since (outbound.maxResponseBytes).
UPDATE webhook_deliveries SET last_error = CASE
        WHEN last_error ~ '^HTTP [0-9]{3}: ' THEN left(last_error, length('HTTP 000: ') + 256)
        ELSE 'the request failed (its details were removed by an upgrade)'
    END
WHERE last_error IS NOT NULL AND (last_error !~ '^HTTP [0-9]{3}: ' OR length(last_error) > length('HTTP 000: ') + 256);

-- +goose Down
-- What was removed is not restored.
SELECT 1;
