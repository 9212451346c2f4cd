package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/domains"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
)

// The domain sweep runs in maintenance and checks nothing itself: a due
// domain gets one check task in the domains queue (however often the
// sweep runs), and that task, on the domains role, checks it: its records
// are absent, so it turns verifying.
func TestDomainSweepQueuesTheCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	q := newQueue(t)
	cfg := apptest.Config(t)
	cfg.DNSResolver = testenv.DNS(t).Addr // an empty zone: every name is NXDOMAIN
	d := apptest.Services(t, app.Infra{Config: cfg, DB: db,
		Tasks: tasks.NewClient(q.client, q.inspector, slog.New(slog.DiscardHandler))})

	var sweep *Periodic
	for _, p := range PeriodicTasks() {
		if p.Name == tasks.TypeDomainSweep {
			sweep = &p
		}
	}
	if sweep == nil || sweep.Queue != tasks.QueueMaintenance || sweep.Every != time.Minute || sweep.Task().Type() != tasks.TypeDomainSweep {
		t.Fatalf("periodic domain sweep: %+v", sweep)
	}

	mux := NewMux(d)
	// Nothing due: nothing queued.
	if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeDomainSweep, nil)); err != nil {
		t.Fatal(err)
	}
	if n := pendingOfType(t, q.inspector, tasks.QueueDomains, tasks.TypeDomainCheck); n != 0 {
		t.Fatalf("no domain due: %d check tasks queued", n)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_a', 'A')`); err != nil {
		t.Fatal(err)
	}
	st := &domains.Store{DB: db, Now: func() time.Time { return time.Now().Add(-time.Hour) }}
	if _, err := st.Create(ctx, "ten_a", "example.com"); err != nil { // due 50 minutes ago
		t.Fatal(err)
	}
	for range 2 {
		if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeDomainSweep, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if n := pendingOfType(t, q.inspector, tasks.QueueDomains, tasks.TypeDomainCheck); n != 1 {
		t.Fatalf("a domain due, two sweeps: %d check tasks in the domains queue, want 1", n)
	}
	got, err := st.Get(ctx, "ten_a", "example.com")
	if err != nil || got.LastCheckedAt != nil {
		t.Fatalf("the sweep checked the domain itself: %v %+v", err, got)
	}
	if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeDomainCheck, nil)); err != nil {
		t.Fatal(err)
	}
	got, err = st.Get(ctx, "ten_a", "example.com")
	if err != nil || got.Status != domains.StatusVerifying || got.LastCheckedAt == nil {
		t.Fatalf("after the check: %v %+v", err, got)
	}
}

// pendingOfType counts the tasks of type typ waiting in queue.
func pendingOfType(t *testing.T, ins *asynq.Inspector, queue, typ string) int {
	t.Helper()
	infos, err := ins.ListPendingTasks(queue, asynq.PageSize(1000))
	if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
		t.Fatal(err)
	}
	n := 0
	for _, info := range infos {
		if info.Type == typ {
			n++
		}
	}
	return n
}
