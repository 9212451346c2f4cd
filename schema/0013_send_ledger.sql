-- +goose Up
-- The send ledger (docs/decisions.md "Delivery"): every message's record is
-- written before the provider is called. A record is born `sending` and
-- `in_doubt`: until the provider answers nobody knows whether the message
-- left. The answer settles it (accepted: in_doubt false; refused: the
-- record is deleted); no answer leaves it in doubt, never sent again; any
-- provider event naming the send settles it later. email.sent, the
-- contact's totalSends and the `sent` metric are written when the record
-- stops `sending` (accepted or in doubt), so a refused message leaves no
-- trace. Rows that existed before are accepted sends.
ALTER TABLE sends
    ADD COLUMN sending  boolean NOT NULL DEFAULT false,
    ADD COLUMN in_doubt boolean NOT NULL DEFAULT false;
-- GET /api/sends?inDoubt=true, newest first.
CREATE INDEX sends_in_doubt ON sends (tenant_id, sent_at DESC, id DESC) WHERE in_doubt;
-- The ledger sweep: records whose process died before the provider's answer.
CREATE INDEX sends_sending ON sends (sent_at) WHERE sending;

-- The send an Idempotency-Key produced, written with the send's record: a
-- repeat that takes over a key whose first request died answers from that
-- record instead of sending again.
ALTER TABLE idempotency_keys ADD COLUMN send_id text;

-- Provider events for a send whose record is not (yet) visible: parked, and
-- applied by the webhook sweep once the record appears. Past parked_until a
-- bounce, complaint or unsubscribe falls back to the contact with the
-- recipient's address; anything else is dropped.
CREATE TABLE provider_events_parked (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider     text NOT NULL,
    tenant_id    text NOT NULL,
    send_id      text NOT NULL,
    email        text NOT NULL DEFAULT '',
    outcome      text NOT NULL,
    occurred_at  timestamptz NOT NULL,
    url          text NOT NULL DEFAULT '',
    reason       text NOT NULL DEFAULT '',
    parked_at    timestamptz NOT NULL DEFAULT now(),
    parked_until timestamptz NOT NULL
);
CREATE INDEX provider_events_parked_send ON provider_events_parked (tenant_id, send_id);
CREATE INDEX provider_events_parked_age ON provider_events_parked (parked_at);

-- +goose Down
DROP TABLE provider_events_parked;
ALTER TABLE idempotency_keys DROP COLUMN send_id;
DROP INDEX sends_sending;
DROP INDEX sends_in_doubt;
ALTER TABLE sends DROP COLUMN in_doubt, DROP COLUMN sending;
