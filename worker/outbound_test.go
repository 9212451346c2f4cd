package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/outbound"
	"tidings/internal/tasks"
)

// One deliver task drains every due delivery of an endpoint, though a
// claim takes at most a third of a batch of one endpoint (a chaos run
// found the task stopping after the first short batch).
func TestOutboundDeliverDrainsAnEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	cfg := apptest.Config(t)
	cfg.WebhookAllowPrivateTargets = true
	d := apptest.Services(t, app.Infra{Config: cfg})
	if _, err := d.DB.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_o', 'O')`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Outbound.Create(ctx, "ten_o", outbound.Input{URL: &srv.URL}); err != nil {
		t.Fatal(err)
	}
	const n = 2*outbound.DefaultBatch + 7
	if _, err := d.DB.Pool.Exec(ctx, `INSERT INTO contacts (tenant_id, id, email)
		SELECT 'ten_o', 'cnt_' || g, 'c' || g || '@example.com' FROM generate_series(1, $1::int) g`, n); err != nil {
		t.Fatal(err)
	}
	if err := NewMux(d).ProcessTask(ctx, asynq.NewTask(tasks.TypeOutboundDeliver, nil)); err != nil {
		t.Fatal(err)
	}
	if got.Load() != n {
		t.Fatalf("one task delivered %d of %d", got.Load(), n)
	}
}
