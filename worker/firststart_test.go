package worker

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app/apptest"
	"tidings/internal/config"
	"tidings/internal/store"
	"tidings/internal/testenv"
)

// syncBuffer is a log the test reads while the worker writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A fresh install: the worker (every role, the scheduler with them) starts
// on a database no api has migrated yet. It says it waits, starts nothing,
// and once the api has migrated it starts; nothing fails on the way (no
// error logged, no task retried or archived).
func TestWorkerWaitsForTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := apptest.Config(t)
	_, cfg.DatabaseURL = testenv.NewDatabase(t)
	cfg.RedisURL, _ = testenv.RedisDB(t)
	cfg.OutboxDir = t.TempDir()
	// An empty database, as a fresh install's.
	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	if v, err := db.SchemaVersion(ctx); err != nil || v != 0 {
		t.Fatalf("schema version of an empty database: %d, %v", v, err)
	}

	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg, log, AllRoles, ln) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
			<-done
		}
	})

	waitFor(t, 30*time.Second, func() bool {
		return strings.Contains(logs.String(), "waiting for the database schema (the api applies migrations)")
	})
	time.Sleep(2 * schemaPoll) // a worker that did not wait would be running by now
	if strings.Contains(logs.String(), "worker running") {
		t.Fatalf("the worker started on an empty database:\n%s", logs.String())
	}

	// The api migrates.
	if err := db.Migrate(ctx, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool { return strings.Contains(logs.String(), "worker running") })
	// Let the scheduler's first round and the tasks it queues run.
	time.Sleep(3 * time.Second)

	opt, err := config.AsynqRedis(cfg.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	ins := asynq.NewInspector(opt)
	defer ins.Close()
	queues, err := ins.Queues()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		info, err := ins.GetQueueInfo(q)
		if err != nil {
			t.Fatal(err)
		}
		if info.Retry+info.Archived+info.FailedTotal > 0 {
			t.Errorf("queue %s on a fresh install: %d retried, %d archived, %d failed", q, info.Retry, info.Archived, info.FailedTotal)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	stopped = true
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "does not exist") ||
			strings.Contains(line, "Retry exhausted") {
			t.Errorf("a fresh install logged a failure: %s", line)
		}
	}
	if !strings.Contains(logs.String(), "database schema ready") {
		t.Errorf("no line saying the schema is ready:\n%s", logs.String())
	}
}

// A worker stopped while it waits stops cleanly.
func TestWorkerStopsWhileWaitingForTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := apptest.Config(t)
	_, cfg.DatabaseURL = testenv.NewDatabase(t)
	cfg.RedisURL, _ = testenv.RedisDB(t)
	cfg.OutboxDir = t.TempDir()
	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg, slog.New(slog.NewTextHandler(logs, nil)), AllRoles, ln) }()
	waitFor(t, 30*time.Second, func() bool { return strings.Contains(logs.String(), "waiting for the database schema") })
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run stopped while waiting: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop while waiting for the schema")
	}
}
