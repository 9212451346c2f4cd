package worker

import (
	"context"
	"time"
)

// Live segments (ADDENDUM 21) on the segments role. The database is the
// truth: writes queue contacts in segment_live_queue in their own
// transactions (schema 0071), so this loop needs no asynq task to learn of
// them and nothing is lost while no segments process runs; it only polls.
// Any number of processes may run it: the queue is claimed with SKIP
// LOCKED, a segment's tick with its row lock.

const (
	livePoll  = 200 * time.Millisecond // wait after a pass that did not fill its batch
	liveBatch = 500                    // queue rows (write statements) per transaction
	liveTicks = 100                    // segments per tick transaction
)

// RunLive keeps live segments current until ctx ends: it drains the queue,
// brings time rules to now every LiveSegmentTick, and reconciles each live
// segment every LiveSegmentReconcile.
func RunLive(ctx context.Context, d Deps) {
	tick := d.Config.LiveSegmentTick
	// Look for due ticks more often than the tick itself, so a segment is
	// never judged much later than its tick says.
	nextTick, nextReconcile := time.Now(), time.Now()
	for ctx.Err() == nil {
		n, err := d.Segments.DrainLive(ctx, liveBatch)
		if err != nil && ctx.Err() == nil {
			d.Log.Error("live segments: drain failed; retrying", "err", err)
		}
		now := time.Now()
		if !now.Before(nextTick) {
			nextTick = now.Add(min(tick/4, 5*time.Second))
			if res, err := d.Segments.TickLive(ctx, tick, liveTicks); err != nil && ctx.Err() == nil {
				d.Log.Error("live segments: tick failed; retrying", "err", err)
			} else if res.Changed > 0 {
				d.Log.Info("live segments ticked", "segments", res.Segments, "judged", res.Judged, "changed", res.Changed)
			}
		}
		if !now.Before(nextReconcile) {
			nextReconcile = now.Add(time.Minute)
			segs, repaired, err := d.Segments.ReconcileDue(ctx, d.Config.LiveSegmentReconcile, liveTicks)
			switch {
			case err != nil && ctx.Err() == nil:
				d.Log.Error("live segments: reconcile failed; retrying", "err", err)
			case repaired > 0:
				d.Log.Warn("live segments: reconcile repaired drift", "segments", segs, "repaired", repaired)
			}
		}
		if n == liveBatch {
			// A backlog: no wait. (Looking again at once after every
			// pass that found work was tried: at 1,000 writes/s the
			// passes shrank to a row or two and the p99 from a write to
			// its membership went from 0.8 s to 1.4 s and 22 s in two runs; the wait lets
			// a pass take what 200 ms brought, in one set of
			// statements.)
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(livePoll):
		}
	}
}
