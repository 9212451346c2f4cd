package worker

import (
	"context"
	"fmt"
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
	// A role's queue, and a legacy queue whose name says another role
	// than the one that drains it.
	for _, q := range []string{tasks.QueueWebhooksOutbound, tasks.QueueSendsSweepLegacy} {
		if _, err := client.Enqueue(asynq.NewTask("probe", nil), asynq.Queue(q)); err != nil {
			t.Fatal(err)
		}
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = ins.Close() })
	// As cmd/worker wires it, with the gauges read from the database.
	svc := apptest.Services(t, app.Infra{})
	h, closeAdmin := AdminHandler(opt, ins, AdminOptions{ReadOnly: true}, AdminCollectors(svc)...)
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
	for _, want := range []string{`tidings_asynq_up 1`, `tidings_asynq_queue_tasks{queue="webhooks.outbound",role="webhooks",state="pending"} 1`,
		`tidings_asynq_queue_tasks{queue="sends.sweep",role="maintenance",state="pending"} 1`} {
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
	if _, err := client.Enqueue(asynq.NewTask("probe", nil), asynq.Queue(tasks.QueueMaintenance), asynq.TaskID("t1")); err != nil {
		t.Fatal(err)
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = ins.Close() })
	for _, readOnly := range []bool{true, false} {
		h, closeAdmin := AdminHandler(opt, ins, AdminOptions{ReadOnly: readOnly})
		srv := httptest.NewServer(h)
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/monitoring/api/queues/maintenance/pending_tasks/t1", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		srv.Close()
		closeAdmin()
		_, err = ins.GetTaskInfo(tasks.QueueMaintenance, "t1")
		if gone := err != nil; gone == readOnly {
			t.Fatalf("readOnly=%v: DELETE answered %d, task gone=%v", readOnly, res.StatusCode, gone)
		}
	}
}

// ADDENDUM 25: the dashboard answers loopback names only, so a page that
// rebinds its own name to 127.0.0.1 cannot drive it from a browser.
func TestAdminDashboardChecksHost(t *testing.T) {
	t.Parallel()
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = ins.Close() })
	h, closeAdmin := AdminHandler(opt, ins, AdminOptions{ReadOnly: true, Hosts: []string{"Admin.Example:8081", "worker-sends"}})
	t.Cleanup(closeAdmin)
	for _, tc := range []struct {
		desc, host string
		want       int
	}{
		{"rebound name", "evil.example:8081", http.StatusForbidden},
		{"rebound name without port", "evil.example", http.StatusForbidden},
		{"loopback address in another form", "127.1:8081", http.StatusForbidden},
		{"localhost", "localhost:8081", http.StatusOK},
		{"localhost without port", "localhost", http.StatusOK},
		{"IPv4 loopback", "127.0.0.1:8081", http.StatusOK},
		{"IPv6 loopback", "[::1]:8081", http.StatusOK},
		{"IPv6 loopback without port", "[::1]", http.StatusOK},
		{"upper case", "LOCALHOST:9", http.StatusOK},
		{"listed in ADMIN_HOSTS", "admin.example:9999", http.StatusOK},
		{"listed in ADMIN_HOSTS without port", "worker-sends", http.StatusOK},
		{"a name that ends like a listed one", "evil-worker-sends", http.StatusForbidden},
	} {
		req := httptest.NewRequest(http.MethodGet, "/monitoring/api/queues", nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: Host %q answered %d, want %d", tc.desc, tc.host, rec.Code, tc.want)
		}
	}
}

// ADDENDUM 26: /healthz names the process's roles, and answers probes by
// address (the Host check guards the dashboard only).
func TestAdminHealthNamesRoles(t *testing.T) {
	t.Parallel()
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = ins.Close() })
	h, closeAdmin := AdminHandler(opt, ins, AdminOptions{Roles: []Role{RoleSends, RoleWebhooks}})
	t.Cleanup(closeAdmin)
	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	req.Host = "10.1.2.3:8081"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if want := `{"status":"ok","roles":["sends","webhooks"]}`; rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Fatalf("GET /healthz: %d %s, want 200 %s", rec.Code, rec.Body.String(), want)
	}
}

// tidings_sends_in_doubt counts every tenant's sends in doubt recorded in
// the last hour, and nothing else: not a settled send, not one in doubt
// from yesterday.
func TestAdminMetricsCountSendsInDoubt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	svc := apptest.Services(t, app.Infra{DB: db})
	for _, tn := range []string{"ten_a", "ten_b"} {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ($1, $1)`, tn); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool.Exec(ctx, `INSERT INTO contacts (tenant_id, id, email) VALUES ($1, 'cnt_1', 'ann@example.com')`, tn); err != nil {
			t.Fatal(err)
		}
		for i, row := range []struct {
			inDoubt bool
			age     string
		}{{true, "1 minute"}, {true, "2 days"}, {false, "1 minute"}} {
			if _, err := db.Pool.Exec(ctx, `INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id,
				template_version, from_address, to_address, subject, sent_at, in_doubt)
				VALUES ($1, $2, $2, 'cnt_1', 'welcome', 1, 'a@acme.test', 'ann@example.com', 'Hi', now() - $3::interval, $4)`,
				tn, fmt.Sprintf("snd_%d", i), row.age, row.inDoubt); err != nil {
				t.Fatal(err)
			}
		}
	}
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	ins := asynq.NewInspector(opt)
	t.Cleanup(func() { _ = ins.Close() })
	h, closeAdmin := AdminHandler(opt, ins, AdminOptions{ReadOnly: true}, AdminCollectors(svc)...)
	t.Cleanup(closeAdmin)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "\ntidings_sends_in_doubt 2\n") {
		t.Fatalf("want tidings_sends_in_doubt 2 (one recent per tenant) in\n%s", rec.Body.String())
	}
}
