package worker

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/config"
	"tidings/internal/contacts"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
)

// An import is staged and its task queued; Redis then loses everything
// (FLUSHDB) and the worker dies midway through (two chunks committed). The
// sweep finds the import that stopped moving and queues its task again;
// the task finishes it, with every row counted once.
func TestImportTaskLostIsRefedAndCompletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	url, rdb := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	inspector := asynq.NewInspector(opt)
	defer inspector.Close()
	d := apptest.Services(t, app.Infra{DB: db, Tasks: tasks.NewClient(client, inspector, slog.New(slog.DiscardHandler))})
	d.Imports.Chunk = 4
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_a', 'A')`); err != nil {
		t.Fatal(err)
	}
	body := "email,n\n"
	for i := range 20 {
		body += "c" + string(rune('a'+i)) + "@example.com,x\n"
	}
	imp, err := d.Imports.Create(ctx, "ten_a", contacts.CreateImport{Format: contacts.CSV, Body: strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	tid := tasks.ImportTaskID("ten_a", imp.ID)
	if _, err := inspector.GetTaskInfo(tasks.QueueImports, tid); err != nil {
		t.Fatalf("the import's task was not queued after the commit: %v", err)
	}

	// The worker commits two chunks and dies; Redis loses the task.
	for range 2 {
		if _, err := d.Imports.Step(ctx, "ten_a", imp.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	mux := NewMux(d)
	// Still moving (a chunk a moment ago): the sweep leaves it alone.
	if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeContactImportSweep, nil)); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Exists(ctx, taskKey(tid)).Result(); err != nil || n != 0 {
		t.Fatalf("the sweep queued an import that is still moving (%v)", err)
	}
	// A while later it has not moved: the sweep queues it again.
	if _, err := db.Pool.Exec(ctx, `UPDATE contact_imports SET updated_at = now() - interval '5 minutes'`); err != nil {
		t.Fatal(err)
	}
	if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeContactImportSweep, nil)); err != nil {
		t.Fatal(err)
	}
	// (The flushed Redis has lost asynq's list of queues, which the
	// client writes once per process, so the inspector cannot see the
	// task: look at its key.)
	if n, err := rdb.Exists(ctx, taskKey(tid)).Result(); err != nil || n != 1 {
		t.Fatalf("after the sweep the import's task is not queued (%v)", err)
	}
	payload, _ := json.Marshal(tasks.ImportPayload{TenantID: "ten_a", ID: imp.ID})
	if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeContactImport, payload)); err != nil {
		t.Fatal(err)
	}
	got, err := d.Imports.Get(ctx, "ten_a", imp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != contacts.ImportCompleted || got.Processed != 20 || got.Created != 20 || got.Failed != 0 {
		t.Fatalf("import after the re-fed task: %+v", got)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT contact_count FROM tenants WHERE id = 'ten_a'`).Scan(&n); err != nil || n != 20 {
		t.Fatalf("contact count %d, %v; want 20", n, err)
	}
	var left int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM contact_import_rows`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d staging rows left after the import, %v", left, err)
	}
	// A task that died between the last chunk and the delete leaves rows:
	// the sweep deletes them.
	if _, err := db.Pool.Exec(ctx, `UPDATE contact_imports SET staged = true`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO contact_import_rows (import_seq, line, doc) SELECT seq, 99, '{}' FROM contact_imports`); err != nil {
		t.Fatal(err)
	}
	// A finished import is not queued again.
	if _, err := db.Pool.Exec(ctx, `UPDATE contact_imports SET updated_at = now() - interval '5 minutes'`); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := mux.ProcessTask(ctx, asynq.NewTask(tasks.TypeContactImportSweep, nil)); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Exists(ctx, taskKey(tid)).Result(); err != nil || n != 0 {
		t.Fatalf("the sweep queued a completed import (%v)", err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM contact_import_rows`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("the sweep left %d staging rows of a finished import, %v", left, err)
	}
}

// taskKey is asynq's key of a task of the default queue.
func taskKey(id string) string { return "asynq:{" + tasks.QueueImports + "}:t:" + id }
