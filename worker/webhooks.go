package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/apperr"
	"tidings/internal/delivery"
	"tidings/internal/events"
	"tidings/internal/telemetry"
)

// Webhook ingestion (ADDENDUM section 8). The api stores each verified
// SendGrid POST in webhook_batches and enqueues TypeWebhookBatch with the
// task id WebhookTaskID(batch id); the task applies the batch. The
// periodic sweep re-enqueues batches left unapplied for a minute (the
// enqueue failed, or Redis lost the task) and prunes old bookkeeping.
const (
	TypeWebhookBatch = "webhook:batch"
	TypeWebhookSweep = "webhooks:sweep"
)

const (
	webhookMaxRetry     = 10
	webhookTimeout      = 2 * time.Minute
	webhookSweepEvery   = time.Minute
	webhookStaleAfter   = time.Minute
	webhookSweepBatch   = 1000
	webhookSweepTimeout = 50 * time.Second
)

type webhookPayload struct {
	BatchID int64 `json:"batchId"`
}

// WebhookTaskID is the task id of a batch, so a batch is queued at most once
// at a time however often the api or the sweep enqueues it.
func WebhookTaskID(batchID int64) string { return fmt.Sprintf("webhook:%d", batchID) }

// EnqueueWebhookBatch enqueues the task that applies a stored batch. A task
// already queued for the batch is success.
func EnqueueWebhookBatch(ctx context.Context, c *asynq.Client, batchID int64) error {
	payload, err := json.Marshal(webhookPayload{BatchID: batchID})
	if err != nil {
		return err
	}
	_, err = c.EnqueueContext(ctx, asynq.NewTask(TypeWebhookBatch, payload),
		asynq.TaskID(WebhookTaskID(batchID)), asynq.Queue(QueueDefault),
		asynq.MaxRetry(webhookMaxRetry), asynq.Timeout(webhookTimeout))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}

func webhooks(d Deps) *delivery.Webhooks {
	return &delivery.Webhooks{DB: d.DB, Outcomes: &delivery.Outcomes{DB: d.DB, Events: &events.Recorder{DB: d.DB}}}
}

// HandleWebhookBatch applies one stored batch. It is exported so tests and
// the benchmark run it without a server.
func HandleWebhookBatch(d Deps) asynq.HandlerFunc {
	w := webhooks(d)
	return func(ctx context.Context, t *asynq.Task) error {
		var p webhookPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil || p.BatchID <= 0 {
			return fmt.Errorf("webhook batch payload %q: %w", t.Payload(), asynq.SkipRetry)
		}
		res, err := w.ApplyBatch(ctx, p.BatchID)
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
			telemetry.WebhookEvents(res.Applied, res.Duplicates, res.Dropped, res.Ignored)
			d.Log.Info("webhook batch applied", "batch_id", p.BatchID, "events", res.Events, "applied", res.Applied,
				"duplicates", res.Duplicates, "dropped", res.Dropped, "ignored", res.Ignored)
		}
		return nil
	}
}

func webhookSweepPeriodic() Periodic {
	return Periodic{Name: TypeWebhookSweep, Every: webhookSweepEvery, Queue: QueueLow, Task: func() *asynq.Task {
		return asynq.NewTask(TypeWebhookSweep, nil, asynq.MaxRetry(0), asynq.Timeout(webhookSweepTimeout))
	}}
}

func handleWebhookSweep(d Deps) asynq.HandlerFunc {
	w := webhooks(d)
	return func(ctx context.Context, _ *asynq.Task) error {
		stale, err := w.StaleBatches(ctx, webhookStaleAfter, webhookSweepBatch)
		if err != nil {
			return err
		}
		for _, id := range stale {
			if err := EnqueueWebhookBatch(ctx, d.Client, id); err != nil {
				return err
			}
		}
		if len(stale) > 0 {
			d.Log.Warn("webhook batches re-enqueued", "count", len(stale))
		}
		ids, batches, err := w.Prune(ctx, time.Now())
		if ids+batches > 0 {
			d.Log.Info("webhook bookkeeping pruned", "event_ids", ids, "batches", batches)
		}
		return err
	}
}
