// Command bare serves the baseline of the HTTP benchmark (docs/benchmarks.md):
// the API's fiber configuration, domain call and rendering for GET
// /api/api-keys and GET /healthz, without any middleware (no request id,
// request log, recover, deadline, authentication or rate limit), for one
// fixed tenant. It is built by bench/run-auth.sh only, never shipped.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gofiber/fiber/v2"

	"tidings/api"
	"tidings/internal/apikeys"
	"tidings/internal/config"
	"tidings/internal/store"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	tenant := flag.String("tenant", "", "tenant whose API keys GET /api/api-keys lists")
	flag.Parse()
	log, flush, err := config.NewLogger("bare")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare:", err)
		os.Exit(1)
	}
	if err := run(log, *addr, *tenant); err != nil {
		log.Error("bare stopped", "err", err) // an error line is written at once
		os.Exit(1)
	}
	flush()
}

func run(log *slog.Logger, addr, tenant string) error {
	if tenant == "" {
		return fmt.Errorf("-tenant is required")
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	app := newApp(&apikeys.Store{DB: db}, tenant)
	errc := make(chan error, 1)
	go func() { errc <- app.Listen(addr) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return app.Shutdown()
	}
}

// newApp answers as the API does: GET /api/api-keys lists the keys of the
// fixed tenant through the same domain call and rendering as the real
// route, and GET /healthz is the API's own handler.
func newApp(keys *apikeys.Store, tenant string) *fiber.App {
	app := fiber.New(api.FiberConfig(nil))
	app.Get("/healthz", api.Healthz)
	app.Get("/api/api-keys", func(c *fiber.Ctx) error {
		rows, err := keys.List(c.UserContext(), tenant)
		if err != nil {
			return err
		}
		return api.RenderAPIKeys(c, rows)
	})
	return app
}
