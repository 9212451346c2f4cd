package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/config"
	"tidings/internal/domains"
	"tidings/internal/testenv"
)

// The domain sweep is a periodic task of its own, and the mux runs it: a due
// domain whose records are absent gets checked and turns verifying.
func TestDomainSweepTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	cfg, err := config.FromLookup(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.DNSResolver = testenv.DNS(t).Addr // an empty zone: every name is NXDOMAIN
	d := Deps{Config: cfg, DB: db, Log: slog.New(slog.DiscardHandler)}

	var sweep *Periodic
	for _, p := range PeriodicTasks(d) {
		if p.Name == TypeDomainSweep {
			sweep = &p
		}
	}
	if sweep == nil || sweep.Queue != QueueLow || sweep.Every != time.Minute || sweep.Task().Type() != TypeDomainSweep {
		t.Fatalf("periodic domain sweep: %+v", sweep)
	}

	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_a', 'A')`); err != nil {
		t.Fatal(err)
	}
	st := &domains.Store{DB: db, Now: func() time.Time { return time.Now().Add(-time.Hour) }}
	if _, err := st.Create(ctx, "ten_a", "example.com"); err != nil { // due 50 minutes ago
		t.Fatal(err)
	}
	if err := NewMux(d).ProcessTask(ctx, asynq.NewTask(TypeDomainSweep, nil)); err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, "ten_a", "example.com")
	if err != nil || got.Status != domains.StatusVerifying || got.LastCheckedAt == nil {
		t.Fatalf("after the sweep: %v %+v", err, got)
	}
}
