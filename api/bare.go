package api

import (
	"log/slog"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/store"
)

// NewBare builds the baseline of the HTTP benchmark (docs/benchmarks.md): the
// same fiber configuration, store and handler code as New, without any
// middleware (no request id, request log, recover, deadline, authentication
// or rate limit). GET /api/api-keys lists the keys of the fixed tenant
// exactly as the real route does, and GET /healthz answers the same small
// static JSON. Only bench/bare uses it; the api binary never links it.
func NewBare(db *store.DB, tenant string, log *slog.Logger) *fiber.App {
	s := &Server{db: db, log: log}
	app := fiber.New(s.fiberConfig())
	app.Get("/healthz", s.healthz)
	app.Get("/api/api-keys", func(c *fiber.Ctx) error { return s.listAPIKeys(c, tenant) })
	return app
}
