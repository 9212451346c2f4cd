package worker

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/domains"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
)

// The domain sweep is a periodic task of its own, and the mux runs it: a due
// domain whose records are absent gets checked and turns verifying.
func TestDomainSweepTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	cfg := apptest.Config(t)
	cfg.DNSResolver = testenv.DNS(t).Addr // an empty zone: every name is NXDOMAIN
	d := apptest.Services(t, app.Infra{Config: cfg, DB: db})

	var sweep *Periodic
	for _, p := range PeriodicTasks() {
		if p.Name == tasks.TypeDomainSweep {
			sweep = &p
		}
	}
	if sweep == nil || sweep.Queue != tasks.QueueDomains || sweep.Every != time.Minute || sweep.Task().Type() != tasks.TypeDomainSweep {
		t.Fatalf("periodic domain sweep: %+v", sweep)
	}

	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_a', 'A')`); err != nil {
		t.Fatal(err)
	}
	st := &domains.Store{DB: db, Now: func() time.Time { return time.Now().Add(-time.Hour) }}
	if _, err := st.Create(ctx, "ten_a", "example.com"); err != nil { // due 50 minutes ago
		t.Fatal(err)
	}
	if err := NewMux(d).ProcessTask(ctx, asynq.NewTask(tasks.TypeDomainSweep, nil)); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "ten_a", "example.com")
	if err != nil || got.Status != domains.StatusVerifying || got.LastCheckedAt == nil {
		t.Fatalf("after the sweep: %v %+v", err, got)
	}
}
