package worker

import (
	"context"
	"errors"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/tasks"
)

// The idempotency sweep (tasks.TypeIdempotencySweep) deletes
// Idempotency-Key records past their 24 hours (ADDENDUM section 8); a key
// is also taken over when it has expired, so the sweep only keeps the
// table small. The same hourly run prunes audit-log entries past their
// year (ADDENDUM 25, audit.Retention).
func idempotencySweepPeriodic() Periodic {
	return Periodic{Name: tasks.TypeIdempotencySweep, Every: time.Hour, Queue: tasks.QueueMaintenance, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeIdempotencySweep, nil, asynq.MaxRetry(0), asynq.Timeout(5*time.Minute))
	}}
}

func handleIdempotencySweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		n, err := d.Idempotency.DeleteExpired(ctx)
		if n > 0 {
			d.Log.Info("expired idempotency keys deleted", "count", n)
		}
		pruned, aerr := d.Audit.Prune(ctx, time.Now())
		if pruned > 0 {
			d.Log.Info("audit entries past their retention deleted", "count", pruned)
		}
		return errors.Join(err, aerr)
	}
}

// ArchivePeriodic is the retention run (tasks.TypeEventsArchive) every
// RETENTION_INTERVAL: it makes the coming months' event partitions and
// archives events past their tenant's retention (retention.Archiver). The
// scheduler enqueues one task per period across every process; a run cut
// short (a restart) leaves nothing half done, and the next period's run
// takes what is left.
func ArchivePeriodic(every time.Duration) Periodic {
	return Periodic{Name: tasks.TypeEventsArchive, Every: every, Queue: tasks.QueueMaintenance, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeEventsArchive, nil, asynq.MaxRetry(3), asynq.Timeout(2*time.Hour))
	}}
}

// HandleEventsArchive runs the archiver once; exported for tests.
func HandleEventsArchive(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		res, err := d.Archiver.Run(ctx)
		if res.Events > 0 || err != nil {
			d.Log.Info("event retention run", "tenants", res.Tenants, "months", res.Months, "events", res.Events, "err", err)
		}
		return err
	}
}
