package worker

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"tidings/internal/tasks"
)

// Periodic is a task enqueued once per period.
type Periodic struct {
	Name  string
	Every time.Duration
	Queue string
	Task  func() *asynq.Task
}

// Scheduler enqueues periodic tasks. It runs in every process of the
// maintenance role, however many there are, and enqueues each task once
// per period across all of them (asynq.Scheduler would enqueue once per
// process: asynq issues #554, #1013).
//
// Each periodic task has one fixed task id (PeriodicTaskID), so at most
// one of it exists at a time: while one waits or runs, that one is this
// period's too, and nothing is added. With no process serving the
// maintenance queue (where every periodic task goes), the first one to
// come back therefore finds one waiting task of each, not one per period
// it missed. A finished task (kept for its period,
// asynq.Retention) holds the id: when it finished within the current
// period, another process's tick finds it and adds nothing; when it
// finished before, the tick frees the id and enqueues this period's. A
// fixed id alone would stay held by an archived task for good (asynq
// issue #1055); the period's start is what tells "done" from "stale".
type Scheduler struct {
	client *asynq.Client
	ins    *asynq.Inspector
	rdb    redis.UniversalClient // repairs asynq's set of queues (tasks.TaskInfo)
	tasks  []Periodic
	log    *slog.Logger
	tick   time.Duration
	last   map[string]time.Time
}

// NewScheduler builds a scheduler for tasks; rdb (may be nil) is the Redis
// the tasks live in.
func NewScheduler(client *asynq.Client, ins *asynq.Inspector, rdb redis.UniversalClient, tasks []Periodic, log *slog.Logger) *Scheduler {
	return &Scheduler{client: client, ins: ins, rdb: rdb, tasks: tasks, log: log, tick: time.Second, last: map[string]time.Time{}}
}

// Run enqueues due tasks until ctx is done.
func (s *Scheduler) Run(ctx context.Context) {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	queues := slices.Sorted(maps.Keys(Queues(AllRoles)))
	var published time.Time
	for {
		// Every role's queue stays listed for asynqmon and the gauges, a
		// Redis flush notwithstanding (tasks.PublishQueues).
		if time.Since(published) >= time.Minute {
			if err := tasks.PublishQueues(ctx, s.rdb, queues); err != nil {
				s.log.Warn("publishing the queues failed; retrying next minute", "err", err)
			}
			published = time.Now()
		}
		s.EnqueueDue(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// EnqueueDue makes sure each task's current period is covered: by a task
// this call enqueues, or by one that already waits, runs or ran within the
// period. It returns how many tasks it enqueued.
func (s *Scheduler) EnqueueDue(ctx context.Context, now time.Time) int {
	queued := 0
	for _, p := range s.tasks {
		slot := now.Truncate(p.Every)
		if s.last[p.Name].Equal(slot) {
			continue
		}
		ok, err := s.enqueue(ctx, p, slot)
		if err != nil {
			s.log.Error("periodic enqueue failed; retrying next tick", "task", p.Name, "err", err)
			continue
		}
		s.last[p.Name] = slot
		if ok {
			queued++
		}
	}
	return queued
}

// enqueue enqueues p for the period that starts at slot unless a task of
// p covers it; it reports whether it enqueued.
func (s *Scheduler) enqueue(ctx context.Context, p Periodic, slot time.Time) (bool, error) {
	id := PeriodicTaskID(p.Name)
	add := func() error {
		_, err := s.client.EnqueueContext(ctx, p.Task(), asynq.TaskID(id), asynq.Queue(p.Queue), asynq.Retention(p.Every))
		return err
	}
	err := add()
	if !errors.Is(err, asynq.ErrTaskIDConflict) {
		return err == nil, err
	}
	info, err := tasks.TaskInfo(ctx, s.ins, s.rdb, p.Queue, id)
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound): // its retention ended meanwhile
	case err != nil:
		return false, err
	case info.State == asynq.TaskStateCompleted:
		// asynq keeps completion times in whole seconds, as slots are.
		if !info.CompletedAt.Before(slot) {
			return false, nil // ran this period
		}
	case info.State == asynq.TaskStateArchived:
		if !info.LastFailedAt.Before(slot) {
			return false, nil // ran and failed this period; the next one tries again
		}
	default:
		return false, nil // waiting or running: it covers this period
	}
	if err := s.ins.DeleteTask(p.Queue, id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
		return false, err
	}
	err = add()
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return false, nil // another process enqueued it this moment
	}
	return err == nil, err
}

// PeriodicTaskID is the one task id of a periodic task.
func PeriodicTaskID(name string) string { return "periodic:" + name }
