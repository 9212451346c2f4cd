// Package api is the HTTP face of Tidings: the fiber app, its middleware and
// thin handlers that parse, validate, call the domain or store, and render.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/gofiber/fiber/v2/middleware/requestid"
	"github.com/redis/go-redis/v9"

	"tidings/internal/apikeys"
	"tidings/internal/app"
	"tidings/internal/audit"
	"tidings/internal/auth"
	"tidings/internal/broadcasts"
	"tidings/internal/campaigns"
	"tidings/internal/config"
	"tidings/internal/contacts"
	"tidings/internal/delivery"
	"tidings/internal/domains"
	"tidings/internal/events"
	"tidings/internal/idempotency"
	"tidings/internal/keycache"
	"tidings/internal/metrics"
	"tidings/internal/outbound"
	"tidings/internal/page"
	"tidings/internal/ratelimit"
	"tidings/internal/retention"
	"tidings/internal/segments"
	"tidings/internal/sendgridevents"
	"tidings/internal/sequences"
	"tidings/internal/sequences/engine"
	"tidings/internal/sesevents"
	"tidings/internal/store"
	"tidings/internal/templates"
	"tidings/internal/tenants"
	"tidings/internal/topics"
	"tidings/internal/tracking"
)

// bodyLimit is the largest body of every route but the import.
const bodyLimit = 1 << 20

// streamPrefetch is how much of a body fasthttp reads before the handler
// when bodies are streamed (it waits for min(this, 8 KiB, the length), and
// for one byte more when the length is larger): as little as it allows, so
// that readBody judges a declared length once the client has sent two
// bytes of the body, much as fasthttp did when it enforced BodyLimit
// itself (from the header alone).
const streamPrefetch = 1

// Deps are what the API needs: the services (app.New) and what only the
// HTTP face has.
type Deps struct {
	Services *app.Services
	Limiter  *ratelimit.Limiter
	Sessions *auth.SessionVerifier
	// WebhookKey verifies SendGrid's signed Event Webhook; nil (no
	// SENDGRID_WEBHOOK_PUBLIC_KEY) refuses every webhook with 403.
	WebhookKey *sendgridevents.Verifier
	// SNS verifies SES's SNS notifications (POST /webhooks/ses); nil
	// refuses them all (403).
	SNS *sesevents.Verifier
	// BaseContext is the parent of every request's context: the process
	// cancels it once it gives up draining, which stops what requests
	// still run. nil: context.Background().
	BaseContext context.Context
	// UnauthLimiter limits the requests under /api without a valid
	// credential, keyed by client address (clientKey); nil: no limit.
	UnauthLimiter *ratelimit.Limiter
	// noAudit leaves the audit entries out: only the benchmark of what
	// they cost sets it (BenchmarkAuditWriteOverhead), from inside the
	// package.
	noAudit bool
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
	tenants  *tenants.Store
	apiKeys  *apikeys.Store
	contacts *contacts.Store
	// imports stages contact imports and reads their progress.
	imports *contacts.Imports
	// ingest records POST /api/events by group commit (events.Ingest).
	ingest *events.Ingest
	feed   *events.Feed
	// archives reads the events archived past the tenant's retention.
	archives *retention.Archives
	// topics keeps the tenant's topics and suppressions its suppression
	// list (consent, ADDENDUM 16).
	topics       *topics.Store
	suppressions *contacts.Suppressions
	segments     *segments.Store
	campaigns    *campaigns.Store
	// outbound keeps the tenant's webhook endpoints.
	outbound *outbound.Store
	// broadcasts keeps broadcasts and moves their status.
	broadcasts *broadcasts.Store
	templates  *templates.Store
	sequences  *sequences.Store
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
	// sns verifies SES's SNS notifications; nil refuses them.
	sns *sesevents.Verifier
	// unauthLimiter is Deps.UnauthLimiter.
	unauthLimiter *ratelimit.Limiter
	// audit reads the audit log.
	audit *audit.Store
	// noAudit is Deps.noAudit.
	noAudit bool
	// base is the parent of every request's context (Deps.BaseContext).
	base context.Context
}

