-- +goose Up
-- Opens and clicks of a send are events up to a number per window
-- (delivery.MaxHitEvents of each kind per delivery.HitWindow; issue 36,
-- docs/decisions.md "Outbound webhooks: hardened"); beyond it a hit only
-- moves open_count or click_count. The window lives on the send, whose row
-- every hit already locks and writes: no other row, no other statement.
-- hit_window_at is when the current window began (null: no hit yet).
ALTER TABLE sends ADD COLUMN hit_window_at timestamptz,
    ADD COLUMN hit_window_opens integer NOT NULL DEFAULT 0,
    ADD COLUMN hit_window_clicks integer NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sends DROP COLUMN hit_window_at, DROP COLUMN hit_window_opens, DROP COLUMN hit_window_clicks;
