package worker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/config"
	"tidings/internal/domains"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/internal/templates"
	"tidings/internal/testenv"
)

func TestParseRoles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, in string
		want     []Role
		wantErr  bool
	}{
		{desc: "default", in: "", want: AllRoles},
		{desc: "all", in: "all", want: AllRoles},
		{desc: "one", in: "sends", want: []Role{RoleSends}},
		{desc: "several, spaced, repeated, in any order", in: " maintenance,imports , maintenance", want: []Role{RoleImports, RoleMaintenance}},
		{desc: "unknown", in: "sends,sendz", wantErr: true},
		{desc: "empty item", in: "sends,", wantErr: true},
		{desc: "all in a list", in: "all,sends", wantErr: true},
		{desc: "case matters", in: "Sends", wantErr: true},
	} {
		got, err := ParseRoles(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("%s: ParseRoles(%q) = %v, %v; want %v (error %v)", tc.desc, tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// Every queue is served by exactly the role its name says (the role label
// of the queue gauges, what docs/operations.md tells operators to scale),
// and every queue a task is enqueued to has a role.
func TestQueuesBelongToTheirRole(t *testing.T) {
	t.Parallel()
	served := map[string]Role{}
	for _, r := range AllRoles {
		for q := range roleQueues[r] {
			if other, ok := served[q]; ok {
				t.Errorf("queue %s served by %s and %s", q, other, r)
			}
			served[q] = r
			if tasks.QueueRole(q) != string(r) {
				t.Errorf("queue %s: QueueRole says %q, served by %s", q, tasks.QueueRole(q), r)
			}
		}
	}
	// ADDENDUM 26: the maintenance role has the sweeps and the periodic
	// scheduler; every periodic task runs there.
	for _, p := range allPeriodic() {
		if p.Queue != tasks.QueueMaintenance {
			t.Errorf("periodic %s goes to queue %q, not %q", p.Name, p.Queue, tasks.QueueMaintenance)
		}
	}
	// Every queue of an earlier version is drained by maintenance.
	for _, q := range tasks.LegacyQueues {
		if served[q] != RoleMaintenance {
			t.Errorf("legacy queue %s served by %q, want maintenance", q, served[q])
		}
	}
}

// ADDENDUM 26: a process of one role takes tasks from that role's queues
// only; another role's task stays queued (for a process of that role),
// and the api and other roles never wait on it. The maintenance role also
// drains the queues of the versions before roles.
func TestRoleProcessConsumesOnlyItsQueues(t *testing.T) {
	t.Parallel()
	for _, role := range AllRoles {
		t.Run(string(role), func(t *testing.T) {
			t.Parallel()
			p := startProcess(t, []Role{role})
			if got := p.health(t); !slices.Equal(got, []Role{role}) {
				t.Fatalf("/healthz roles %v, want [%s]", got, role)
			}
			// One probe in every queue of every role and in the legacy ones,
			// own queues last: by the time they are taken, the others have
			// been there all along.
			own := Queues([]Role{role})
			var queues []string
			for _, r := range AllRoles {
				queues = append(queues, slices.Sorted(maps.Keys(roleQueues[r]))...)
			}
			slices.SortStableFunc(queues, func(a, b string) int {
				_, ia := own[a]
				_, ib := own[b]
				switch {
				case ia == ib:
					return 0
				case ib:
					return -1
				}
				return 1
			})
			for _, q := range queues {
				if _, err := p.client.Enqueue(asynq.NewTask("probe:"+q, nil), asynq.Queue(q), asynq.TaskID("probe"),
					asynq.MaxRetry(0)); err != nil {
					t.Fatal(err)
				}
			}
			state := func(q string) asynq.TaskState {
				info, err := p.ins.GetTaskInfo(q, "probe")
				if err != nil {
					t.Fatalf("probe of %s: %v", q, err)
				}
				return info.State
			}
			// No handler knows a probe: taken, it fails and is archived.
			waitFor(t, 30*time.Second, func() bool {
				for q := range own {
					if state(q) != asynq.TaskStateArchived {
						return false
					}
				}
				return true
			})
			for _, q := range queues {
				if _, mine := own[q]; !mine && state(q) != asynq.TaskStatePending {
					t.Errorf("a %s process took the task of queue %s (%s's)", role, q, tasks.QueueRole(q))
				}
			}
		})
	}
}

type process struct {
	client *asynq.Client
	ins    *asynq.Inspector
	admin  string
}

// startProcess runs Run for roles, as a worker binary does, on a database
// and Redis database of the test's own, until the test ends.
func startProcess(t *testing.T, roles []Role) *process {
	t.Helper()
	return startProcessOn(t, processConfig(t), roles)
}

// processConfig is the configuration of worker processes on a database
// and Redis database of the test's own.
func processConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := apptest.Config(t)
	_, cfg.DatabaseURL = testenv.NewDatabase(t)
	cfg.RedisURL, _ = testenv.RedisDB(t)
	cfg.OutboxDir = t.TempDir()
	return cfg
}

// startProcessOn runs Run for roles with cfg until the test ends.
func startProcessOn(t *testing.T, cfg *config.Config, roles []Role) *process {
	t.Helper()
	opt, err := config.AsynqRedis(cfg.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.DiscardHandler), roles, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	p := &process{client: asynq.NewClient(opt), ins: asynq.NewInspector(opt), admin: "http://" + ln.Addr().String()}
	t.Cleanup(func() { _ = p.client.Close(); _ = p.ins.Close() })
	return p
}

// health reads the roles /healthz names, once the process answers.
func (p *process) health(t *testing.T) []Role {
	t.Helper()
	var body struct {
		Status string `json:"status"`
		Roles  []Role `json:"roles"`
	}
	waitFor(t, 30*time.Second, func() bool {
		res, err := http.Get(p.admin + "/healthz")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode == http.StatusOK && json.Unmarshal(raw, &body) == nil
	})
	return body.Roles
}

// ADDENDUM 26: the sweeps run in maintenance and only enqueue into the
// queues of the roles they re-feed. With a maintenance process alone, a
// due domain's check, a due broadcast's start (its own start task lost)
// and the parked webhook events wait in the domains, sends and webhooks
// queues, done by nobody; a process of those roles, started later, runs
// them.
func TestSweepsLeaveOtherRolesWorkInTheirQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := processConfig(t)
	cfg.DNSResolver = testenv.DNS(t).Addr // an empty zone: every name is NXDOMAIN
	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	d := apptest.Services(t, app.Infra{Config: cfg, DB: db, MJML: testenv.MJML(t)})
	exec := func(sql string) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO tenants (id, name, sending_status, default_from_address) VALUES ('ten_r', 'R', 'enabled', 'r@r.example')`)
	st := &domains.Store{DB: db, Now: func() time.Time { return time.Now().Add(-time.Hour) }}
	if _, err := st.Create(ctx, "ten_r", "r.example"); err != nil { // due 50 minutes ago
		t.Fatal(err)
	}
	name, subject, content := "N", "N", "<p>n</p>"
	if _, _, err := d.Templates.Put(ctx, "ten_r", "news", templates.Put{Name: &name, Subject: &subject, Content: &content}); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO segments (tenant_id, id, name, rules) VALUES ('ten_r', 'seg_all', 'All', '{"operator":"and","conditions":[]}')`)
	exec(`INSERT INTO contacts (tenant_id, id, email, created_at)
		SELECT 'ten_r', 'cnt_' || i, 'c' || i || '@example.com', now() - interval '1 hour' FROM generate_series(1, 3) i`)
	exec(`INSERT INTO broadcasts (tenant_id, id, name, template_id, segment_id, status, starts_at)
		VALUES ('ten_r', 'brd_r', 'R', 'news', 'seg_all', 'scheduled', now() - interval '1 second')`)

	m := startProcessOn(t, cfg, []Role{RoleMaintenance})
	// The scheduler enqueues every sweep at once, and the process runs them
	// (within a second alone; the bound is for a machine running the whole
	// suite under -race beside other work).
	var dc, bs, wu int
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		dc = pendingOfType(t, m.ins, tasks.QueueDomains, tasks.TypeDomainCheck)
		bs = pendingOfType(t, m.ins, tasks.QueueSends, tasks.TypeBroadcastStart)
		wu = pendingOfType(t, m.ins, tasks.QueueWebhooks, tasks.TypeWebhookUnpark)
		if dc == 1 && bs == 1 && wu == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90 s the sweeps had left %d domain checks, %d broadcast starts and %d webhook unparks waiting, want 1 each", dc, bs, wu)
		}
	}
	status := func() string {
		var s string
		if err := db.Pool.QueryRow(ctx, `SELECT status FROM broadcasts WHERE id = 'brd_r'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	checked := func() bool {
		got, err := st.Get(ctx, "ten_r", "r.example")
		if err != nil {
			t.Fatal(err)
		}
		return got.LastCheckedAt != nil
	}
	if s := status(); s != "scheduled" || checked() {
		t.Fatalf("maintenance did another role's work: broadcast %s, domain checked %v", s, checked())
	}
	// The roles come: their waiting tasks run.
	startProcessOn(t, cfg, []Role{RoleSends, RoleDomains, RoleWebhooks})
	waitFor(t, 90*time.Second, func() bool { return status() != "scheduled" && checked() })
}
