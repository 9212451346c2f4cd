package worker

import (
	"context"
	"log/slog"
	"testing"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/config"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
)

// The webhook sweep re-enqueues a batch stored but never applied (its
// enqueue failed, or Redis lost it), leaves a fresh or applied one alone,
// queues the application of parked events on the webhooks role, and
// prunes applied batches and event ids past their retention.
func TestWebhookSweepRefeedsAndPrunes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	inspector := asynq.NewInspector(opt)
	defer inspector.Close()
	d := apptest.Services(t, app.Infra{DB: db, Tasks: tasks.NewClient(client, inspector, slog.New(slog.DiscardHandler))})

	var stale, fresh, old int64
	for _, q := range []struct {
		dst *int64
		sql string
	}{
		{&stale, `INSERT INTO webhook_batches (provider, body, received_at) VALUES ('sendgrid', '[]', now() - interval '5 minutes') RETURNING id`},
		{&fresh, `INSERT INTO webhook_batches (provider, body) VALUES ('sendgrid', '[]') RETURNING id`},
		{&old, `INSERT INTO webhook_batches (provider, body, received_at, applied_at) VALUES ('sendgrid', '[]', now() - interval '30 days', now() - interval '30 days') RETURNING id`},
	} {
		if err := db.Pool.QueryRow(ctx, q.sql).Scan(q.dst); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO provider_events (provider, event_id, received_at) VALUES
		('sendgrid', 'old', now() - interval '30 days'), ('sendgrid', 'new', now())`); err != nil {
		t.Fatal(err)
	}

	if err := NewMux(d).ProcessTask(ctx, asynq.NewTask(tasks.TypeWebhookSweep, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := inspector.GetTaskInfo(tasks.QueueWebhooks, tasks.WebhookTaskID(stale)); err != nil {
		t.Fatalf("stale batch %d not re-enqueued: %v", stale, err)
	}
	if _, err := inspector.GetTaskInfo(tasks.QueueWebhooks, tasks.WebhookTaskID(fresh)); err == nil {
		t.Fatalf("fresh batch %d enqueued by the sweep", fresh)
	}
	// Parked events are applied on the webhooks role, not by the sweep.
	if n := pendingOfType(t, inspector, tasks.QueueWebhooks, tasks.TypeWebhookUnpark); n != 1 {
		t.Fatalf("%d unpark tasks in the webhooks queue, want 1", n)
	}
	var batches, ids int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_batches WHERE id = $1`, old).Scan(&batches); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM provider_events`).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	if batches != 0 || ids != 1 {
		t.Fatalf("after the sweep: old batch rows %d, event ids %d; want 0 and 1", batches, ids)
	}
}

// A batch task that ran out of retries is archived by asynq and keeps its
// task id; the sweep must free that id and queue the batch again, not
// count the refused enqueue as success forever.
func TestWebhookSweepFreesAnArchivedTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	inspector := asynq.NewInspector(opt)
	defer inspector.Close()
	d := apptest.Services(t, app.Infra{DB: db, Tasks: tasks.NewClient(client, inspector, slog.New(slog.DiscardHandler))})
	var id int64
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_batches (provider, body, received_at)
		VALUES ('sendgrid', '[]', now() - interval '5 minutes') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	tid := tasks.WebhookTaskID(id)
	if _, err := client.Enqueue(asynq.NewTask(tasks.TypeWebhookBatch, nil), asynq.TaskID(tid),
		asynq.Queue(tasks.QueueWebhooks)); err != nil {
		t.Fatal(err)
	}
	if err := inspector.ArchiveTask(tasks.QueueWebhooks, tid); err != nil {
		t.Fatal(err)
	}
	if err := NewMux(d).ProcessTask(ctx, asynq.NewTask(tasks.TypeWebhookSweep, nil)); err != nil {
		t.Fatal(err)
	}
	info, err := inspector.GetTaskInfo(tasks.QueueWebhooks, tid)
	if err != nil || info.State != asynq.TaskStatePending {
		t.Fatalf("after the sweep the batch's task is %+v, %v; want pending", info, err)
	}
}
