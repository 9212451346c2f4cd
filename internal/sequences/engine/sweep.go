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
// claims older than the claim timeout back (their worker died), and when
// any row is due (an enqueue that failed, a Redis that lost its data, a
// retry time that came, a backlog) it makes sure the dispatch fan-out is
// queued, which drains whatever is due.
const (
	// SweepEvery bounds how late a send is whose timer was lost, and adds
	// at most this much to a retry's backoff.
	SweepEvery = 5 * time.Second
	// ClaimTimeout is how old a claim must be before the sweep takes the
	// row back (SEND_CLAIM_TIMEOUT's default): well past a send's timeout,
	// so a slow attempt still running is never doubled.
	ClaimTimeout = 5 * time.Minute
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
	// FanOut is how many dispatch tasks drain a backlog at once
	// (WORKER_CONCURRENCY; 0: one).
	FanOut int
	Log    *slog.Logger
}

// SweepResult says what one sweep did.
type SweepResult struct {
	// Reclaimed are the stale claims taken back, Dead those of them that
	// had no attempt left.
	Reclaimed, Dead int
	// Due: some row was due; Queued dispatch tasks were queued for it (0:
	// they were all queued or running already).
	Due    bool
	Queued int
	// Holdouts are the holdout enrolments completed (ADDENDUM 20).
	Holdouts int
}

// Moved reports whether the sweep changed or re-fed anything (operators
// want to hear of those, not of the quiet sweeps).
func (r SweepResult) Moved() bool { return r.Reclaimed+r.Queued+r.Holdouts > 0 }

// Sweep reclaims stale claims and, when anything is due, queues the
// dispatch fan-out.
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
			if r.Status == StatusDead {
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
	for _, r := range reclaimed {
		res.Reclaimed++
		s.Log.Warn("stale claim taken back", "tenant_id", r.TenantID, "scheduled_send_id", r.ID, "status", r.Status)
		if r.Status == StatusDead {
			res.Dead++
		}
	}
	// Holdout enrolments have no send to carry them: the sweep is their
	// timer, so one completes at most SweepEvery after the sequence would
	// have.
	if res.Holdouts, err = CompleteHoldouts(ctx, s.DB, now); err != nil {
		return res, err
	}
	// A reclaimed row is due on the database's clock, which may be a
	// moment ahead of now.
	due, err := s.DB.ScheduledSendDue(ctx, queries.ScheduledSendDueParams{Now: now.Add(time.Second), Lim: 1,
		AfterFor: time.Unix(0, 0)})
	if err != nil || len(due) == 0 {
		return res, err
	}
	res.Due = true
	res.Queued, err = s.Tasks.FanOut(ctx, max(s.FanOut, 1))
	return res, err
}

// Prune deletes sent and cancelled rows past KeptFor; it returns how many.
func (s *Sweeper) Prune(ctx context.Context, now time.Time) (int64, error) {
	return s.DB.ScheduledSendPrune(ctx, now.Add(-KeptFor))
}
