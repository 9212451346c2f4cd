package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/apperr"
	"tidings/internal/delivery"
	"tidings/internal/tasks"
	"tidings/internal/telemetry"
)

// Webhook ingestion (ADDENDUM section 8). The api stores each verified
// SendGrid POST in webhook_batches and enqueues TypeWebhookBatch with the
// task id tasks.WebhookTaskID(batch id); the task applies the batch. The
// periodic sweep re-enqueues batches left unapplied for a minute (the
// enqueue failed, Redis lost the task, or it ran out of retries) and prunes
// old bookkeeping.
const (
	webhookSweepEvery   = time.Minute
	webhookStaleAfter   = time.Minute
	webhookSweepBatch   = 1000
	webhookSweepTimeout = 50 * time.Second
)

// HandleWebhookBatch applies one stored batch. It is exported so tests and
// the benchmark run it without a server.
func HandleWebhookBatch(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		var p tasks.WebhookPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil || p.BatchID <= 0 {
			return fmt.Errorf("webhook batch payload %q: %w", t.Payload(), asynq.SkipRetry)
		}
		res, err := d.Webhooks.ApplyBatch(ctx, p.BatchID)
		if apperr.IsKind(err, apperr.KindNotFound) {
			// Pruned, or a stray task: nothing to apply.
			return fmt.Errorf("webhook batch %d: %w: %w", p.BatchID, err, asynq.SkipRetry)
		}
		if err != nil {
			return err
		}
		switch {
		case res.AlreadyApplied:
		case res.Unreadable != nil:
			d.Log.Warn("webhook batch is not a batch of events; marked applied", "batch_id", p.BatchID, "err", res.Unreadable)
		default:
			telemetry.WebhookEvents(res.Applied, res.Duplicates, res.Dropped, res.Ignored, res.OtherProvider)
			d.Log.Info("webhook batch applied", "batch_id", p.BatchID, "events", res.Events, "applied", res.Applied,
				"duplicates", res.Duplicates, "dropped", res.Dropped, "ignored", res.Ignored, "other_provider", res.OtherProvider, "parked", res.Parked)
		}
		return nil
	}
}

func webhookSweepPeriodic() Periodic {
	return Periodic{Name: tasks.TypeWebhookSweep, Every: webhookSweepEvery, Queue: tasks.QueueMaintenance, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeWebhookSweep, nil, asynq.MaxRetry(0), asynq.Timeout(webhookSweepTimeout))
	}}
}

func handleWebhookSweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		n, err := d.Webhooks.Requeue(ctx, webhookStaleAfter, webhookSweepBatch)
		if n > 0 {
			d.Log.Warn("webhook batches re-enqueued", "count", n)
		}
		if err != nil {
			return err
		}
		// Events that came before their send's record (ADDENDUM 12) are
		// applied on the webhooks role.
		if _, err := d.Tasks.WebhookUnpark(ctx); err != nil {
			return err
		}
		ids, batches, err := d.Webhooks.Prune(ctx, time.Now())
		if ids+batches > 0 {
			d.Log.Info("webhook bookkeeping pruned", "event_ids", ids, "batches", batches)
		}
		return err
	}
}

// HandleWebhookUnpark applies the parked events whose send's record has
// come (or falls back to the contact, or drops them, past their wait);
// exported for tests.
func HandleWebhookUnpark(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		u, err := d.Webhooks.Unpark(ctx, time.Now(), webhookSweepBatch)
		if u != (delivery.UnparkResult{}) {
			d.Log.Info("parked webhook events", "applied", u.Applied, "fell_back_to_contact", u.FellBack,
				"dropped", u.Dropped, "still_parked", u.Parked)
		}
		return err
	}
}
