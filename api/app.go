// Package api is the HTTP face of Tidings: the fiber app, its middleware and
// thin handlers that parse, validate, call the domain or store, and render.
package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"tidings/internal/apikeys"
	"tidings/internal/auth"
	"tidings/internal/campaigns"
	"tidings/internal/config"
	"tidings/internal/contacts"
	"tidings/internal/delivery"
	"tidings/internal/domains"
	"tidings/internal/events"
	"tidings/internal/idempotency"
	"tidings/internal/keycache"
	"tidings/internal/metrics"
	"tidings/internal/page"
	"tidings/internal/provider"
	"tidings/internal/ratelimit"
	"tidings/internal/render"
	"tidings/internal/segments"
	"tidings/internal/sendgridevents"
	"tidings/internal/sequences"
	"tidings/internal/sequences/engine"
	"tidings/internal/store"
	"tidings/internal/telemetry"
	"tidings/internal/templates"
	"tidings/internal/tenants"
	"tidings/internal/tracking"
)

const bodyLimit = 1 << 20

// Deps are what the API needs from the outside world.
type Deps struct {
	Config   *config.Config
	DB       *store.DB
	Redis    redis.UniversalClient
	Limiter  *ratelimit.Limiter
	Sessions *auth.SessionVerifier
	// Keys resolves API keys (through apikeys.Loader); it caches while its
	// Run runs.
	Keys *keycache.Cache
	Log  *slog.Logger
	// RedisPrefix namespaces the API's own Redis keys (tests give each
	// test its own).
	RedisPrefix string
	// MJML compiles template content at PUT (the node pool).
	MJML render.Compiler
	// Renderer renders template versions per recipient; shared so each
	// version is parsed once per process.
	Renderer *render.Renderer
	// Provider hands messages to the email provider (EMAIL_PROVIDER).
	Provider provider.Provider
	// DNS answers domain checks (POST /api/domains/{domain}/verify); nil
	// means a domains.Checker asking Config.DNSResolver (empty: the system
	// resolver of /etc/resolv.conf).
	DNS domains.Resolver
	// WebhookKey verifies SendGrid's signed Event Webhook; nil (no
	// SENDGRID_WEBHOOK_PUBLIC_KEY) refuses every webhook with 403.
	WebhookKey *sendgridevents.Verifier
	// Queue enqueues background tasks (webhook batches); nil leaves stored
	// batches to the worker's sweep.
	Queue *asynq.Client
}

// Server holds the dependencies shared by the handlers.
type Server struct {
	cfg       *config.Config
	db        *store.DB
	rdb       redis.UniversalClient
	limiter   *ratelimit.Limiter
	sessions  *auth.SessionVerifier
	log       *slog.Logger
	keys      *keycache.Cache
	tenants   *tenants.Store
	apiKeys   *apikeys.Store
	contacts  *contacts.Store
	events    *events.Recorder
	feed      *events.Feed
	segments  *segments.Store
	campaigns *campaigns.Store
	templates *templates.Store
	sequences *sequences.Store
	// enrolments is the engine's face for the enrolment, dry-run and
	// scheduled-send routes.
	enrolments *engine.Store
	renderer   *templates.Renderer
	sender     *delivery.Sender
	sends      *delivery.Sends
	metrics    *metrics.Store
	// idempotency keeps Idempotency-Key records (see idempotent).
	idempotency *idempotency.Store
	domains     *domains.Store
	// pages makes and reads list cursors with the configured key.
	pages page.Codec
	// Tracking and webhooks (api/tracking.go, api/webhooks.go).
	tracking   *tracking.Signer
	outcomes   *delivery.Outcomes
	webhooks   *delivery.Webhooks
	webhookKey *sendgridevents.Verifier
	queue      *asynq.Client
}

