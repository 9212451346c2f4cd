package api

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/requestid"
	"github.com/valyala/fasthttp"

	"tidings/internal/config"
)

// BenchmarkRequestLog is the request log's cost per request: an app of the
// request id, the log and a handler that answers a small JSON body for a
// tenant, against the same app without the log (none); with the JSON log
// written to a file at info, a write per line (unbatched) or batched as
// config.NewLogger writes (info); and at warn (no line).
//
//	go test ./api -run '^$' -bench RequestLog -benchmem
func BenchmarkRequestLog(b *testing.B) {
	for _, tc := range []struct {
		name    string
		level   slog.Level
		log     bool
		batched bool
	}{
		{"none", 0, false, false},
		{"unbatched", slog.LevelInfo, true, false},
		{"info", slog.LevelInfo, true, true},
		{"warn", slog.LevelWarn, true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "api.log"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var lh slog.Handler = slog.NewJSONHandler(f, &slog.HandlerOptions{Level: tc.level})
			if tc.batched {
				out := config.NewLogOutput(f, config.LogFlushEvery)
				defer out.Flush()
				lh = out.Handler(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: tc.level}))
			}
			s := &Server{log: slog.New(lh).With("service", "api")}
			app := fiber.New(FiberConfig(s.errorHandler))
			app.Use(requestid.New())
			if tc.log {
				app.Use(s.logRequests)
			}
			app.Get("/api/things/:id", func(c *fiber.Ctx) error {
				c.Locals(principalKey, &Principal{TenantID: "org_bench", KeyID: "key_1"})
				return c.JSON(fiber.Map{"ok": true})
			})
			h := app.Handler()
			var req fasthttp.Request
			req.Header.SetMethod(fasthttp.MethodGet)
			req.SetRequestURI("/api/things/thg_123")
			var fc fasthttp.RequestCtx
			fc.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				fc.Response.Reset()
				h(&fc)
				if s := fc.Response.StatusCode(); s != 200 {
					b.Fatalf("status %d", s)
				}
			}
			// CPU time rather than wall time per request: other processes
			// on a shared machine stretch the second, not the first.
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
