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

// The hourly maintenance sweep also prunes the audit log: entries past a
// year go, younger ones stay (ADDENDUM 25).
func TestMaintenancePrunesAuditLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	d := apptest.Services(t, app.Infra{DB: db})
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_a', 'A');
		INSERT INTO audit_log (tenant_id, id, at, actor_type, actor_id, action, resource_type, resource_id, request_id, ip) VALUES
		  ('ten_a', 'aud_old', now() - interval '366 days', 'apiKey', 'key_1', 'contact.create', 'contact', 'cnt_1', 'r1', '::1'),
		  ('ten_a', 'aud_young', now() - interval '364 days', 'apiKey', 'key_1', 'contact.update', 'contact', 'cnt_1', 'r2', '::1'),
		  ('ten_b', 'aud_old_b', now() - interval '400 days', 'apiKey', 'key_2', 'contact.create', 'contact', 'cnt_2', 'r3', '::1'),
		  ('ten_c', 'aud_old_c', now() - interval '367 days', 'session', 'u_1', 'contact.delete', 'contact', 'cnt_3', 'r4', '::1')`); err != nil {
		t.Fatal(err)
	}
	if err := NewMux(d).ProcessTask(ctx, asynq.NewTask(tasks.TypeIdempotencySweep, nil)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := db.Pool.Query(ctx, `SELECT id FROM audit_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != 1 || ids[0] != "aud_young" {
		t.Fatalf("entries after the sweep: %v, want [aud_young]", ids)
	}
}
