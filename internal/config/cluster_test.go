package config_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/config"
	"tidings/internal/ratelimit"
	"tidings/internal/testenv"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// REDIS_CLUSTER=true with a URL that is not a cluster URL stops the
// process at start, naming REDIS_URL.
func TestRedisClusterURLValidated(t *testing.T) {
	for _, bad := range []string{"redis://127.0.0.1:7000?addr=", "redis://127.0.0.1:7000?addr=nohost:xyz&foo=1", "redis://127.0.0.1:7000/3"} {
		_, err := config.FromLookup(lookup(map[string]string{"REDIS_CLUSTER": "true", "REDIS_URL": bad}))
		if err == nil || !strings.Contains(err.Error(), "REDIS_URL") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if _, err := config.FromLookup(lookup(map[string]string{"REDIS_CLUSTER": "maybe"})); err == nil || !strings.Contains(err.Error(), "REDIS_CLUSTER") {
		t.Errorf("REDIS_CLUSTER=maybe: %v", err)
	}
	c, err := config.FromLookup(lookup(map[string]string{"REDIS_CLUSTER": "true",
		"REDIS_URL": "redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002"}))
	if err != nil || !c.RedisCluster {
		t.Fatal(c, err)
	}
	opt, err := c.AsynqRedisOpt()
	if co, ok := opt.(asynq.RedisClusterClientOpt); err != nil || !ok || len(co.Addrs) != 3 {
		t.Fatalf("%#v, %v", opt, err)
	}
}

// On a three-node Redis Cluster: the rate limiter shares one budget, a task
// id is refused twice (periodic tasks and scheduled sends rely on it), and
// asynq delivers a task once.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	url := testenv.RedisCluster(t)
	cfg, err := config.FromLookup(lookup(map[string]string{"REDIS_CLUSTER": "true", "REDIS_URL": url}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rdb, err := cfg.OpenRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	for _, tenant := range []string{"ten_a", "ten_b", "ten_c"} {
		l1, l2 := ratelimit.New(rdb, 2, "cl:"), ratelimit.New(rdb, 2, "cl:") // two api processes
		for i, l := range []*ratelimit.Limiter{l1, l2, l1} {
			r, err := l.Allow(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed != (i < 2) {
				t.Fatalf("%s request %d: allowed %v", tenant, i+1, r.Allowed)
			}
		}
	}

	opt, err := cfg.AsynqRedisOpt()
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(opt)
	defer client.Close()
	for _, q := range []string{"critical", "default", "low"} {
		if _, err := client.Enqueue(asynq.NewTask("probe", []byte(q)), asynq.Queue(q), asynq.TaskID("once-"+q)); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Enqueue(asynq.NewTask("probe", []byte(q)), asynq.Queue(q), asynq.TaskID("once-"+q)); !errors.Is(err, asynq.ErrTaskIDConflict) {
			t.Fatalf("second enqueue of one task id on %s: %v", q, err)
		}
	}
	var ran atomic.Int32
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 2, Queues: map[string]int{"critical": 6, "default": 3, "low": 1},
		TaskCheckInterval: 100 * time.Millisecond, LogLevel: asynq.FatalLevel})
	mux := asynq.NewServeMux()
	mux.HandleFunc("probe", func(context.Context, *asynq.Task) error { ran.Add(1); return nil })
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	for deadline := time.Now().Add(20 * time.Second); ran.Load() < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 tasks ran on the cluster", ran.Load())
		}
	}
	time.Sleep(300 * time.Millisecond)
	if ran.Load() != 3 {
		t.Fatalf("%d runs of 3 tasks", ran.Load())
	}
}
