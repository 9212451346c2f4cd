package worker

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"tidings/internal/app/apptest"
	"tidings/internal/config"
	"tidings/internal/sequences/engine"
	"tidings/internal/sequences/engine/enginetest"
	"tidings/internal/tasks"
	"tidings/internal/telemetry"
	"tidings/internal/testenv"
)

// The metric of scheduled-send runs is labelled by the engine's outcomes,
// all of them, created at start: one list, checked here where both are in
// reach.
func TestRunOutcomesAreTheEngines(t *testing.T) {
	t.Parallel()
	var want []string
	for _, o := range engine.Outcomes {
		want = append(want, string(o))
	}
	if got := telemetry.RunOutcomes(); !slices.Equal(got, want) {
		t.Fatalf("telemetry's outcomes %v, the engine's %v", got, want)
	}
}

// queue is asynq on a Redis database of the test's own: a client and an
// inspector (closed when the test ends), and the database itself.
type queue struct {
	opt       asynq.RedisConnOpt
	client    *asynq.Client
	inspector *asynq.Inspector
	rdb       redis.UniversalClient
}

func newQueue(t *testing.T) queue {
	t.Helper()
	url, rdb := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	q := queue{opt: opt, client: asynq.NewClient(opt), inspector: asynq.NewInspector(opt), rdb: rdb}
	t.Cleanup(func() { _ = q.client.Close(); _ = q.inspector.Close() })
	return q
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
	}
}

// TestSequenceEndToEndThroughAsynq runs a two-step drip with a 2 s delay
// through the real asynq server; Redis is flushed between the steps, and
// the sweep re-feeds the queue from the rows.
func TestSequenceEndToEndThroughAsynq(t *testing.T) {
	t.Parallel()
	f := enginetest.New(t, "org_seq_e2e")
	q := newQueue(t)
	log := slog.New(slog.DiscardHandler)
	// The same services with a queue: recording an event enqueues its
	// sends after the commit.
	in := f.Infra
	in.Tasks = tasks.NewClient(q.client, q.inspector, log)
	qf := *f
	qf.Svc = apptest.Services(t, in)
	srv := NewServer(q.opt, log, 4, AllRoles)
	if err := srv.Start(NewMux(qf.Svc)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	f.PutSequence("drip", "name: D\ntrigger: {event: go}\nsteps: [{send: welcome}, {delay: 2s}, {send: tips}]\n", true)
	start := time.Now()
	qf.Event("go", nil)
	waitFor(t, 5*time.Second, func() bool { return f.SG.Count() == 1 })
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("first send took %v", d)
	}
	// Redis loses every task: the second step's timer is gone.
	q.rdb.FlushDB(context.Background())
	sched := NewScheduler(q.client, q.inspector, nil, PeriodicTasks(), log)
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sched.Run(sctx) }()
	t.Cleanup(func() { stop(); <-done })
	waitFor(t, 20*time.Second, func() bool { return f.SG.Count() == 2 })
	time.Sleep(500 * time.Millisecond)
	if f.SG.Count() != 2 {
		t.Fatalf("sent %d", f.SG.Count())
	}
	if e := f.Enrolment("drip"); e.Status != "completed" {
		t.Fatalf("%+v", e)
	}
}

