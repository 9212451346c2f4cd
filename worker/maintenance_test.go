package worker

import (
	"context"
	"testing"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
)

// The idempotency-key sweep is periodic and deletes expired keys only.
func TestIdempotencySweepTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	d := apptest.Services(t, app.Infra{DB: db})
	found := false
	for _, p := range PeriodicTasks() {
		found = found || (p.Name == tasks.TypeIdempotencySweep && p.Queue == tasks.QueueMaintenance && p.Task().Type() == tasks.TypeIdempotencySweep)
	}
	if !found {
		t.Fatal("no periodic idempotency-key sweep")
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_a', 'A');
		INSERT INTO idempotency_keys (tenant_id, scope, key, request_hash, expires_at) VALUES
		  ('ten_a', 'send', 'old', '\x00', now() - interval '1 minute'),
		  ('ten_a', 'send', 'new', '\x00', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if err := NewMux(d).ProcessTask(ctx, asynq.NewTask(tasks.TypeIdempotencySweep, nil)); err != nil {
		t.Fatal(err)
	}
	var keys []string
	rows, err := db.Pool.Query(ctx, `SELECT key FROM idempotency_keys ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if len(keys) != 1 || keys[0] != "new" {
		t.Fatalf("keys after the sweep: %v, want [new]", keys)
	}
}