// New builds the fiber app with the whole route table.
func New(d Deps) (*fiber.App, error) {
	v := d.Services
	if v == nil || d.Limiter == nil || d.Sessions == nil {
		return nil, errors.New("api.New: Services, Limiter and Sessions are required")
	}
	s := &Server{cfg: v.Config, pages: v.Pages, db: v.DB, rdb: v.Redis, limiter: d.Limiter, sessions: d.Sessions,
		log: v.Log, keys: v.Keys, tenants: v.Tenants, apiKeys: v.APIKeys, contacts: v.Contacts,
		ingest: v.Ingest, feed: v.Feed, segments: v.Segments, campaigns: v.Campaigns, templates: v.Templates, sequences: v.Sequences,
		enrolments: v.Enrolments, renderer: v.TemplateRenderer, sender: v.Sender, sends: v.Sends, metrics: v.Metrics,
		idempotency: v.Idempotency, domains: v.Domains, tracking: v.Tracking, outcomes: v.Outcomes,
		webhooks: v.Webhooks, webhookKey: d.WebhookKey, sns: d.SNS, broadcasts: v.Broadcasts, outbound: v.Outbound,
		archives: v.Archives, topics: v.Topics, suppressions: v.Suppressions, imports: v.Imports, audit: v.Audit, noAudit: d.noAudit}
	if d.WebhookKey == nil {
		s.log.Warn("SENDGRID_WEBHOOK_PUBLIC_KEY is not set: POST /webhooks/sendgrid refuses every request (403)")
	}
	docs, err := newDocsSite()
	if err != nil {
		return nil, err
	}
	app := fiber.New(FiberConfig(s.errorHandler))
	app.Use(requestid.New())
	app.Use(s.logRequests)
	app.Use(closeUnread)
	app.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: logPanic(s.log)}))
	s.base = d.BaseContext
	s.unauthLimiter = d.UnauthLimiter
	if s.base == nil {
		s.base = context.Background()
	}
	app.Use(withTimeout(s.base, 30*time.Second))

	app.Get("/healthz", Healthz)
	app.Get("/readyz", s.readyz)
	// Prometheus metrics are on the admin listener (AdminHandler); here
	// only to METRICS_TOKEN.
	app.Get("/metrics", s.publicMetrics())
	// The OpenAPI document of this route table, without credentials.
	app.Get("/api/openapi.json", openAPIDocument(app))

	// Outside /api, without credentials or the per-tenant rate limit: the
	// signed token, or SendGrid's signature, is the credential.
	app.Get("/t/o/:token", s.trackOpen)
	app.Get("/t/c/:token", s.trackClick)
	app.Get("/t/u/:token", s.unsubscribePage)
	app.Post("/t/u/:token", readBody, s.unsubscribe)
	app.Post("/webhooks/sendgrid", readBody, s.sendgridWebhook)
	app.Post("/webhooks/ses", readBody, s.sesWebhook)

	// The API reference (api/docs.go), like /healthz without credentials
	// or rate limit: the page rendering /api/openapi.json, and the files
	// it loads.
	app.Get("/docs", docs.pageHandler)
	app.Get("/docs/assets/:file", docs.assetHandler)

	// Authentication runs per route rather than as prefix middleware, so an
	// unknown route is a plain 404 whatever credential came with it.
	provisioning := routes{s: s, g: app.Group("/api"), mw: []fiber.Handler{s.authenticate, s.rateLimit, checkQuery}}
	// Every other write under /api honours Idempotency-Key (ADDENDUM
	// 18); provisioning is idempotent by itself.
	r := provisioning.with(s.requireTenant)
	r.writes = []fiber.Handler{s.idempotentWrite()}

	provisioning.with(sessionOnly).post("/tenant", onTenant("create"), s.tenantCreate)
	r.get("/tenant", s.tenantGet)
	r.patch("/tenant", onTenant("update"), s.tenantUpdate)
	r.get("/tenant/sandbox-whitelist", s.whitelistGet)
	r.post("/tenant/sandbox-whitelist", makes("sandboxWhitelist", "add"), s.whitelistAdd)
	r.delete("/tenant/sandbox-whitelist/:email", on("sandboxWhitelist", "remove", "email"), s.whitelistRemove)

	r.with(sessionOnly).post("/api-keys", makes("apiKey", "create"), s.apiKeyCreate)
	r.get("/api-keys", s.apiKeyList)
	r.with(sessionOnly).delete("/api-keys/:keyId", on("apiKey", "revoke", "keyId"), s.apiKeyRevoke)

	r.post("/contacts", makes("contact", "create"), s.contactCreate)
	r.put("/contacts", makes("contact", "upsert"), s.contactUpsert)
	r.streamed().post("/contacts/import", makes("contactImport", "create"), s.contactImport)
	r.get("/contacts/import/:id", s.contactImportGet)
	r.get("/contacts/import/:id/errors", s.contactImportErrors)
	r.get("/contacts", s.contactList)
	r.get("/contacts/stats", s.contactStats)
	r.get("/contacts/:id", s.contactGet)
	r.patch("/contacts/:id", on("contact", "update", "id"), s.contactUpdate)
	r.delete("/contacts/:id", on("contact", "delete", "id"), s.contactDelete)
	r.get("/contacts/:id/sends", s.contactSends)
	r.get("/contacts/:id/scheduled", s.contactScheduled)
	r.get("/contacts/:id/sequences", s.contactSequences)
	r.get("/contacts/:id/segments", s.contactSegments)
	r.get("/contacts/:id/timeline", s.contactTimeline)

	r.ownWrites().with(s.idempotent("send")).post("/send", makes("send", "create"), s.send)
	r.post("/send/batch", makes("send", "create"), s.sendBatch)
	r.get("/sends", s.sendList)
	r.get("/sends/:sendId", s.sendGet)

	r.post("/events", makes("event", "create"), s.eventCreate)
	r.get("/events", s.eventList)
	r.get("/events/contacts/:id", s.eventListByContact)
	r.get("/events/archive", s.archiveList)
	r.get("/events/archive/:month", s.archiveGet)

	// Sequence enrolments and runs (the sequence engine).
	r.post("/sequences/:id/contacts", on("sequence", "enrol", "id"), s.enrol)
	r.get("/sequences/:id/contacts", s.enrolled)
	r.delete("/sequences/:id/contacts/:contactId", on("sequence", "unenrol", "id"), s.unenrol)
	r.get("/sequences/:id/status", s.sequenceStatus)
	r.get("/sequences/:id/experiment", s.sequenceExperiment)
	r.post("/sequences/:id/dry-run", on("sequence", "dryRun", "id").changingNothing(), s.dryRun)

	r.get("/scheduled", s.scheduledList)
	r.get("/scheduled/:id", s.scheduledGet)

	r.put("/templates/:id", on("template", "put", "id"), s.templatePut)
	r.get("/templates", s.templateList)
	r.get("/templates/:id", s.templateGet)
	r.delete("/templates/:id", on("template", "delete", "id"), s.templateDelete)
	r.get("/templates/:id/versions", s.templateVersions)
	r.post("/templates/:id/preview", on("template", "preview", "id").changingNothing(), s.templatePreview)
	r.put("/templates/:id/locales/:locale", on("template", "putLocale", "id"), s.localePut)
	r.get("/templates/:id/locales", s.localeList)
	r.get("/templates/:id/locales/:locale", s.localeGet)
	r.delete("/templates/:id/locales/:locale", on("template", "deleteLocale", "id"), s.localeDelete)

	r.put("/partials/:id", on("partial", "put", "id"), s.partialPut)
	r.get("/partials", s.partialList)
	r.get("/partials/:id", s.partialGet)
	r.delete("/partials/:id", on("partial", "delete", "id"), s.partialDelete)

	r.put("/sequences/:id", on("sequence", "put", "id"), s.sequencePut)
	r.get("/sequences", s.sequenceList)
	r.get("/sequences/:id", s.sequenceGet)
	r.patch("/sequences/:id", on("sequence", "update", "id"), s.sequencePatch)
	r.delete("/sequences/:id", on("sequence", "delete", "id"), s.sequenceDelete)
	r.get("/sequences/:id/sends", s.sequenceSends)

	r.post("/segments", makes("segment", "create"), s.segmentCreate)
	r.get("/segments", s.segmentList)
	r.get("/segments/:id", s.segmentGet)
	r.patch("/segments/:id", on("segment", "update", "id"), s.segmentUpdate)
	r.delete("/segments/:id", on("segment", "delete", "id"), s.segmentDelete)
	r.get("/segments/:id/members", s.segmentMembers)
	r.get("/segments/:id/explain", s.segmentExplain)
	r.post("/segments/:id/compute", on("segment", "compute", "id"), s.segmentCompute)

	r.post("/campaigns", makes("campaign", "create"), s.campaignCreate)
	r.get("/campaigns", s.campaignList)
	r.get("/campaigns/:campaignId", s.campaignGet)
	r.patch("/campaigns/:campaignId", on("campaign", "update", "campaignId"), s.campaignUpdate)
	r.delete("/campaigns/:campaignId", on("campaign", "delete", "campaignId"), s.campaignDelete)
	r.post("/campaigns/:campaignId/sequences/:ref", on("campaign", "addSequence", "campaignId"), campaignAssoc(s.campaigns.AddSequence))
	r.delete("/campaigns/:campaignId/sequences/:ref", on("campaign", "removeSequence", "campaignId"), campaignAssoc(s.campaigns.RemoveSequence))
	r.post("/campaigns/:campaignId/templates/:ref", on("campaign", "addTemplate", "campaignId"), campaignAssoc(s.campaigns.AddTemplate))
	r.delete("/campaigns/:campaignId/templates/:ref", on("campaign", "removeTemplate", "campaignId"), campaignAssoc(s.campaigns.RemoveTemplate))

	r.post("/broadcasts", makes("broadcast", "create"), s.broadcastCreate)
	r.get("/broadcasts", s.broadcastList)
	r.get("/broadcasts/:id", s.broadcastGet)
	r.patch("/broadcasts/:id", on("broadcast", "update", "id"), s.broadcastUpdate)
	r.delete("/broadcasts/:id", on("broadcast", "delete", "id"), s.broadcastDelete)
	r.post("/broadcasts/:id/send", on("broadcast", "send", "id"), s.broadcastSend)
	r.post("/broadcasts/:id/pause", on("broadcast", "pause", "id"), s.broadcastMove(s.broadcasts.Pause))
	r.post("/broadcasts/:id/resume", on("broadcast", "resume", "id"), s.broadcastMove(s.broadcasts.Resume))
	r.post("/broadcasts/:id/cancel", on("broadcast", "cancel", "id"), s.broadcastMove(s.broadcasts.Cancel))
	r.post("/broadcasts/:id/winner", on("broadcast", "pickWinner", "id"), s.broadcastWinner)
	r.get("/broadcasts/:id/recipients", s.broadcastRecipients)

	r.get("/suppressions", s.suppressionList)
	r.post("/suppressions", makes("suppression", "create"), s.suppressionAdd)
	r.delete("/suppressions/:email", on("suppression", "delete", "email"), s.suppressionRemove)

	r.post("/topics", makes("topic", "create"), s.topicCreate)
	r.get("/topics", s.topicList)
	r.get("/topics/:id", s.topicGet)
	r.patch("/topics/:id", on("topic", "update", "id"), s.topicUpdate)
	r.delete("/topics/:id", on("topic", "delete", "id"), s.topicDelete)

	r.post("/webhooks", makes("webhook", "create"), s.webhookCreate)
	r.get("/webhooks", s.webhookList)
	r.get("/webhooks/:id", s.webhookGet)
	r.patch("/webhooks/:id", on("webhook", "update", "id"), s.webhookUpdate)
	r.delete("/webhooks/:id", on("webhook", "delete", "id"), s.webhookDelete)
	r.post("/webhooks/:id/rotate-secret", on("webhook", "rotateSecret", "id"), s.webhookRotate)
	r.post("/webhooks/:id/test", on("webhook", "test", "id"), s.webhookTest)
	r.get("/webhooks/:id/deliveries", s.webhookDeliveries)
	r.post("/webhooks/:id/deliveries/:messageId/retry", on("webhook", "retryDelivery", "id"), s.webhookRetry)

	r.post("/domains", makes("domain", "create"), s.domainCreate)
	r.get("/domains", s.domainList)
	r.get("/domains/:domain", s.domainGet)
	r.patch("/domains/:domain", on("domain", "update", "domain"), s.domainUpdate)
	r.delete("/domains/:domain", on("domain", "delete", "domain"), s.domainDelete)
	r.post("/domains/:domain/verify", on("domain", "verify", "domain"), s.domainVerify)

	// The audit log: read only (a write to it is 404 or 405).
	r.get("/audit-log", s.auditList)

	r.get("/metrics", s.metricsGet)
	r.get("/metrics/sequences", s.metricsScopedList(metrics.ScopeSequence))
	r.get("/metrics/sequences/:id", s.metricsScoped(metrics.ScopeSequence))
	r.get("/metrics/templates", s.metricsScopedList(metrics.ScopeTemplate))
	r.get("/metrics/templates/:id", s.metricsScoped(metrics.ScopeTemplate))

	return app, nil
}

