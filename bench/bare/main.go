// Command bare serves the baseline of the HTTP benchmark: api.NewBare, the
// API's own GET /api/api-keys and GET /healthz handlers without middleware,
// for one fixed tenant. It is built by bench/run-auth.sh only, never shipped.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"tidings/api"
	"tidings/internal/config"
	"tidings/internal/store"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	tenant := flag.String("tenant", "", "tenant whose API keys GET /api/api-keys lists")
	flag.Parse()
	log, err := config.NewLogger("bare")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bare:", err)
		os.Exit(1)
	}
	if err := run(log, *addr, *tenant); err != nil {
		log.Error("bare stopped", "err", err)
		os.Exit(1)
	}
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
	app := api.NewBare(db, tenant, log)
	errc := make(chan error, 1)
	go func() { errc <- app.Listen(addr) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return app.Shutdown()
	}
}
