package worker

import (
	"context"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/tasks"
)

// The periodic check of sending domains (ADDENDUM section 9). Each domain
// carries the time of its next check (pending and verifying:
// DOMAIN_CHECK_INTERVAL; verified and failed: daily). The sweep
// (tasks.TypeDomainSweep, maintenance, every minute) only looks whether a
// check is due and then queues tasks.TypeDomainCheck on the domains role,
// which checks at most domainCheckBatch due domains and takes no new one
// near its timeout; whatever is left stays due and the next sweep queues
// the check again. Neither is retried: the next sweep is the retry. With
// no domains process, one check waits in the domains queue.
const (
	domainSweepEvery   = time.Minute
	domainSweepTimeout = 10 * time.Second
	domainCheckBatch   = 100
)

func domainSweepPeriodic() Periodic {
	return Periodic{Name: tasks.TypeDomainSweep, Every: domainSweepEvery, Queue: tasks.QueueMaintenance, Task: func() *asynq.Task {
		return asynq.NewTask(tasks.TypeDomainSweep, nil, asynq.MaxRetry(0), asynq.Timeout(domainSweepTimeout))
	}}
}

func handleDomainSweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		due, err := d.Domains.DueForCheck(ctx, 1)
		if err != nil || len(due) == 0 {
			return err
		}
		_, err = d.Tasks.DomainCheck(ctx)
		return err
	}
}

// HandleDomainCheck checks the due domains; exported for tests.
func HandleDomainCheck(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		n, err := d.Domains.Sweep(ctx, domainCheckBatch)
		if n > 0 {
			d.Log.Info("domains checked", "count", n)
		}
		return err
	}
}
