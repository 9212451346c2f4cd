package worker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/config"
	"tidings/internal/tasks"
	"tidings/internal/telemetry/telemetrytest"
	"tidings/internal/testenv"
)

// The admin listener's /metrics serves every metric docs/operations.md
// lists for the worker, the queue gauges read from Redis included.
func TestAdminMetricsServesTheDocumentedNames(t *testing.T) {
	t.Parallel()
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	if _, err := client.Enqueue(asynq.NewTask("probe", nil), asynq.Queue(tasks.QueueCritical)); err != nil {
		t.Fatal(err)
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = ins.Close() })
	// As cmd/worker wires it, with the gauges read from the database.
	svc := apptest.Services(t, app.Infra{})
	h, closeAdmin := AdminHandler(opt, ins, true, AdminCollectors(svc)...)
	t.Cleanup(closeAdmin)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	body := string(raw)
	if res.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %s", res.StatusCode, body)
	}
	if missing := telemetrytest.Missing(body, telemetrytest.Documented(t, "worker")); len(missing) > 0 {
		t.Fatalf("documented but not served: %v", missing)
	}
	for _, want := range []string{`tidings_asynq_up 1`, `tidings_asynq_queue_tasks{queue="critical",state="pending"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
}

// ADDENDUM 1: asynqmon is read-only unless ASYNQMON_READONLY=false: a
// request that would delete a task is refused, and the task stays.
func TestAdminDashboardIsReadOnly(t *testing.T) {
	t.Parallel()
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	if _, err := client.Enqueue(asynq.NewTask("probe", nil), asynq.Queue(tasks.QueueLow), asynq.TaskID("t1")); err != nil {
		t.Fatal(err)
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = ins.Close() })
	for _, readOnly := range []bool{true, false} {
		h, closeAdmin := AdminHandler(opt, ins, readOnly)
		srv := httptest.NewServer(h)
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/monitoring/api/queues/low/pending_tasks/t1", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		srv.Close()
		closeAdmin()
		_, err = ins.GetTaskInfo(tasks.QueueLow, "t1")
		if gone := err != nil; gone == readOnly {
			t.Fatalf("readOnly=%v: DELETE answered %d, task gone=%v", readOnly, res.StatusCode, gone)
		}
	}
}
