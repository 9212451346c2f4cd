package engine

import (
	"context"
	"log/slog"
	"time"

	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/queries"
)

// The sweep is the safety net under the queue: every SweepEvery it gives
// claims older than the claim timeout back (their worker died) and
// enqueues every due pending or failed row again (an enqueue that failed,
// a task id still taken, a Redis that lost its data, a retry time that
// came).
const (
	// SweepEvery bounds how late a send is whose task was lost, and adds at
	// most this much to a retry's backoff.
	SweepEvery = 5 * time.Second
	// ClaimTimeout is how old a claim must be before the sweep takes the
	// row back (SEND_CLAIM_TIMEOUT's default): well past a send's timeout,
	// so a slow attempt still running is never doubled.
	ClaimTimeout = 5 * time.Minute
	// sweepProbe is the sweep's first page: in a backlog whose tasks are
	// queued, each row costs an enqueue refused and a look at the task, so
	// the sweep reads few before it concludes the queue is whole.
	sweepProbe = 100
	sweepPage  = 1000
	// sweepBudget bounds one sweep's paging through lost due rows; with
	// SweepEvery it sets how fast a lost backlog comes back (some 5,000
	// enqueues a second here, far above the drain rate).
	sweepBudget = 4 * time.Second
	// KeptFor is how long sent and cancelled rows stay listed (ADDENDUM 7).
	KeptFor = 7 * 24 * time.Hour
)

// Sweeper re-feeds the queue from the scheduled_sends rows.
type Sweeper struct {
	DB    *store.DB
	Tasks *tasks.Client
	// MaxAttempts is SEND_MAX_ATTEMPTS; ClaimTimeout SEND_CLAIM_TIMEOUT
	// (zero: the default).
	MaxAttempts  int
	ClaimTimeout time.Duration
	Log          *slog.Logger
}

// SweepResult says what one sweep did.
type SweepResult struct {
	// Reclaimed are the stale claims taken back, Dead those of them that
	// had no attempt left.
	Reclaimed, Dead int
	// Enqueued counts the due rows handed to the queue, Requeued those of
	// them that had lost their task (a new task was queued).
	Enqueued, Requeued int
}

// Moved reports whether the sweep changed or re-fed anything (operators
// want to hear of those, not of the quiet sweeps).
func (r SweepResult) Moved() bool { return r.Reclaimed+r.Requeued > 0 }

// Sweep reclaims stale claims and enqueues every due row again.
func (s *Sweeper) Sweep(ctx context.Context, now time.Time) (SweepResult, error) {
	var res SweepResult
	timeout := s.ClaimTimeout
	if timeout <= 0 {
		timeout = ClaimTimeout
	}
	var reclaimed []queries.ScheduledSendReclaimRow
	// The reclaim and what a dead send does to its enrolment commit
	// together: a failure between them would strand the enrolment active.
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		// Enrolments first, then their sends (the lock order).
		if err := q.ScheduledSendStaleLock(ctx, now.Add(-timeout)); err != nil {
			return err
		}
		var err error
		reclaimed, err = q.ScheduledSendReclaim(ctx, queries.ScheduledSendReclaimParams{
			MaxAttempts: int32(s.MaxAttempts), StaleBefore: now.Add(-timeout)})
		if err != nil {
			return err
		}
		for _, r := range reclaimed {
			if r.Status == "dead" {
				if err := Dead(ctx, q, r.TenantID, r.EnrolmentID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	// A reclaimed row is due on the database's clock, which may be a
	// moment ahead of now: it is enqueued here rather than by the next
	// sweep.
	seen := map[string]bool{}
	for _, r := range reclaimed {
		res.Reclaimed++
		s.Log.Warn("stale claim taken back", "tenant_id", r.TenantID, "scheduled_send_id", r.ID, "status", r.Status)
		if r.Status == "dead" {
			res.Dead++
			continue
		}
		seen[r.ID] = true
		if s.requeue(ctx, tasks.Timer{TenantID: r.TenantID, ID: r.ID, At: r.ScheduledFor}) {
			res.Requeued++
		}
		res.Enqueued++
	}
	// Due rows, a page at a time. A page whose rows mostly have their task
	// waiting in the queue means the queue is whole (a backlog, not a
	// loss): the sweep stops there. A page of lost tasks (Redis flushed or
	// restarted empty) goes on to the next, within sweepBudget, so a lost
	// backlog is fed back at the rate the queue takes it, not a page per
	// sweep. The first page is small: in a backlog it is all the sweep
	// reads.
	start := time.Now()
	p := queries.ScheduledSendDueParams{Now: now, Lim: sweepProbe, AfterFor: time.Unix(0, 0)}
	for {
		due, err := s.DB.ScheduledSendDue(ctx, p)
		if err != nil {
			return res, err
		}
		requeued := 0
		for _, r := range due {
			if seen[r.ID] {
				continue
			}
			if s.requeue(ctx, tasks.Timer{TenantID: r.TenantID, ID: r.ID, At: r.ScheduledFor}) {
				requeued++
				res.Requeued++
			}
			res.Enqueued++
		}
		if len(due) < int(p.Lim) || requeued < len(due)/2 || time.Since(start) > sweepBudget || ctx.Err() != nil {
			return res, nil
		}
		last := due[len(due)-1]
		p.AfterFor, p.AfterTenant, p.AfterID = last.ScheduledFor, last.TenantID, last.ID
		p.Lim = sweepPage
	}
}

// requeue reports whether a new task was queued; a failure is left to the
// next sweep (the row stays due).
func (s *Sweeper) requeue(ctx context.Context, t tasks.Timer) bool {
	ok, err := s.Tasks.RequeueScheduled(ctx, t)
	if err != nil {
		s.Log.Warn("scheduled send not enqueued by the sweep", "scheduled_send_id", t.ID, "err", err)
	}
	return ok && err == nil
}

// Prune deletes sent and cancelled rows past KeptFor; it returns how many.
func (s *Sweeper) Prune(ctx context.Context, now time.Time) (int64, error) {
	return s.DB.ScheduledSendPrune(ctx, now.Add(-KeptFor))
}
