package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"tidings/api"
	"tidings/internal/apikeys"
	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/auth"
	"tidings/internal/config"
	"tidings/internal/keycache"
	"tidings/internal/ratelimit"
	"tidings/internal/tenants"
	"tidings/internal/testenv"
)

// BenchmarkAuthenticatedGET serves GET /api/api-keys in process (the fiber
// handler called on a fasthttp.RequestCtx, no sockets) through the real app
// and through the bare baseline, so a CPU profile shows what the
// middleware costs beside the handler they share. The api runs as bin/api
// does under make bench-http: a live key cache, a limiter that never
// refuses, the JSON request log written to a file at the level named.
//
//	go test ./bench/bare -run '^$' -bench AuthenticatedGET -cpuprofile cpu.out
func BenchmarkAuthenticatedGET(b *testing.B) {
	ctx := b.Context()
	db := testenv.DB(b)
	rdb, prefix := testenv.Redis(b)
	quiet := slog.New(slog.DiscardHandler)
	if _, _, err := (&tenants.Store{DB: db}).Provision(ctx, "org_bench", "Bench"); err != nil {
		b.Fatal(err)
	}
	var raw string
	for _, name := range []string{"k1", "k2", "k3"} {
		k, err := (&apikeys.Store{DB: db, Log: quiet}).Create(ctx, "org_bench", name)
		if err != nil {
			b.Fatal(err)
		}
		raw = k.Raw
	}

	realApp := func(b *testing.B, level slog.Level) *fiber.App {
		f, err := os.Create(filepath.Join(b.TempDir(), "api.log"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = f.Close() })
		// As config.NewLogger builds it, on a file rather than stderr.
		out := config.NewLogOutput(f, config.LogFlushEvery)
		b.Cleanup(out.Flush)
		log := slog.New(out.Handler(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level}))).With("service", "api")
		cache := keycache.New(apikeys.Loader(db), rdb, prefix+"apikeys:evict", 5*time.Second, quiet)
		runCache(b, cache)
		svc := apptest.Services(b, app.Infra{DB: db, Redis: rdb, RedisPrefix: prefix, Keys: cache, Log: log})
		a, err := api.New(api.Deps{Services: svc, Limiter: ratelimit.New(rdb, 100_000_000, prefix),
			Sessions: auth.NewSessionVerifier("secret", "", "")})
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	for _, tc := range []struct {
		name string
		app  func(b *testing.B) *fiber.App
		key  string
	}{
		{"bare", func(*testing.B) *fiber.App { return newApp(&apikeys.Store{DB: db}, "org_bench") }, ""},
		{"api-warn", func(b *testing.B) *fiber.App { return realApp(b, slog.LevelWarn) }, raw},
		{"api-info", func(b *testing.B) *fiber.App { return realApp(b, slog.LevelInfo) }, raw},
	} {
		b.Run(tc.name, func(b *testing.B) {
			serve(b, tc.app(b).Handler(), tc.key)
		})
	}
}

// serve calls h with GET /api/api-keys from parallel callers and fails on
// any answer but 200.
func serve(b *testing.B, h fasthttp.RequestHandler, key string) {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetRequestURI("/api/api-keys")
	if key != "" {
		req.Header.Set(fasthttp.HeaderAuthorization, "Bearer "+key)
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
	b.ReportAllocs()
	// 16 callers on 2 cores, as make bench-http runs 16 workers.
	b.SetParallelism(8)
	cpu := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var fc fasthttp.RequestCtx
		fc.Init(&req, addr, nil)
		for pb.Next() {
			fc.Response.Reset()
			h(&fc)
			if s := fc.Response.StatusCode(); s != 200 {
				b.Fatalf("status %d: %s", s, fc.Response.Body())
			}
		}
	})
	// This process's CPU time per request (PostgreSQL's and Redis's are
	// not in it): steadier than wall time on a shared machine.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runCache runs the key cache until the benchmark ends and waits until it
// is subscribed, so lookups are served from memory as in bin/api.
func runCache(b *testing.B, c *keycache.Cache) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); !c.Live(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("API key cache never subscribed")
		}
	}
}