// FiberConfig is the app's configuration around its error handler. It is
// exported for the HTTP benchmark's baseline (bench/bare), which must differ
// from the app only by its middleware.
//
// Request bodies are streamed (StreamRequestBody) so that POST
// /api/contacts/import can take up to 512 MiB without holding it: fasthttp
// reads only a prefix of a body before the handler (BodyLimit, which with
// streaming is no limit) and hands over the rest as a stream. Every other
// route reads its body whole, at most bodyLimit (1 MiB), in readBody, the
// first handler of its chain.
func FiberConfig(onError fiber.ErrorHandler) fiber.Config {
	return fiber.Config{
		ErrorHandler:      onError,
		BodyLimit:         streamPrefetch,
		StreamRequestBody: true,
		// Multipart bodies would be parsed (into memory and temporary
		// files) before the handler, whatever their size: no route takes
		// them.
		DisablePreParseMultipartForm: true,
		DisableStartupMessage:        true,
		ReadTimeout:                  30 * time.Second,
		WriteTimeout:                 30 * time.Second,
		IdleTimeout:                  120 * time.Second,
		JSONEncoder:                  encodeJSON,
		JSONDecoder:                  json.Unmarshal,
	}
}

// routes registers handlers behind a fixed middleware chain; writes (POST,
// PUT, PATCH) get the writes chain too (Idempotency-Key), and every write
// (DELETE too) names its action for the audit log (act, Server.audited):
// the methods that register one take it, so none can be left out. Each
// chain starts by reading the body (readBody), unless the route streams it.
type routes struct {
	s      *Server // its audited middleware
	g      fiber.Router
	mw     []fiber.Handler
	writes []fiber.Handler
	stream bool
}

