package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/broadcasts"
	"tidings/internal/sequences/engine"
	"tidings/internal/tasks"
	"tidings/internal/telemetry"
)

// Sequence sends (ADDENDUM sections 6-7). Each scheduled_sends row is the
// truth; a TypeDispatch task at the second it is due is its timer (one task
// for every row due that second). Whoever writes rows has the timers set
// after the commit (store.Tx.Schedule). A dispatch claims due rows in
// batches (engine.Runner.Dispatch) until none is left; a full batch queues
// the fan-out (WORKER_CONCURRENCY dispatch tasks), so a backlog is drained
// by every worker slot of every process. An enqueue that fails, a Redis
// that lost its data, a retry time that came: the sweep (engine.Sweeper,
// every engine.SweepEvery, fixed periodic task ids) queues the fan-out
// whenever a row is due, and gives claims older than SEND_CLAIM_TIMEOUT
// (their worker died) back as failed.
const (
	sweepTimeout      = 30 * time.Second
	scheduledPruneDue = time.Hour
	// dispatchBudget bounds one dispatch task's loop over batches; a
	// backlog left is the fan-out's (queued before the task ends).
	dispatchBudget = 20 * time.Second
)

// HandleDispatch runs due scheduled sends in batches of engine.DefaultBatch
// until none is due or its budget is spent. It is exported for tests and
// the drain benchmark.
func HandleDispatch(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		deadline := time.Now().Add(dispatchBudget)
		fanned := false
		for {
			// Broadcast recipients share the dispatch: one batch of each
			// per round, so neither starves the other.
			// Each batch is one attempt: its claim, records and provider
			// calls end within SEND_ATTEMPT_TIMEOUT (then the writes after
			// the answers), so no claim outlives SEND_CLAIM_TIMEOUT while
			// its worker still works on it (config: the floor).
			actx, cancel := context.WithTimeout(ctx, d.Config.SendAttemptTimeout)
			moreBroadcast, err := dispatchBroadcasts(actx, d, broadcasts.DefaultBatch)
			cancel()
			if err != nil {
				d.Log.Error("broadcast dispatch failed; the sweep retries", "err", err)
			}
			actx, cancel = context.WithTimeout(ctx, d.Config.SendAttemptTimeout)
			res, err := d.Runner.Dispatch(actx, engine.DefaultBatch)
			cancel()
			if err != nil {
				// The rows stay due; the sweep queues the fan-out again.
				d.Log.Error("dispatch failed; the sweep retries", "err", err)
				return nil
			}
			for _, r := range res {
				telemetry.ScheduledRun(string(r.Outcome))
				if r.Outcome == engine.OutcomeFailed || r.Outcome == engine.OutcomeDead {
					d.Log.Warn("scheduled send failed", "outcome", r.Outcome, "err", r.Err)
				}
			}
			if len(res) > 0 {
				d.Log.Debug("scheduled sends dispatched", "count", len(res))
			}
			if (len(res) < engine.DefaultBatch && !moreBroadcast) || ctx.Err() != nil {
				return nil
			}
			// A full batch: more may be due. Let every slot help, once.
			if !fanned || time.Now().After(deadline) {
				if _, err := d.Tasks.FanOut(ctx, max(d.Config.WorkerConcurrency, 1)); err != nil {
					d.Log.Warn("dispatch fan-out not queued; the sweep will", "err", err)
				}
				fanned = true
			}
			if time.Now().After(deadline) {
				return nil
			}
		}
	}
}

// HandleScheduledSend runs one scheduled send (engine.Runner.Run): the
// per-row timer of earlier versions, served for the tasks they queued. It
// is exported for tests.
func HandleScheduledSend(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		var p tasks.ScheduledPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil || p.ID == "" || p.TenantID == "" {
			return fmt.Errorf("scheduled send payload %q: %w", t.Payload(), asynq.SkipRetry)
		}
		actx, cancel := context.WithTimeout(ctx, d.Config.SendAttemptTimeout)
		defer cancel()
		res, err := d.Runner.Run(actx, p.TenantID, p.ID)
		if err != nil {
			telemetry.ScheduledRun(string(engine.OutcomeFailed))
			// The row is failed (or still pending) and the sweep re-feeds
			// it. The task succeeds all the same: a failed task would be
			// archived and keep the row's task id.
			d.Log.Error("scheduled send attempt failed; the sweep retries it", "tenant_id", p.TenantID,
				"scheduled_send_id", p.ID, "err", err)
			return nil
		}
		telemetry.ScheduledRun(string(res.Outcome))
		switch res.Outcome {
		case engine.OutcomeFailed, engine.OutcomeDead:
			d.Log.Warn("scheduled send failed", "tenant_id", p.TenantID, "scheduled_send_id", p.ID,
				"outcome", res.Outcome, "err", res.Err)
		case engine.OutcomeNone:
		default:
			d.Log.Info("scheduled send processed", "tenant_id", p.TenantID, "scheduled_send_id", p.ID,
				"outcome", res.Outcome)
		}
		return nil
	}
}

func scheduledSweepPeriodic() Periodic {
	return Periodic{Name: tasks.TypeScheduledSweep, Every: engine.SweepEvery, Queue: tasks.QueueMaintenance, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeScheduledSweep, nil, asynq.MaxRetry(0), asynq.Timeout(sweepTimeout))
	}}
}

func scheduledPrunePeriodic() Periodic {
	return Periodic{Name: tasks.TypeScheduledPrune, Every: scheduledPruneDue, Queue: tasks.QueueMaintenance, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeScheduledPrune, nil, asynq.MaxRetry(0), asynq.Timeout(sweepTimeout))
	}}
}

func handleScheduledSweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		res, err := d.Sweeper.Sweep(ctx, time.Now())
		if res.Moved() {
			d.Log.Info("scheduled sends swept", "reclaimed", res.Reclaimed, "dead", res.Dead,
				"dispatch_tasks_queued", res.Queued, "holdouts_completed", res.Holdouts)
		}
		starts, due, berr := sweepBroadcasts(ctx, d)
		if starts > 0 {
			d.Log.Info("broadcast starts queued by the sweep", "count", starts)
		}
		if due && berr == nil {
			if _, berr = d.Tasks.FanOut(ctx, max(d.Config.WorkerConcurrency, 1)); berr != nil {
				berr = fmt.Errorf("broadcast dispatch fan-out: %w", berr)
			}
		}
		return errors.Join(err, berr)
	}
}

func handleScheduledPrune(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		n, err := d.Sweeper.Prune(ctx, time.Now())
		if n > 0 {
			d.Log.Info("sent and cancelled scheduled sends pruned", "count", n)
		}
		return err
	}
}
