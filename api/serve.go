package api

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"
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