// New builds the fiber app with the whole route table.
func New(d Deps) *fiber.App {
	if d.Keys == nil {
		// Without the shared cache a revocation could not reach the other
		// instances' caches: refuse to start rather than run unsafely.
		panic("api.New: Deps.Keys is required")
	}
	pages, err := page.NewCodec(d.Config.CursorKey())
	if err != nil {
		panic("api.New: " + err.Error())
	}
	s := &Server{cfg: d.Config, pages: pages, db: d.DB, rdb: d.Redis, limiter: d.Limiter, sessions: d.Sessions,
		log: d.Log, keys: d.Keys,
		tenants:  &tenants.Store{DB: d.DB, ProviderConnected: d.Config.ProviderConnected()},
		apiKeys:  &apikeys.Store{DB: d.DB, Cache: d.Keys, Log: d.Log},
		contacts: &contacts.Store{DB: d.DB, FreeLimit: d.Config.PlanFreeContacts},
		events:   &events.Recorder{DB: d.DB, Hooks: []events.Hook{engine.Hook}},
		feed:     &events.Feed{DB: d.DB},
		segments: &segments.Store{DB: d.DB, Throttle: &segments.Throttle{Redis: d.Redis, Prefix: d.RedisPrefix,
			Every: d.Config.SegmentComputeEvery, Log: d.Log}},
		campaigns: &campaigns.Store{DB: d.DB},
		templates: &templates.Store{DB: d.DB, Compiler: templates.Prepare{MJML: d.MJML},
			FreeLimit: d.Config.PlanFreeTemplates},
		// The engine follows the definitions: disabling pauses enrolments,
		// enabling releases held sends, deleting cancels pending ones.
		sequences: &sequences.Store{DB: d.DB, FreeLimit: d.Config.PlanFreeSequences,
			OnEnabled: engine.SetEnabled, OnDelete: engine.CancelSequence},
		renderer:    &templates.Renderer{DB: d.DB, R: d.Renderer},
		sends:       &delivery.Sends{DB: d.DB},
		metrics:     &metrics.Store{DB: d.DB},
		idempotency: &idempotency.Store{DB: d.DB}}
	signer, err := tracking.NewSigner(d.Config.TrackingSecret)
	if err != nil {
		panic("api.New: " + err.Error()) // config.Load always sets a secret
	}
	s.domains = domainStore(d)
	s.enrolments = &engine.Store{DB: d.DB, Templates: s.renderer, BaseURL: d.Config.PublicBaseURL}
	s.tracking, s.webhookKey, s.queue = signer, d.WebhookKey, d.Queue
	s.outcomes = &delivery.Outcomes{DB: d.DB, Events: s.events}
	s.webhooks = &delivery.Webhooks{DB: d.DB, Outcomes: s.outcomes}
	if d.WebhookKey == nil {
		s.log.Warn("SENDGRID_WEBHOOK_PUBLIC_KEY is not set: POST /webhooks/sendgrid refuses every request (403)")
	}
	s.sender = &delivery.Sender{DB: d.DB, Templates: s.renderer, Domains: s.domains,
		Provider: d.Provider, Tracking: signer, BaseURL: d.Config.PublicBaseURL,
		SandboxFrom: d.Config.SandboxFromAddress, Events: s.events, Log: d.Log}
	app := fiber.New(FiberConfig(s.errorHandler))
	app.Use(requestid.New())
	app.Use(s.logRequests)
	app.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: logPanic(s.log)}))
	app.Use(withTimeout(30 * time.Second))

	app.Get("/healthz", Healthz)
	app.Get("/readyz", s.readyz)
	app.Get("/metrics", adaptor.HTTPHandler(telemetry.Handler()))

	// Outside /api, without credentials or the per-tenant rate limit: the
	// signed token, or SendGrid's signature, is the credential.
	app.Get("/t/o/:token", s.trackOpen)
	app.Get("/t/c/:token", s.trackClick)
	app.Get("/t/u/:token", s.unsubscribePage)
	app.Post("/t/u/:token", s.unsubscribe)
	app.Post("/webhooks/sendgrid", s.sendgridWebhook)

	// Authentication runs per route rather than as prefix middleware, so an
	// unknown route is a plain 404 whatever credential came with it.
	provisioning := routes{app.Group("/api"), []fiber.Handler{s.authenticate, s.rateLimit, checkQuery}}
	r := provisioning.with(s.requireTenant)

	provisioning.with(sessionOnly).post("/tenant", s.tenantCreate)
	r.get("/tenant", s.tenantGet)
	r.patch("/tenant", s.tenantUpdate)
	r.get("/tenant/sandbox-whitelist", s.whitelistGet)
	r.post("/tenant/sandbox-whitelist", s.whitelistAdd)
	r.delete("/tenant/sandbox-whitelist/:email", s.whitelistRemove)

	r.with(sessionOnly).post("/api-keys", s.apiKeyCreate)
	r.get("/api-keys", s.apiKeyList)
	r.with(sessionOnly).delete("/api-keys/:keyId", s.apiKeyRevoke)

	r.post("/contacts", s.contactCreate)
	r.put("/contacts", s.contactUpsert)
	r.get("/contacts", s.contactList)
	r.get("/contacts/stats", s.contactStats)
	r.get("/contacts/:id", s.contactGet)
	r.patch("/contacts/:id", s.contactUpdate)
	r.delete("/contacts/:id", s.contactDelete)
	r.get("/contacts/:id/sends", s.contactSends)
	r.get("/contacts/:id/scheduled", s.contactScheduled)
	r.get("/contacts/:id/sequences", s.contactSequences)
	r.get("/contacts/:id/segments", s.contactSegments)
	r.get("/contacts/:id/timeline", s.contactTimeline)

	r.with(s.idempotent("send")).post("/send", s.send)
	r.get("/sends", s.sendList)
	r.get("/sends/:sendId", s.sendGet)

	r.post("/events", s.eventCreate)
	r.get("/events", s.eventList)
	r.get("/events/contacts/:id", s.eventListByContact)

	// Sequence enrolments and runs (the sequence engine).
	r.post("/sequences/:id/contacts", s.enrol)
	r.get("/sequences/:id/contacts", s.enrolled)
	r.delete("/sequences/:id/contacts/:contactId", s.unenrol)
	r.get("/sequences/:id/status", s.sequenceStatus)
	r.post("/sequences/:id/dry-run", s.dryRun)

	r.get("/scheduled", s.scheduledList)
	r.get("/scheduled/:id", s.scheduledGet)

	r.put("/templates/:id", s.templatePut)
	r.get("/templates", s.templateList)
	r.get("/templates/:id", s.templateGet)
	r.delete("/templates/:id", s.templateDelete)
	r.get("/templates/:id/versions", s.templateVersions)
	r.post("/templates/:id/preview", s.templatePreview)

	r.put("/sequences/:id", s.sequencePut)
	r.get("/sequences", s.sequenceList)
	r.get("/sequences/:id", s.sequenceGet)
	r.patch("/sequences/:id", s.sequencePatch)
	r.delete("/sequences/:id", s.sequenceDelete)
	r.get("/sequences/:id/sends", s.sequenceSends)

	r.post("/segments", s.segmentCreate)
	r.get("/segments", s.segmentList)
	r.get("/segments/:id", s.segmentGet)
	r.patch("/segments/:id", s.segmentUpdate)
	r.delete("/segments/:id", s.segmentDelete)
	r.get("/segments/:id/members", s.segmentMembers)
	r.post("/segments/:id/compute", s.segmentCompute)

	r.post("/campaigns", s.campaignCreate)
	r.get("/campaigns", s.campaignList)
	r.get("/campaigns/:campaignId", s.campaignGet)
	r.patch("/campaigns/:campaignId", s.campaignUpdate)
	r.delete("/campaigns/:campaignId", s.campaignDelete)
	r.post("/campaigns/:campaignId/sequences/:ref", campaignAssoc(s.campaigns.AddSequence))
	r.delete("/campaigns/:campaignId/sequences/:ref", campaignAssoc(s.campaigns.RemoveSequence))
	r.post("/campaigns/:campaignId/templates/:ref", campaignAssoc(s.campaigns.AddTemplate))
	r.delete("/campaigns/:campaignId/templates/:ref", campaignAssoc(s.campaigns.RemoveTemplate))

	r.post("/domains", s.domainCreate)
	r.get("/domains", s.domainList)
	r.get("/domains/:domain", s.domainGet)
	r.patch("/domains/:domain", s.domainUpdate)
	r.delete("/domains/:domain", s.domainDelete)
	r.post("/domains/:domain/verify", s.domainVerify)

	r.get("/metrics", s.metricsGet)
	r.get("/metrics/sequences", s.metricsSequences)
	r.get("/metrics/sequences/:id", s.metricsSequence)
	r.get("/metrics/templates", s.metricsTemplates)
	r.get("/metrics/templates/:id", s.metricsTemplate)

	return app
}

// FiberConfig is the app's configuration around its error handler. It is
// exported for the HTTP benchmark's baseline (bench/bare), which must differ
// from the app only by its middleware.
func FiberConfig(onError fiber.ErrorHandler) fiber.Config {
	return fiber.Config{
		ErrorHandler:          onError,
		BodyLimit:             bodyLimit,
		DisableStartupMessage: true,
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           120 * time.Second,
		JSONEncoder:           encodeJSON,
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

// Healthz answers that the process is alive. It is exported for the HTTP
// benchmark's baseline (bench/bare).
func Healthz(c *fiber.Ctx) error {
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
