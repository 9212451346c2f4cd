package api

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"tidings/internal/app"
	"tidings/internal/ratelimit"
)

// SIGTERM (ctx ending) lets a request in flight finish and then stops.
func TestServeDrainsInFlightRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan struct{})
	b.app.Get("/slow", func(c *fiber.Ctx) error {
		close(started)
		time.Sleep(300 * time.Millisecond)
		return c.SendString("done")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, b.app, ln, 5*time.Second, slog.New(slog.DiscardHandler)) }()

	type answer struct {
		status int
		body   string
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := http.Get("http://" + ln.Addr().String() + "/slow")
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		got <- answer{status: res.StatusCode, body: string(body)}
	}()
	<-started
	stop()
	if a := <-got; a.err != nil || a.status != 200 || a.body != "done" {
		t.Fatalf("in-flight request: %+v", a)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Fatal("still answering after shutdown")
	}
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if r := b.expect("GET", "/readyz", "", nil, 200); r.body["status"] != "ready" {
		t.Fatalf("%s", r.raw)
	}
	// The same app with a Redis that does not answer is not ready.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { dead.Close() })
	app := newApp(t, app.Infra{Config: b.cfg, DB: b.db, Redis: dead, RedisPrefix: b.prefix,
		Keys: runKeyCache(t, b.db, b.rdb, b.prefix, time.Second)}, Deps{Limiter: ratelimit.New(b.rdb, 100, b.prefix)})
	r := (&bundle{t: t, app: app}).expect("GET", "/readyz", "", nil, 503)
	if checks := r.body["checks"].(map[string]any); checks["postgres"] != "ok" || checks["redis"] != "unreachable" {
		t.Fatalf("%s", r.raw)
	}
}

// The admin listener serves /metrics and /healthz without a credential
// until its context ends.
func TestServeAdmin(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeAdmin(ctx, ln) }()
	for _, path := range []string{"/metrics", "/healthz"} {
		res, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
