package worker

import (
	"context"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/domains"
)

// TypeDomainSweep is the periodic check of sending domains (ADDENDUM
// section 9). Each domain carries the time of its next check (pending and
// verifying: DOMAIN_CHECK_INTERVAL; verified and failed: daily); the sweep
// takes those that are due.
const TypeDomainSweep = "domains:sweep"

// A sweep runs every minute, checks at most domainSweepBatch domains and
// takes no new one near its timeout; whatever is left stays due and the
// next run takes it. It is not retried: the next run is the retry.
const (
	domainSweepEvery   = time.Minute
	domainSweepBatch   = 100
	domainSweepTimeout = 50 * time.Second
)

// domainStore builds the domains store from the configuration.
func domainStore(d Deps) *domains.Store {
	return &domains.Store{DB: d.DB, DNS: &domains.Checker{Server: d.Config.DNSResolver},
		DKIMSuffix: d.Config.DKIMCNAMESuffix, CheckInterval: d.Config.DomainCheckInterval}
}

func domainSweepPeriodic() Periodic {
	return Periodic{Name: TypeDomainSweep, Every: domainSweepEvery, Queue: QueueLow, Task: func() *asynq.Task {
		return asynq.NewTask(TypeDomainSweep, nil, asynq.MaxRetry(0), asynq.Timeout(domainSweepTimeout))
	}}
}

func handleDomainSweep(d Deps) asynq.HandlerFunc {
	s := domainStore(d)
	return func(ctx context.Context, _ *asynq.Task) error {
		n, err := s.Sweep(ctx, domainSweepBatch)
		if n > 0 {
			d.Log.Info("domains checked", "count", n)
		}
		return err
	}
}
