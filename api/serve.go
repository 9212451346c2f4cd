package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/redis/go-redis/v9"

	"tidings/internal/ratelimit"
	"tidings/internal/telemetry"
)

// Serve answers on ln until ctx ends (SIGTERM in cmd/api), then stops taking
// connections and lets the requests in flight finish, for at most drain.
func Serve(ctx context.Context, app *fiber.App, ln net.Listener, drain time.Duration, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- app.Listener(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests")
	if err := app.ShutdownWithTimeout(drain); err != nil {
		return err
	}
	log.Info("api stopped cleanly")
	return nil
}

// AdminHandler serves the api's admin listener (API_ADMIN_ADDR, loopback
// by default): Prometheus metrics at /metrics and a liveness check at
// /healthz, for operators, off the public port (ADDENDUM 25).
func AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", telemetry.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	return mux
}

// ServeAdmin answers AdminHandler on ln until ctx ends.
func ServeAdmin(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// publicMetrics is /metrics on the public port: served to the bearer of
// METRICS_TOKEN only. To anyone else, and to everyone when no token is
// set, it is a route that does not exist (404): the port does not even
// tell that metrics are there.
func (s *Server) publicMetrics() fiber.Handler {
	serve := adaptor.HTTPHandler(telemetry.Handler())
	want := []byte(s.cfg.MetricsToken)
	return func(c *fiber.Ctx) error {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(c.Get(fiber.HeaderAuthorization)), " ")
		if len(want) == 0 || !strings.EqualFold(scheme, "Bearer") ||
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), want) != 1 {
			return fiber.ErrNotFound
		}
		return serve(c)
	}
}

// UnauthLimiter is the limiter of requests without a valid credential: n
// per period per client address, in its own keys beside the tenants'
// buckets. Every request goes to Redis (no lease): leases are kept per key
// in memory, and the keys here are as many as the addresses that try.
func UnauthLimiter(rdb redis.UniversalClient, n int, period time.Duration, prefix string) *ratelimit.Limiter {
	return ratelimit.NewPer(rdb, n, period, prefix+"unauth:", ratelimit.WithLease(1, 0))
}