func (r routes) with(mw ...fiber.Handler) routes {
	return routes{s: r.s, g: r.g, mw: append(append([]fiber.Handler{}, r.mw...), mw...), writes: r.writes, stream: r.stream}
}

// ownWrites drops the writes chain: the route brings its own (POST
// /api/send keeps its send-aware Idempotency-Key).
func (r routes) ownWrites() routes { return routes{s: r.s, g: r.g, mw: r.mw, stream: r.stream} }

// streamed leaves the body to the handler, as a stream of any size it
// bounds itself (POST /api/contacts/import).
func (r routes) streamed() routes {
	r.stream = true
	return r
}

func (r routes) first() fiber.Handler {
	if r.stream {
		return markStreamed
	}
	return readBody
}

func (r routes) chain(h fiber.Handler) []fiber.Handler {
	return append(append([]fiber.Handler{r.first()}, r.mw...), h)
}

// writeChain is a write's chain: the writes chain (Idempotency-Key) for
// all but DELETE, then its audit entry (Server.audited), then h.
func (r routes) writeChain(a act, withWrites bool, h fiber.Handler) []fiber.Handler {
	c := append([]fiber.Handler{r.first()}, r.mw...)
	if withWrites {
		c = append(c, r.writes...)
	}
	return append(c, r.s.audited(a), h)
}

