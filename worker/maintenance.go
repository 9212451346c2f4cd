package worker

import (
	"context"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/tasks"
)

// The idempotency sweep (tasks.TypeIdempotencySweep) deletes
// Idempotency-Key records past their 24 hours (ADDENDUM section 8); a key
// is also taken over when it has expired, so the sweep only keeps the
// table small.
func idempotencySweepPeriodic() Periodic {
	return Periodic{Name: tasks.TypeIdempotencySweep, Every: time.Hour, Queue: tasks.QueueLow, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeIdempotencySweep, nil, asynq.MaxRetry(0), asynq.Timeout(5*time.Minute))
	}}
}

func handleIdempotencySweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		n, err := d.Idempotency.DeleteExpired(ctx)
		if n > 0 {
			d.Log.Info("expired idempotency keys deleted", "count", n)
		}
		return err
	}
}
