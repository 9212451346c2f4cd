package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/tasks"
	"tidings/internal/telemetry"
)

// Broadcasts (ADDENDUM 13). A broadcast's start is a TypeBroadcastStart
// task at its instant (the audience snapshot, broadcasts.Store.Start); its
// recipients are rows dispatched by the same TypeDispatch tasks as
// scheduled sends. The scheduled sweep (maintenance) queues a start on
// the sends role for a due broadcast whose start task was lost or died,
// and the fan-out while recipients are due: the audience snapshot, which
// reads every contact of the tenant, runs on the sends role only.

// broadcastSweepPage bounds the broadcasts one sweep queues starts for.
const broadcastSweepPage = 20

// HandleBroadcastStart starts one broadcast; exported for tests.
func HandleBroadcastStart(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		var p tasks.BroadcastPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil || p.ID == "" || p.TenantID == "" {
			return fmt.Errorf("broadcast payload %q: %w", t.Payload(), asynq.SkipRetry)
		}
		if err := d.Broadcasts.Start(ctx, p.TenantID, p.ID); err != nil {
			// Retried by asynq; the sweep starts it if every try fails.
			return err
		}
		return nil
	}
}

// HandleBroadcastWinner picks an A/B broadcast's automatic winner once
// its waitFor has passed (ADDENDUM 20); exported for tests. The pick and
// the release of the rest are one transaction, so a retry or the sweep
// after a crash finds either nothing done or everything.
func HandleBroadcastWinner(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		var p tasks.BroadcastPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil || p.ID == "" || p.TenantID == "" {
			return fmt.Errorf("broadcast winner payload %q: %w", t.Payload(), asynq.SkipRetry)
		}
		return d.Broadcasts.PickDue(ctx, p.TenantID, p.ID)
	}
}

// dispatchBroadcasts runs one batch of due broadcast recipients and
// reports whether it was full (more may be due).
func dispatchBroadcasts(ctx context.Context, d Deps, limit int) (bool, error) {
	n, err := d.BroadcastDispatcher.Dispatch(ctx, limit)
	if err != nil {
		return false, err
	}
	telemetry.BroadcastRecipients(n.Sent, n.Skipped, n.Failed, n.Retry)
	if n.Claimed > 0 {
		d.Log.Debug("broadcast recipients dispatched", "claimed", n.Claimed, "sent", n.Sent,
			"skipped", n.Skipped, "failed", n.Failed, "retry", n.Retry)
	}
	return n.Claimed >= limit, nil
}

// sweepBroadcasts queues the start of due broadcasts not started yet,
// completes those whose last batch died before its completion check, and
// reports whether recipients are due (the caller queues the fan-out then).
func sweepBroadcasts(ctx context.Context, d Deps) (queued int, due bool, err error) {
	rows, err := d.DB.BroadcastsDue(ctx, broadcastSweepPage)
	if err != nil {
		return 0, false, err
	}
	for _, r := range rows {
		ok, err := d.Tasks.RequeueBroadcastStart(ctx, r.TenantID, r.ID)
		if err != nil {
			return queued, false, err
		}
		if ok {
			queued++
		}
	}
	// A/B winners whose timer was lost (ADDENDUM 20): the rows say which
	// are due.
	if _, err = d.Broadcasts.DueWinners(ctx, broadcastSweepPage); err != nil {
		return queued, false, err
	}
	if _, err = d.Broadcasts.Complete(ctx); err != nil {
		return queued, false, err
	}
	due, err = d.DB.BroadcastQueuedDue(ctx, time.Now().Add(-d.Config.SendClaimTimeout))
	return queued, due, err
}
