// Package api is the HTTP face of Tidings: the fiber app, its middleware and
// thin handlers that parse, validate, call the domain or store, and render.
package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"
	"github.com/redis/go-redis/v9"

	"tidings/auth"
	"tidings/config"
	"tidings/keycache"
	"tidings/ratelimit"
	"tidings/store"
)

const bodyLimit = 1 << 20

// Deps are what the API needs from the outside world.
type Deps struct {
	Config   *config.Config
	DB       *store.DB
	Redis    redis.UniversalClient
	Limiter  *ratelimit.Limiter
	Sessions *auth.SessionVerifier
	// Keys resolves API keys (see KeyLoader); it caches while its Run runs.
	Keys *keycache.Cache
	Log  *slog.Logger
}

// Server holds the dependencies shared by the handlers.
type Server struct {
	cfg      *config.Config
	db       *store.DB
	rdb      redis.UniversalClient
	limiter  *ratelimit.Limiter
	sessions *auth.SessionVerifier
	log      *slog.Logger
	keys     *keycache.Cache
}

// New builds the fiber app with the whole route table.
func New(d Deps) *fiber.App {
	if d.Keys == nil {
		// Without the shared cache a revocation could not reach the other
		// instances' caches: refuse to start rather than run unsafely.
		panic("api.New: Deps.Keys is required")
	}
	s := &Server{cfg: d.Config, db: d.DB, rdb: d.Redis, limiter: d.Limiter, sessions: d.Sessions,
		log: d.Log, keys: d.Keys}
	app := fiber.New(s.fiberConfig())
	app.Use(requestid.New())
	app.Use(s.logRequests)
	app.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: logPanic(s.log)}))
	app.Use(withTimeout(30 * time.Second))

	app.Get("/healthz", s.healthz)
	app.Get("/readyz", s.readyz)

	// Authentication runs per route rather than as prefix middleware, so an
	// unknown route is a plain 404 whatever credential came with it.
	provisioning := routes{app.Group("/api"), []fiber.Handler{s.authenticate, s.rateLimit}}
	r := provisioning.with(s.requireTenant)

	provisioning.post("/tenant", s.tenantCreate)
	r.get("/tenant", s.tenantGet)
	r.patch("/tenant", s.tenantUpdate)
	r.get("/tenant/sandbox-whitelist", s.whitelistGet)
	r.post("/tenant/sandbox-whitelist", s.whitelistAdd)
	r.delete("/tenant/sandbox-whitelist/:email", s.whitelistRemove)

	r.post("/api-keys", s.apiKeyCreate)
	r.get("/api-keys", s.apiKeyList)
	r.delete("/api-keys/:keyId", s.apiKeyRevoke)

	return app
}

// fiberConfig is the app configuration, shared with NewBare so the baseline
// differs from the real app only by its middleware.
func (s *Server) fiberConfig() fiber.Config {
	return fiber.Config{
		ErrorHandler:          s.errorHandler,
		BodyLimit:             bodyLimit,
		DisableStartupMessage: true,
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           120 * time.Second,
		JSONEncoder:           json.Marshal,
		JSONDecoder:           json.Unmarshal,
	}
}

// routes registers handlers behind a fixed middleware chain.
type routes struct {
	g  fiber.Router
	mw []fiber.Handler
}

func (r routes) with(mw ...fiber.Handler) routes {
	return routes{g: r.g, mw: append(append([]fiber.Handler{}, r.mw...), mw...)}
}

func (r routes) chain(h fiber.Handler) []fiber.Handler {
	return append(append([]fiber.Handler{}, r.mw...), h)
}

func (r routes) get(p string, h fiber.Handler)    { r.g.Get(p, r.chain(h)...) }
func (r routes) post(p string, h fiber.Handler)   { r.g.Post(p, r.chain(h)...) }
func (r routes) put(p string, h fiber.Handler)    { r.g.Put(p, r.chain(h)...) }
func (r routes) patch(p string, h fiber.Handler)  { r.g.Patch(p, r.chain(h)...) }
func (r routes) delete(p string, h fiber.Handler) { r.g.Delete(p, r.chain(h)...) }

// withTimeout gives every handler a context deadline so a slow database
// cannot hold a request forever.
func withTimeout(d time.Duration) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		c.SetUserContext(ctx)
		return c.Next()
	}
}

func (s *Server) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// readyz reports whether Postgres and Redis answer.
func (s *Server) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	checks := fiber.Map{"postgres": "ok", "redis": "ok"}
	status := fiber.StatusOK
	if err := s.db.Pool.Ping(ctx); err != nil {
		checks["postgres"] = "unreachable"
		status = fiber.StatusServiceUnavailable
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		checks["redis"] = "unreachable"
		status = fiber.StatusServiceUnavailable
	}
	state := "ready"
	if status != fiber.StatusOK {
		state = "unavailable"
	}
	return c.Status(status).JSON(fiber.Map{"status": state, "checks": checks})
}
