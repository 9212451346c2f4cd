package worker

import (
	"context"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/idempotency"
)

// TypeIdempotencySweep deletes Idempotency-Key records past their 24 hours
// (ADDENDUM section 8); a key is also taken over when it has expired, so
// the sweep only keeps the table small.
const TypeIdempotencySweep = "maintenance:idempotency-keys"

func idempotencySweepPeriodic() Periodic {
	return Periodic{Name: TypeIdempotencySweep, Every: time.Hour, Queue: QueueLow, Task: func() *asynq.Task {
		return asynq.NewTask(TypeIdempotencySweep, nil, asynq.MaxRetry(0), asynq.Timeout(5*time.Minute))
	}}
}

func handleIdempotencySweep(d Deps) asynq.HandlerFunc {
	s := &idempotency.Store{DB: d.DB}
	return func(ctx context.Context, _ *asynq.Task) error {
		n, err := s.DeleteExpired(ctx)
		if n > 0 {
			d.Log.Info("expired idempotency keys deleted", "count", n)
		}
		return err
	}
}