// A worker killed mid-dispatch leaves its claim and a dispatch task that
// asynq archives when the lease runs out, keeping its task id. The sweep
// takes the claim back and frees the id, so the fan-out is queued again
// and sends the row once.
func TestScheduledSweepFreesArchivedTaskID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_seq_archived")
	q := newQueue(t)
	log := slog.New(slog.DiscardHandler)
	f.PutSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.Event("go", nil)
	tc := tasks.NewClient(q.client, q.inspector, log)
	if n, err := tc.FanOut(ctx, 1); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if err := q.inspector.ArchiveTask(tasks.QueueSends, "dispatch:fan:0"); err != nil {
		t.Fatal(err)
	}
	f.Exec(`UPDATE scheduled_sends SET status = 'claimed', claimed_at = now() - interval '10 minutes', attempts = 1
		WHERE tenant_id = $1`, f.Tenant)

	sweeper := &engine.Sweeper{DB: f.Svc.DB, Tasks: tc, MaxAttempts: f.Svc.Config.SendMaxAttempts, FanOut: 1, Log: log}
	if res, err := sweeper.Sweep(ctx, time.Now()); err != nil || res.Reclaimed != 1 || !res.Due || res.Queued != 1 {
		t.Fatal(res, err)
	}
	info, err := q.inspector.GetTaskInfo(tasks.QueueSends, "dispatch:fan:0")
	if err != nil || info.State == asynq.TaskStateArchived {
		t.Fatalf("task %v, %v: want queued again", info, err)
	}
	// A sweep while the new task waits leaves it alone.
	if res, err := sweeper.Sweep(ctx, time.Now()); err != nil || res.Queued != 0 {
		t.Fatal(res, err)
	}
	if info2, err := q.inspector.GetTaskInfo(tasks.QueueSends, "dispatch:fan:0"); err != nil || info2.State != info.State {
		t.Fatalf("task %v, %v", info2, err)
	}
	enginetest.WantOutcomes(t, f.RunDue(), engine.OutcomeSent)
	if f.SG.Count() != 1 {
		t.Fatalf("sent %d", f.SG.Count())
	}
}

// After Redis loses a backlog, one sweep queues the dispatch fan-out, and
// the fan-out drains the whole backlog in batches; a sweep while the
// fan-out waits in the queue queues nothing more.
func TestScheduledSweepFeedsALostBacklogInOneSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_seq_backlog")
	q := newQueue(t)
	log := slog.New(slog.DiscardHandler)
	f.PutSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	const n = 250
	f.Exec(`INSERT INTO contacts (tenant_id, id, email) SELECT $1, 'cnt_' || g, 'c' || g || '@example.com'
		FROM generate_series(1, $2::int) g`, f.Tenant, n)
	f.Exec(`INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
		VALUES ($1, 'acme.example', 'verified', true, 'tok', '{a,b,c}')`, f.Tenant)
	f.Exec(`UPDATE tenants SET sending_status = 'enabled', default_from_address = 'a@acme.example' WHERE id = $1`, f.Tenant)
	f.Exec(`INSERT INTO enrolments (tenant_id, id, sequence_id, contact_id, current_step, current_step_index)
		SELECT $1, 'enr_' || g, 's', 'cnt_' || g, 'step-1', 1 FROM generate_series(1, $2::int) g`, f.Tenant, n)
	f.Exec(`INSERT INTO scheduled_sends (tenant_id, id, contact_id, enrolment_id, sequence_id, sequence_version, step_id,
		template_id, scheduled_for)
		SELECT $1, 'sch_' || g, 'cnt_' || g, 'enr_' || g, 's', 1, 'step-1', 'welcome', now() - interval '1 minute' + g * interval '1 millisecond'
		FROM generate_series(1, $2::int) g`, f.Tenant, n)
	tc := tasks.NewClient(q.client, q.inspector, log)
	sweeper := &engine.Sweeper{DB: f.Svc.DB, Tasks: tc, MaxAttempts: f.Svc.Config.SendMaxAttempts, FanOut: 4, Log: log}
	if got, err := sweeper.Sweep(ctx, time.Now()); err != nil || !got.Due || got.Queued != 4 {
		t.Fatalf("first sweep: %+v, %v; want the fan-out of 4 queued", got, err)
	}
	if qi, err := q.inspector.GetQueueInfo(tasks.QueueSends); err != nil || qi.Pending+qi.Scheduled != 4 {
		t.Fatalf("queue %+v, %v", qi, err)
	}
	if got, err := sweeper.Sweep(ctx, time.Now()); err != nil || got.Queued != 0 {
		t.Fatalf("second sweep: %+v, %v; want nothing more queued", got, err)
	}
	// One dispatch task drains it all, batch after batch.
	if err := HandleDispatch(f.Svc).ProcessTask(ctx, asynq.NewTask(tasks.TypeDispatch, nil)); err != nil {
		t.Fatal(err)
	}
	if left := f.Scheduled("pending", ""); len(left) != 0 {
		t.Fatalf("%d left pending", len(left))
	}
	if f.SG.Count() != n {
		t.Fatalf("sent %d of %d", f.SG.Count(), n)
	}
}
