-- +goose Up
-- A/B broadcasts (ADDENDUM 20). experiment holds the settings and the
-- variants as the API shows them (internal/broadcasts.Experiment: testFraction,
-- metric, waitFor in seconds, autoWinner, variants with their var_ ids);
-- null for a plain broadcast. The winner is its own columns, written once,
-- in the transaction that releases the rest of the audience to it.
ALTER TABLE broadcasts ADD COLUMN experiment jsonb;
ALTER TABLE broadcasts ADD COLUMN winner_variant_id text;
ALTER TABLE broadcasts ADD COLUMN winner_picked_at timestamptz;
ALTER TABLE broadcasts ADD COLUMN winner_reason text CHECK (winner_reason IN ('auto', 'manual'));
-- When an automatic winner is due (started_at + waitFor), set with the
-- audience; the sweep picks those whose time has come from this index, so
-- a lost timer task delays a pick by one sweep, never loses it.
ALTER TABLE broadcasts ADD COLUMN winner_due_at timestamptz;
CREATE INDEX broadcasts_winner_due ON broadcasts (winner_due_at)
    WHERE winner_due_at IS NOT NULL AND winner_variant_id IS NULL;

-- A recipient's variant: set at the snapshot for the test group, and for
-- the rest when the winner is picked. held marks the rest while they wait
-- for it: queued, but not due for the dispatch claim (the due index leaves
-- them out), so nothing of theirs can leave before the pick.
ALTER TABLE broadcast_recipients ADD COLUMN variant_id text;
ALTER TABLE broadcast_recipients ADD COLUMN held boolean NOT NULL DEFAULT false;
DROP INDEX broadcast_recipients_due;
CREATE INDEX broadcast_recipients_due ON broadcast_recipients (tenant_id, broadcast_id, scheduled_for)
    WHERE status = 'queued' AND NOT held;
-- The held rest of a broadcast, released in one statement at the pick.
CREATE INDEX broadcast_recipients_held ON broadcast_recipients (tenant_id, broadcast_id) WHERE held;

-- +goose Down
DROP INDEX broadcast_recipients_held;
DROP INDEX broadcast_recipients_due;
CREATE INDEX broadcast_recipients_due ON broadcast_recipients (tenant_id, broadcast_id, scheduled_for) WHERE status = 'queued';
ALTER TABLE broadcast_recipients DROP COLUMN held;
ALTER TABLE broadcast_recipients DROP COLUMN variant_id;
DROP INDEX broadcasts_winner_due;
ALTER TABLE broadcasts DROP COLUMN winner_due_at;
ALTER TABLE broadcasts DROP COLUMN winner_reason;
ALTER TABLE broadcasts DROP COLUMN winner_picked_at;
ALTER TABLE broadcasts DROP COLUMN winner_variant_id;
ALTER TABLE broadcasts DROP COLUMN experiment;
