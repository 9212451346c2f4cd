package worker

import (
	"context"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/tasks"
)

// The send ledger's sweep (docs/decisions.md "Delivery"): a transactional
// send's record is written before the provider is called and settled by
// its answer; a record still `sending` long after its request (the api
// process died waiting) is settled in doubt, as sent, never sent again.
// Its age bound is SEND_CLAIM_TIMEOUT, well past PROVIDER_TIMEOUT. A
// sequence step's record is its scheduled send's next claim's while that
// row is open; the sweep settles one whose row has finished (and marks the
// row sent), so no record stays `sending`.
const sendingSweepEvery = time.Minute

func sendingSweepPeriodic() Periodic {
	return Periodic{Name: tasks.TypeSendingSweep, Every: sendingSweepEvery, Queue: tasks.QueueMaintenance, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeSendingSweep, nil, asynq.MaxRetry(0), asynq.Timeout(50*time.Second))
	}}
}

func handleSendingSweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		n, err := d.Sender.SweepSending(ctx, time.Now().Add(-d.Config.SendClaimTimeout))
		if n > 0 {
			d.Log.Warn("sends settled in doubt", "count", n)
		}
		return err
	}
}
