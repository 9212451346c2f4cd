package worker

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/config"
	"tidings/internal/testenv"
)

// allPeriodic is every periodic task as a maintenance process schedules it.
func allPeriodic() []Periodic { return append(PeriodicTasks(), ArchivePeriodic(24*time.Hour)) }

// maintenanceSchedulers are the schedulers of n maintenance processes,
// each with its own connections, on one Redis.
func maintenanceSchedulers(t *testing.T, opt asynq.RedisConnOpt, n int) []*Scheduler {
	var out []*Scheduler
	for range n {
		c, ins := asynq.NewClient(opt), asynq.NewInspector(opt)
		t.Cleanup(func() { _ = c.Close(); _ = ins.Close() })
		out = append(out, NewScheduler(c, ins, nil, allPeriodic(), slog.New(slog.DiscardHandler)))
	}
	return out
}

// periodicTasks counts, per periodic task, the tasks of it in Redis (its
// queue, every state).
func periodicTasks(t *testing.T, ins *asynq.Inspector) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, p := range allPeriodic() {
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){ins.ListPendingTasks,
			ins.ListActiveTasks, ins.ListScheduledTasks, ins.ListRetryTasks, ins.ListArchivedTasks, ins.ListCompletedTasks} {
			infos, err := list(p.Queue, asynq.PageSize(1000))
			if err != nil {
				t.Fatal(err)
			}
			for _, info := range infos {
				if info.Type == p.Task().Type() {
					counts[p.Name]++
				}
			}
		}
	}
	return counts
}

// ADDENDUM 26: two maintenance processes each run the scheduler; every
// periodic task is enqueued once per period, before and after the
// period's task has run.
func TestPeriodicEnqueuedOncePerPeriodAcrossProcesses(t *testing.T) {
	t.Parallel()
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = ins.Close() })
	ctx := context.Background()
	want := len(allPeriodic())
	now := time.Now()
	scheds := maintenanceSchedulers(t, opt, 2)
	total := 0
	for _, tick := range []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond} {
		for _, s := range scheds {
			total += s.EnqueueDue(ctx, now.Add(tick))
		}
	}
	if total != want {
		t.Fatalf("first period: %d tasks enqueued, want %d (one per periodic task)", total, want)
	}

	// The period's tasks run (a worker of every role) and complete.
	mux := asynq.NewServeMux()
	for _, p := range allPeriodic() {
		mux.HandleFunc(p.Task().Type(), func(context.Context, *asynq.Task) error { return nil })
	}
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 4, Queues: Queues(AllRoles), Logger: slogAdapter{slog.New(slog.DiscardHandler)},
		TaskCheckInterval: 50 * time.Millisecond})
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool {
		for _, p := range allPeriodic() {
			info, err := ins.GetTaskInfo(p.Queue, PeriodicTaskID(p.Name))
			if err != nil || info.State != asynq.TaskStateCompleted {
				return false
			}
		}
		return true
	})
	srv.Shutdown()

	// Processes that start later in the same period add nothing.
	again := 0
	for _, s := range maintenanceSchedulers(t, opt, 2) {
		again += s.EnqueueDue(ctx, now.Add(30*time.Millisecond))
	}
	if again != 0 {
		t.Fatalf("the same period again: %d tasks enqueued, want 0", again)
	}
	// The next period (of every task, the daily archive's too): once each.
	next := 0
	for _, s := range scheds {
		next += s.EnqueueDue(ctx, now.Add(48*time.Hour))
	}
	if next != want {
		t.Fatalf("next period: %d tasks enqueued, want %d", next, want)
	}
	for name, n := range periodicTasks(t, ins) {
		if n != 1 {
			t.Errorf("%s: %d tasks in Redis, want 1", name, n)
		}
	}
}

// With no maintenance process (here: no worker at all), the first to start
// finds one waiting task of each periodic task, not one per period missed.
func TestPeriodicWaitingTaskCoversLaterPeriods(t *testing.T) {
	t.Parallel()
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = ins.Close() })
	s := maintenanceSchedulers(t, opt, 1)[0]
	now := time.Now()
	queued := 0
	for day := range 3 {
		queued += s.EnqueueDue(context.Background(), now.Add(time.Duration(day)*48*time.Hour))
	}
	if want := len(allPeriodic()); queued != want {
		t.Errorf("%d tasks enqueued over three periods, want %d", queued, want)
	}
	counts := periodicTasks(t, ins)
	for _, p := range allPeriodic() {
		if counts[p.Name] != 1 {
			t.Errorf("%s: %d tasks waiting, want 1", p.Name, counts[p.Name])
		}
	}
}

// A Redis flush (a fault run injects one) empties asynq's set of queues,
// and a running process's asynq client never adds a queue it already
// published: the next task it writes exists in a queue the Inspector calls
// missing. The scheduler must still tell that the period is covered; before
// tasks.TaskInfo it failed every tick with "asynq: queue not found" until
// the process restarted, and the sweeps (which re-feed every queue) stopped.
func TestPeriodicSurvivesARedisFlush(t *testing.T) {
	t.Parallel()
	url, rdb := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	c, ins := asynq.NewClient(opt), asynq.NewInspector(opt)
	t.Cleanup(func() { _ = c.Close(); _ = ins.Close() })
	s := NewScheduler(c, ins, rdb, allPeriodic(), slog.New(slog.DiscardHandler))
	ctx := context.Background()
	want := len(allPeriodic())
	now := time.Now()
	if n := s.EnqueueDue(ctx, now); n != want {
		t.Fatalf("first period: %d enqueued, want %d", n, want)
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// The tasks are gone with the flush: the next period writes them again,
	// into queues missing from asynq's set.
	if n := s.EnqueueDue(ctx, now.Add(48*time.Hour)); n != want {
		t.Fatalf("after the flush: %d enqueued, want %d", n, want)
	}
	// The period after: each task still waits (nothing ran it), so it
	// covers the period, which the scheduler can only see through the
	// Inspector.
	later := now.Add(96 * time.Hour)
	s.EnqueueDue(ctx, later)
	for _, p := range allPeriodic() {
		if slot := later.Truncate(p.Every); !s.last[p.Name].Equal(slot) {
			t.Errorf("%s: the period of %s is not covered (last %s): the scheduler cannot read its task", p.Name, slot, s.last[p.Name])
		}
	}
	queues, err := ins.Queues()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(queues, "maintenance") {
		t.Errorf("asynq's queues after the repair: %v, want maintenance among them (asynqmon shows only those)", queues)
	}
	// A running scheduler lists every role's queue again, whatever the
	// Inspector was asked about.
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.Run(rctx) }()
	roleQueues := slices.Sorted(maps.Keys(Queues(AllRoles)))
	waitFor(t, 10*time.Second, func() bool {
		got, err := ins.Queues()
		return err == nil && !slices.ContainsFunc(roleQueues, func(q string) bool { return !slices.Contains(got, q) })
	})
	stop()
	<-done
}
