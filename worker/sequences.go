package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/sequences/engine"
	"tidings/internal/tasks"
	"tidings/internal/telemetry"
)

// Sequence sends (ADDENDUM sections 6-7). Each scheduled_sends row is the
// truth; a TypeScheduledSend task with the row's id as task id, processed
// at the row's scheduledFor, is its timer. Whoever writes rows has them
// enqueued after the commit (store.Tx.Schedule); an enqueue that fails, a
// task id still taken, a Redis that lost its data, a retry time that came:
// the sweep (engine.Sweeper, every engine.SweepEvery, fixed periodic task
// ids) enqueues every due pending or failed row again, and gives claims
// older than SEND_CLAIM_TIMEOUT (their worker died) back as failed.
const (
	sweepTimeout      = 30 * time.Second
	scheduledPruneDue = time.Hour
)

// HandleScheduledSend runs one scheduled send (engine.Runner.Run); the next
// step it schedules is enqueued by its transaction. It is exported for
// tests.
func HandleScheduledSend(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		var p tasks.ScheduledPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil || p.ID == "" || p.TenantID == "" {
			return fmt.Errorf("scheduled send payload %q: %w", t.Payload(), asynq.SkipRetry)
		}
		res, err := d.Runner.Run(ctx, p.TenantID, p.ID)
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
	return Periodic{Name: tasks.TypeScheduledSweep, Every: engine.SweepEvery, Queue: tasks.QueueCritical, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeScheduledSweep, nil, asynq.MaxRetry(0), asynq.Timeout(sweepTimeout))
	}}
}

func scheduledPrunePeriodic() Periodic {
	return Periodic{Name: tasks.TypeScheduledPrune, Every: scheduledPruneDue, Queue: tasks.QueueLow, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeScheduledPrune, nil, asynq.MaxRetry(0), asynq.Timeout(sweepTimeout))
	}}
}

func handleScheduledSweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		res, err := d.Sweeper.Sweep(ctx, time.Now())
		if res.Moved() {
			d.Log.Info("scheduled sends swept", "reclaimed", res.Reclaimed, "dead", res.Dead, "requeued", res.Requeued)
		}
		return err
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
