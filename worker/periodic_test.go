package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/config"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
)

// Several worker processes each run a scheduler; every period is enqueued
// once.
func TestPeriodicEnqueuedOncePerPeriodAcrossProcesses(t *testing.T) {
	t.Parallel()
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	periodic := []Periodic{{Name: "probe", Every: time.Minute, Queue: tasks.QueueLow,
		Task: func() *asynq.Task { return asynq.NewTask("test:probe", nil) }}}
	var scheds []*Scheduler
	for i := 0; i < 3; i++ {
		c := asynq.NewClient(opt)
		t.Cleanup(func() { _ = c.Close() })
		scheds = append(scheds, NewScheduler(c, periodic, slog.New(slog.DiscardHandler)))
	}
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 10, 0, 5, 0, time.UTC)
	total := 0
	for _, tick := range []time.Duration{0, time.Second, 30 * time.Second} {
		for _, s := range scheds {
			total += s.EnqueueDue(ctx, now.Add(tick))
		}
	}
	if total != 1 {
		t.Fatalf("first period enqueued %d times, want 1", total)
	}
	next := 0
	for _, s := range scheds {
		next += s.EnqueueDue(ctx, now.Add(time.Minute))
	}
	if next != 1 {
		t.Fatalf("second period enqueued %d times, want 1", next)
	}
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	pending, err := insp.ListPendingTasks(tasks.QueueLow)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 {
		t.Fatalf("%d pending tasks, want 2", len(pending))
	}
}
