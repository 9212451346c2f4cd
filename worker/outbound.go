package worker

import (
	"context"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/tasks"
)

// Outbound webhooks (ADDENDUM 14). The database writes an outbox row with
// each fact (schemas 0016, 0017) and NOTIFYs tidings_webhooks at commit;
// ListenWebhooks turns that into a TypeOutboundDeliver task, which fans the
// outbox out into messages and deliveries and posts due deliveries in
// batches until none is left. The sweep (every outboundSweepEvery) queues
// it whenever a row waits or a delivery is due (a notification lost, a
// retry time come) and prunes deliveries past their 30 days.

const (
	outboundSweepEvery = 5 * time.Second
	outboundBudget     = 20 * time.Second
)

// HandleOutboundDeliver posts due deliveries in batches until none is due
// or its budget is spent; exported for tests.
func HandleOutboundDeliver(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		deadline := time.Now().Add(outboundBudget)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			n, err := d.Deliverer.Run(ctx)
			if err != nil {
				d.Log.Error("outbound webhook deliveries failed; the sweep retries", "err", err)
				return nil
			}
			// A claim holds at most a third of a batch per endpoint, so
			// a short batch does not mean nothing is left: only an empty
			// one does.
			if n == 0 {
				return nil
			}
		}
		d.Tasks.OutboundDeliver(ctx) // a backlog: the next task goes on
		return nil
	}
}

func outboundSweepPeriodic() Periodic {
	return Periodic{Name: tasks.TypeOutboundSweep, Every: outboundSweepEvery, Queue: tasks.QueueMaintenance, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeOutboundSweep, nil, asynq.MaxRetry(0), asynq.Timeout(sweepTimeout))
	}}
}

func handleOutboundSweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		due, err := d.DB.WebhookDeliveryDue(ctx)
		if err != nil {
			return err
		}
		waiting, err := d.DB.WebhookOutboxWaiting(ctx)
		if err != nil {
			return err
		}
		if due || waiting {
			d.Tasks.OutboundDeliver(ctx)
		}
		n, err := d.DB.WebhookDeliveryPrune(ctx)
		if n > 0 {
			d.Log.Info("outbound webhook deliveries pruned", "messages", n)
		}
		return err
	}
}

// ListenWebhooks wakes the deliverer when a transaction that wrote
// deliveries commits (LISTEN tidings_webhooks), until ctx ends; a broken
// connection is opened again after a second (the sweep covers the gap).
func ListenWebhooks(ctx context.Context, d Deps) {
	for ctx.Err() == nil {
		if err := listenOnce(ctx, d); err != nil && ctx.Err() == nil {
			d.Log.Warn("webhook notifications interrupted; listening again", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

func listenOnce(ctx context.Context, d Deps) error {
	conn, err := d.DB.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN tidings_webhooks"); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN tidings_webhooks") }()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return err
		}
		d.Tasks.OutboundDeliver(ctx)
	}
}
