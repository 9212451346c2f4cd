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

	"tidings/internal/app/apptest"
	"tidings/internal/config"
	"tidings/internal/tasks"
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
	for _, p := range allPeriodic() {
		if _, ok := served[p.Queue]; !ok || slices.Contains(tasks.LegacyQueues, p.Queue) {
			t.Errorf("periodic %s goes to queue %q, which no role serves as its own", p.Name, p.Queue)
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
	cfg := apptest.Config(t)
	_, cfg.DatabaseURL = testenv.NewDatabase(t)
	cfg.RedisURL, _ = testenv.RedisDB(t)
	cfg.OutboxDir = t.TempDir()
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
