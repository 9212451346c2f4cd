package broadcasts

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"tidings/internal/experiments"
	"tidings/internal/localtime"
	"tidings/internal/segments"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/queries"
)

// snapshotSQL writes a broadcast's audience: the segment's members by its
// current rules (segments.Predicate, built at run time, so it cannot live
// in queries/), created at or before the start, each due at its instant.
// $1 tenant, $2 broadcast, $3 {zone name: instant} of a local-time
// broadcast, $4 the instant of every other recipient, $5 the start; the
// predicate's arguments follow. One INSERT ... SELECT, however large the
// audience.
const snapshotSQL = `INSERT INTO broadcast_recipients (tenant_id, broadcast_id, contact_id, email, scheduled_for)
SELECT c.tenant_id, $2, c.id, c.email,
    coalesce(($3::jsonb ->> coalesce(c.properties->>'timezone', ''))::timestamptz, $4::timestamptz)
FROM contacts c
WHERE c.tenant_id = $1 AND c.created_at <= $5::timestamptz AND (%s)`

// snapshotABSQL is snapshotSQL for an A/B broadcast (ADDENDUM 20): each
// recipient's place is experiments.Assign computed in the statement
// (experiments.AssignSQL): $6 the test group's bucket threshold, $7 the
// number of variants, $8 their ids in order. The test group gets its
// variant; the rest is held, with no variant, until the winner.
var snapshotABSQL = `INSERT INTO broadcast_recipients (tenant_id, broadcast_id, contact_id, email, scheduled_for, variant_id, held)
SELECT c.tenant_id, $2, c.id, c.email,
    coalesce(($3::jsonb ->> coalesce(c.properties->>'timezone', ''))::timestamptz, $4::timestamptz),
    CASE WHEN a.v >= 0 THEN ($8::text[])[a.v + 1] END, a.v < 0
FROM contacts c
CROSS JOIN LATERAL (SELECT ` + experiments.AssignSQL("$2::text", "c.id", "$6::bigint", "$7::bigint") + ` AS v) a
WHERE c.tenant_id = $1 AND c.created_at <= $5::timestamptz AND (%s)`

// Start starts a broadcast whose time has come: a scheduled one becomes
// sending, and a sending one without its audience gets it, in one
// transaction with the counters, so a crash leaves either no recipient or
// all of them. It sets the dispatch timers of the recipients' due times.
// Anything else (not due, paused, started already) is left alone.
func (s *Store) Start(ctx context.Context, tenantID, id string) error {
	wrote := int64(0)
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		b, err := q.BroadcastGetForUpdate(ctx, queries.BroadcastGetForUpdateParams{TenantID: tenantID, ID: id})
		if err != nil {
			return notFound(err)
		}
		now := s.now()
		if b.Status == Scheduled && (b.StartsAt == nil || !b.StartsAt.After(now)) {
			if b, err = q.BroadcastSetStatus(ctx, queries.BroadcastSetStatusParams{TenantID: tenantID, ID: id,
				Status: Sending, StartsAt: b.StartsAt}); err != nil {
				return err
			}
		}
		if b.Status != Sending || b.Snapshotted {
			return nil
		}
		started := now
		if b.StartedAt != nil {
			started = *b.StartedAt
		}
		zones := map[string]time.Time{}
		def := started
		if b.LocalTime && b.LocalSendAt != nil {
			wall, _ := localtime.ParseWall(*b.LocalSendAt)
			names, tz, err := zonesOf(ctx, q.Queries, tenantID)
			if err != nil {
				return err
			}
			def = localtime.At(wall, localtime.Zone(nil, tz))
			for _, z := range names {
				if z != "" && localtime.Valid(z) {
					zones[z] = localtime.At(wall, localtime.Zone(z, tz))
				}
			}
		}
		zj, err := json.Marshal(zones)
		if err != nil {
			return err
		}
		x := ExperimentOf(b)
		first, head, sql := 6, []any{tenantID, id, zj, def, started}, snapshotSQL
		if x != nil {
			vids := make([]string, len(x.Variants))
			for i, v := range x.Variants {
				vids[i] = v.ID
			}
			first, sql = 9, snapshotABSQL
			head = append(head, int64(experiments.Threshold(x.TestFraction)), int64(len(vids)), vids)
		}
		pred, args, err := segments.Predicate(ctx, q.Queries, tenantID, b.SegmentID, first)
		if err != nil {
			return err
		}
		args = append(head, args...)
		tag, err := q.Raw().Exec(ctx, fmt.Sprintf(sql, pred), args...)
		if err != nil {
			return store.Translate(err)
		}
		wrote = tag.RowsAffected()
		// Every recipient of a broadcast at one instant is due at the
		// start; a local-time one's due times are read back (one scan).
		last, due := started, []time.Time{started}
		if b.LocalTime {
			if last, err = q.BroadcastRecipientsLast(ctx, queries.BroadcastRecipientsLastParams{TenantID: tenantID, BroadcastID: id}); err != nil {
				return err
			}
			if due, err = q.BroadcastRecipientsDueAt(ctx, queries.BroadcastRecipientsDueAtParams{TenantID: tenantID, BroadcastID: id}); err != nil {
				return err
			}
		}
		// An automatic winner is due waitFor after the start (ADDENDUM 20).
		var winnerAt *time.Time
		if x != nil && x.AutoWinner {
			at := started.Add(time.Duration(x.WaitSeconds) * time.Second)
			winnerAt = &at
			s.scheduleWinner(q, tenantID, id, at)
		}
		if _, err := q.BroadcastSnapshotted(ctx, queries.BroadcastSnapshottedParams{TenantID: tenantID, ID: id,
			Recipients: wrote, LastScheduledFor: last, WinnerDueAt: winnerAt}); err != nil {
			return err
		}
		for _, at := range due {
			q.Schedule(tasks.Timer{TenantID: tenantID, ID: id, At: at})
		}
		return nil
	})
	if err == nil && wrote >= analyzeAfter {
		// A large audience changes the table's shape at once: without fresh
		// statistics (autovacuum gets to it a minute later, or never where
		// it is off) the dispatch claim is planned for an empty table and
		// scans the broadcast's every row per batch.
		if _, aerr := s.DB.Pool.Exec(ctx, `ANALYZE broadcast_recipients`); aerr != nil {
			slog.Default().Warn("broadcast recipients not analyzed", "err", aerr)
		}
	}
	return err
}

// analyzeAfter is the audience size from which a snapshot is followed by
// ANALYZE.
const analyzeAfter = 1000

// Due starts every broadcast whose start has come (the sweep, for start
// timers lost with Redis): it returns how many it started.
func (s *Store) Due(ctx context.Context, limit int32) (int, error) {
	rows, err := s.DB.BroadcastsDue(ctx, limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rows {
		if err := s.Start(ctx, r.TenantID, r.ID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
