-- +goose Up
-- The send records a POST /api/send/batch with an Idempotency-Key wrote,
-- by the message's position in the batch ({"0": "snd_...", "3": ...}),
-- merged in by each transaction that writes some of them (ADDENDUM 19): a
-- repeat after the first request died, or failed to store its answer,
-- answers from these records and sends nothing. A key that names records
-- is never taken over as stale, nor released.
ALTER TABLE idempotency_keys ADD COLUMN batch_sends jsonb;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN batch_sends;
