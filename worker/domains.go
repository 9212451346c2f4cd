package worker

import (
	"context"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/tasks"
)

// The periodic check of sending domains (ADDENDUM section 9,
// tasks.TypeDomainSweep). Each domain carries the time of its next check
// (pending and verifying: DOMAIN_CHECK_INTERVAL; verified and failed:
// daily); the sweep takes those that are due.
// A sweep runs every minute, checks at most domainSweepBatch domains and
// takes no new one near its timeout; whatever is left stays due and the
// next run takes it. It is not retried: the next run is the retry.
const (
	domainSweepEvery   = time.Minute
	domainSweepBatch   = 100
	domainSweepTimeout = 50 * time.Second
)

func domainSweepPeriodic() Periodic {
	return Periodic{Name: tasks.TypeDomainSweep, Every: domainSweepEvery, Queue: tasks.QueueDomains, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeDomainSweep, nil, asynq.MaxRetry(0), asynq.Timeout(domainSweepTimeout))
	}}
}

func handleDomainSweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		n, err := d.Domains.Sweep(ctx, domainSweepBatch)
		if n > 0 {
			d.Log.Info("domains checked", "count", n)
		}
		return err
	}
}
