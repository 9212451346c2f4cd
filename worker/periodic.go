package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
)

// Periodic is a task enqueued once per period.
type Periodic struct {
	Name  string
	Every time.Duration
	Queue string
	Task  func() *asynq.Task
}

// Scheduler enqueues periodic tasks. Every worker process runs one; the
// task id is derived from the period's start, so however many processes
// tick, Redis accepts one task per period and the rest get a conflict.
// (asynq.Scheduler would enqueue once per process: asynq issues #554, #1013.)
type Scheduler struct {
	client *asynq.Client
	tasks  []Periodic
	log    *slog.Logger
	tick   time.Duration
	last   map[string]time.Time
}

// NewScheduler builds a scheduler for tasks.
func NewScheduler(client *asynq.Client, tasks []Periodic, log *slog.Logger) *Scheduler {
	return &Scheduler{client: client, tasks: tasks, log: log, tick: time.Second, last: map[string]time.Time{}}
}

// Run enqueues due tasks until ctx is done.
func (s *Scheduler) Run(ctx context.Context) {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		s.EnqueueDue(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// EnqueueDue enqueues each task whose current period this process has not
// yet enqueued. It returns how many tasks Redis accepted.
func (s *Scheduler) EnqueueDue(ctx context.Context, now time.Time) int {
	accepted := 0
	for _, p := range s.tasks {
		slot := now.Truncate(p.Every)
		if s.last[p.Name].Equal(slot) {
			continue
		}
		_, err := s.client.EnqueueContext(ctx, p.Task(),
			asynq.TaskID(PeriodicTaskID(p.Name, slot)),
			asynq.Queue(p.Queue),
			asynq.Retention(p.Every))
		switch {
		case err == nil:
			accepted++
			s.last[p.Name] = slot
		case errors.Is(err, asynq.ErrTaskIDConflict):
			s.last[p.Name] = slot // another process enqueued this period
		default:
			s.log.Error("periodic enqueue failed; retrying next tick", "task", p.Name, "err", err)
		}
	}
	return accepted
}

// PeriodicTaskID names the task of one period.
func PeriodicTaskID(name string, slot time.Time) string {
	return fmt.Sprintf("periodic:%s:%d", name, slot.Unix())
}
