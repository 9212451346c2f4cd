package worker

import (
	"context"
	"log/slog"
	"testing"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/provider"
	"tidings/internal/provider/providertest"
	"tidings/internal/tasks"
	"tidings/internal/templates"
	"tidings/internal/testenv"
)

// A scheduled broadcast whose start task was lost (Redis flushed) gets a
// start task in the sends queue from the scheduled sweep (which runs in
// maintenance and starts nothing itself: the audience snapshot is the
// sends role's), and its recipients go out with the dispatch task, once
// each.
func TestBroadcastStartedBySweepAndDispatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sg := providertest.NewSendGrid(t)
	cfg := apptest.Config(t)
	sg.Configure(cfg)
	prov, err := provider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := testenv.DB(t)
	q := newQueue(t)
	d := apptest.Services(t, app.Infra{Config: cfg, DB: db, Provider: prov, MJML: testenv.MJML(t),
		Tasks: tasks.NewClient(q.client, q.inspector, slog.New(slog.DiscardHandler))})
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO tenants (id, name, sending_status, default_from_address) VALUES ('ten_w', 'W', 'enabled', 'w@w.example')`)
	exec(`INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
		VALUES ('ten_w', 'w.example', 'verified', true, 't', '{a,b,c}')`)
	name, subject, content := "N", "N", "<p>n</p>"
	if _, _, err := d.Templates.Put(ctx, "ten_w", "news", templates.Put{Name: &name, Subject: &subject, Content: &content}); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO segments (tenant_id, id, name, rules) VALUES ('ten_w', 'seg_all', 'All', '{"operator":"and","conditions":[]}')`)
	exec(`INSERT INTO contacts (tenant_id, id, email, created_at)
		SELECT 'ten_w', 'cnt_' || i, 'c' || i || '@example.com', now() - interval '1 hour' FROM generate_series(1, 150) i`)
	exec(`INSERT INTO broadcasts (tenant_id, id, name, template_id, segment_id, status, starts_at)
		VALUES ('ten_w', 'brd_w', 'W', 'news', 'seg_all', 'scheduled', now() - interval '1 second')`)

	mux := NewMux(d)
	for range 2 {
		if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeScheduledSweep, nil)); err != nil {
			t.Fatal(err)
		}
	}
	var status string
	var recipients int64
	if err := db.Pool.QueryRow(ctx, `SELECT status FROM broadcasts WHERE id = 'brd_w'`).Scan(&status); err != nil {
		t.Fatal(err)
	}
	starts, err := q.inspector.ListPendingTasks(tasks.QueueSends, asynq.PageSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	var start *asynq.TaskInfo
	for _, info := range starts {
		if info.Type == tasks.TypeBroadcastStart {
			if start != nil {
				t.Fatalf("two start tasks queued by two sweeps: %s and %s", start.ID, info.ID)
			}
			start = info
		}
	}
	if status != "scheduled" || start == nil {
		t.Fatalf("after the sweep: broadcast %s (want scheduled: the sweep starts nothing), start task %v", status, start)
	}
	if err := mux.ProcessTask(ctx, asynq.NewTask(start.Type, start.Payload)); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT status, recipients FROM broadcasts WHERE id = 'brd_w'`).Scan(&status, &recipients); err != nil {
		t.Fatal(err)
	}
	if status != "sending" || recipients != 150 {
		t.Fatalf("after the sweep: %s with %d recipients", status, recipients)
	}
	// One dispatch task drains it (more than one batch).
	if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeDispatch, nil)); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT status FROM broadcasts WHERE id = 'brd_w'`).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "sent" || sg.Count() != 150 {
		t.Fatalf("after dispatch: %s, %d messages", status, sg.Count())
	}
	// The start task of a broadcast already started changes nothing.
	if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeBroadcastStart, []byte(`{"tenantId":"ten_w","broadcastId":"brd_w"}`))); err != nil {
		t.Fatal(err)
	}
	if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeDispatch, nil)); err != nil || sg.Count() != 150 {
		t.Fatalf("after a second start: %d messages, %v", sg.Count(), err)
	}
}