func (r routes) get(p string, h fiber.Handler)           { r.g.Get(p, r.chain(h)...) }
func (r routes) post(p string, a act, h fiber.Handler)   { r.g.Post(p, r.writeChain(a, true, h)...) }
func (r routes) put(p string, a act, h fiber.Handler)    { r.g.Put(p, r.writeChain(a, true, h)...) }
func (r routes) patch(p string, a act, h fiber.Handler)  { r.g.Patch(p, r.writeChain(a, true, h)...) }
func (r routes) delete(p string, a act, h fiber.Handler) { r.g.Delete(p, r.writeChain(a, false, h)...) }

// withTimeout gives every handler a context, derived from the server's
// base, with a deadline so a slow database cannot hold a request forever.
func withTimeout(base context.Context, d time.Duration) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx, cancel := context.WithTimeout(base, d)
		defer cancel()
		c.SetUserContext(ctx)
		return c.Next()
	}
}

// Healthz answers that the process is alive. It is exported for the HTTP
// benchmark's baseline (bench/bare).
func Healthz(c *fiber.Ctx) error {
	return c.JSON(healthJSON{Status: "ok"})
}

type healthJSON struct {
	Status string `json:"status"`
}

type readyJSON struct {
	Status string `json:"status" doc:"ready or unavailable"`
	Checks struct {
		Postgres string `json:"postgres" doc:"ok or unreachable"`
		Redis    string `json:"redis" doc:"ok or unreachable"`
	} `json:"checks"`
}

// readyz reports whether Postgres and Redis answer.
func (s *Server) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	v := readyJSON{Status: "ready"}
	v.Checks.Postgres, v.Checks.Redis = "ok", "ok"
	status := fiber.StatusOK
	if err := s.db.Pool.Ping(ctx); err != nil {
		v.Checks.Postgres = "unreachable"
		status = fiber.StatusServiceUnavailable
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		v.Checks.Redis = "unreachable"
		status = fiber.StatusServiceUnavailable
	}
	if status != fiber.StatusOK {
		v.Status = "unavailable"
	}
	return c.Status(status).JSON(v)
}
