// Package app is the composition root of Tidings: it builds every store and
// service once, from the configuration, for both binaries. cmd/api and
// cmd/worker call it and differ only in what they serve; a behaviour that
// differs between the two processes lives in code that says so, not in how
// they happen to be wired (both record events with the sequence engine's
// hook, both send through one Sender).
package app

import (
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"tidings/internal/apikeys"
	"tidings/internal/audit"
	"tidings/internal/broadcasts"
	"tidings/internal/campaigns"
	"tidings/internal/config"
	"tidings/internal/contacts"
	"tidings/internal/delivery"
	"tidings/internal/domains"
	"tidings/internal/events"
	"tidings/internal/groupcommit"
	"tidings/internal/idempotency"
	"tidings/internal/keycache"
	"tidings/internal/metrics"
	"tidings/internal/outbound"
	"tidings/internal/page"
	"tidings/internal/provider"
	"tidings/internal/render"
	"tidings/internal/retention"
	"tidings/internal/segments"
	"tidings/internal/sendrate"
	"tidings/internal/sequences"
	"tidings/internal/sequences/engine"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/internal/telemetry"
	"tidings/internal/templates"
	"tidings/internal/tenants"
	"tidings/internal/throttle"
	"tidings/internal/topics"
	"tidings/internal/tracking"
)

// Infra is what the services are built on: connections and outside
// services, opened by Open (or by a test).
type Infra struct {
	Config *config.Config
	DB     *store.DB
	// ImportDB is the pool kept for contact imports' staging and
	// processing (IMPORT_DB_CONNS, DB.Share); nil: they use DB.
	ImportDB *store.DB
	Redis    redis.UniversalClient
	// RedisPrefix namespaces the services' own Redis keys (tests give each
	// test its own).
	RedisPrefix string
	// Tasks enqueues background tasks; nil leaves everything to the
	// worker's sweeps.
	Tasks    *tasks.Client
	Provider provider.Provider
	// Pool is the providers of each stream (ADDENDUM 22); nil: Provider
	// alone on both streams.
	Pool *provider.Pool
	// Renderer renders template versions per recipient; shared so each
	// version is parsed once per process.
	Renderer *render.Renderer
	// MJML compiles template content at PUT; only the api compiles.
	MJML render.Compiler
	// DNS answers domain checks; nil asks Config.DNSResolver (empty: the
	// system resolver of /etc/resolv.conf, read at each check).
	DNS domains.Resolver
	// Keys resolves API keys; nil builds a cache on the shared eviction
	// channel (its Run is the api's to start).
	Keys *keycache.Cache
	Log  *slog.Logger
}

// Services are the domain services of Tidings, each built once.
type Services struct {
	Config *config.Config
	DB     *store.DB
	Redis  redis.UniversalClient
	Tasks  *tasks.Client
	Log    *slog.Logger
	Keys   *keycache.Cache
	Pages  page.Codec

	Tenants  *tenants.Store
	APIKeys  *apikeys.Store
	Contacts *contacts.Store
	// Imports stages contact imports (api) and processes them (worker).
	Imports          *contacts.Imports
	Events           *events.Recorder
	Feed             *events.Feed
	Segments         *segments.Store
	Campaigns        *campaigns.Store
	Templates        *templates.Store
	TemplateRenderer *templates.Renderer
	Sequences        *sequences.Store
	Domains          *domains.Store
	Idempotency      *idempotency.Store
	Metrics          *metrics.Store

	Tracking *tracking.Signer
	Sender   *delivery.Sender
	Sends    *delivery.Sends
	Outcomes *delivery.Outcomes
	Webhooks *delivery.Webhooks

	// Enrolments is the engine's face for the enrolment, dry-run and
	// scheduled-send routes; Runner runs due scheduled sends; Sweeper
	// re-feeds the queue from the rows.
	Enrolments *engine.Store
	Runner     *engine.Runner
	Sweeper    *engine.Sweeper

	// Broadcasts keeps broadcasts and starts them; BroadcastDispatcher
	// sends their recipients (with the scheduled sends, in the dispatch
	// task).
	Broadcasts          *broadcasts.Store
	BroadcastDispatcher *broadcasts.Dispatcher

	// Outbound keeps the tenant's webhook endpoints; Deliverer posts their
	// deliveries (worker).
	Outbound  *outbound.Store
	Deliverer *outbound.Deliverer

	// Archiver moves events past their tenant's retention to the archive
	// (worker); Archives reads it (api).
	Archiver *retention.Archiver
	Archives *retention.Archives

	// Topics keeps the tenant's topics, Suppressions its suppression list
	// (consent).
	Topics       *topics.Store
	Suppressions *contacts.Suppressions

	// Audit reads the audit log (api) and prunes it (worker); the writes'
	// transactions write it (store.Audit).
	Audit *audit.Store

	// Ingest records POST /api/events by group commit through Events; its
	// goroutine starts with the first event, so the worker, which records
	// none, pays nothing for it. The api closes it after its HTTP drain.
	Ingest *events.Ingest
}

// ingestOptions are the group commit's bounds from the configuration
// (INGEST_*; an INGEST_BATCH_WAIT of 0 never waits).
func ingestOptions(cfg *config.Config) groupcommit.Options {
	wait := cfg.IngestBatchWait
	if wait == 0 {
		wait = -1
	}
	return groupcommit.Options{MaxBatch: cfg.IngestBatchMax, MaxWait: wait, Queue: cfg.IngestQueue,
		Writers: cfg.IngestWriters}
}

// KeyEvictChannel is the Redis channel on which a revoked key leaves every
// api instance's cache (prefixed by Infra.RedisPrefix).
const KeyEvictChannel = "apikeys:evict"

// New builds the services on in.
func New(in Infra) (*Services, error) {
	cfg := in.Config
	if cfg == nil || in.DB == nil || in.Log == nil {
		return nil, fmt.Errorf("app.New: Config, DB and Log are required")
	}
	// What transactions schedule is enqueued once they commit, through this
	// process's task client: the services get their own handle on the pool.
	db := &store.DB{Pool: in.DB.Pool, Queries: in.DB.Queries, Tasks: in.Tasks}
	importDB := db
	if in.ImportDB != nil {
		importDB = &store.DB{Pool: in.ImportDB.Pool, Queries: in.ImportDB.Queries, Tasks: in.Tasks}
	}
	pages, err := page.NewCodec(cfg.CursorKey())
	if err != nil {
		return nil, fmt.Errorf("cursor key: %w", err)
	}
	signer, err := tracking.NewSigner(cfg.TrackingSecret)
	if err != nil {
		return nil, fmt.Errorf("TRACKING_SECRET: %w", err)
	}
	// Stored Idempotency-Key responses keep their secrets sealed under a
	// key derived from TRACKING_SECRET, which every api instance shares.
	sealer, err := idempotency.NewSealer(cfg.TrackingSecret)
	if err != nil {
		return nil, fmt.Errorf("TRACKING_SECRET: %w", err)
	}
	keys := in.Keys
	if keys == nil {
		keys = keycache.New(apikeys.Loader(db), in.Redis, in.RedisPrefix+KeyEvictChannel, cfg.APIKeyCacheTTL, in.Log)
	}
	dns := in.DNS
	if dns == nil {
		dns = &domains.Checker{Server: cfg.DNSResolver}
	}
	s := &Services{Config: cfg, DB: db, Redis: in.Redis, Tasks: in.Tasks, Log: in.Log, Keys: keys, Pages: pages,
		Tenants:  &tenants.Store{DB: db, ProviderConnected: cfg.ProviderConnected()},
		APIKeys:  &apikeys.Store{DB: db, Cache: keys, Log: in.Log},
		Contacts: &contacts.Store{DB: db, FreeLimit: cfg.PlanFreeContacts},
		Imports: &contacts.Imports{DB: db, Work: importDB, FreeLimit: cfg.PlanFreeContacts,
			MaxRunning: cfg.ImportMaxRunning, MaxUploads: cfg.ImportMaxUploads, UploadTimeout: cfg.ImportUploadTimeout,
			SpoolDir: cfg.ImportSpoolDir},
		// Every event, in either process, runs the sequence engine's hook:
		// enrolments and exit conditions.
		Events: &events.Recorder{DB: db, Hooks: []events.Hook{engine.Hook},
			BatchHooks: []events.BatchHook{engine.HookMany}, SystemHooks: []events.SystemHook{engine.SystemHook}},
		Feed: &events.Feed{DB: db},
		// A live segment's entered and exited start the sequences they
		// trigger, in the transaction that writes the change.
		Segments: &segments.Store{DB: db, Throttle: &segments.Throttle{Redis: in.Redis, Prefix: in.RedisPrefix,
			Every: cfg.SegmentComputeEvery, Log: in.Log}, OnChange: engine.SegmentHook},
		Campaigns: &campaigns.Store{DB: db},
		Templates: &templates.Store{DB: db, Compiler: templates.Prepare{MJML: in.MJML},
			FreeLimit: cfg.PlanFreeTemplates},
		TemplateRenderer: &templates.Renderer{DB: db, R: in.Renderer},
		// The engine follows the definitions: disabling pauses enrolments,
		// enabling releases held sends, deleting cancels pending ones.
		Sequences: &sequences.Store{DB: db, FreeLimit: cfg.PlanFreeSequences,
			OnEnabled: engine.SetEnabled, OnDelete: engine.CancelSequence, OnNewVersion: engine.StepsRemoved},
		Domains: &domains.Store{DB: db, DNS: dns, DKIMSuffix: cfg.DKIMCNAMESuffix,
			CheckInterval: cfg.DomainCheckInterval},
		Idempotency: &idempotency.Store{DB: db, Sealer: sealer},
		Metrics:     &metrics.Store{DB: db},
		Tracking:    signer,
		Sends:       &delivery.Sends{DB: db},
	}
	s.Ingest = events.NewIngest(s.Events, ingestOptions(cfg))
	s.Outcomes = &delivery.Outcomes{DB: db, Events: s.Events,
		Guard: &tenants.Guard{MinSample: cfg.PauseMinSample, OnPause: telemetry.TenantPaused}}
	s.Webhooks = &delivery.Webhooks{DB: db, Outcomes: s.Outcomes, Tasks: in.Tasks}
	s.Sender = &delivery.Sender{DB: db, Templates: s.TemplateRenderer, Domains: s.Domains,
		Pool: in.Pool, Tracking: signer, BaseURL: cfg.PublicBaseURL,
		SandboxFrom: cfg.SandboxFromAddress, Events: s.Events, Log: in.Log,
		Rate:     sendrate.New(in.Redis, in.RedisPrefix, cfg.ProviderRatePerSecond),
		Throttle: throttle.New(in.Redis, in.RedisPrefix, cfg.DestinationLimits, &throttle.MX{Server: cfg.DNSResolver})}
	if s.Sender.Pool == nil && in.Provider != nil {
		s.Sender.Pool = provider.PoolOf(in.Provider)
	}
	s.Enrolments = &engine.Store{DB: db, Templates: s.TemplateRenderer, BaseURL: cfg.PublicBaseURL}
	s.Runner = &engine.Runner{DB: db, Sender: s.Sender, MaxAttempts: cfg.SendMaxAttempts, Log: in.Log}
	s.Sweeper = &engine.Sweeper{DB: db, Tasks: in.Tasks, MaxAttempts: cfg.SendMaxAttempts,
		ClaimTimeout: cfg.SendClaimTimeout, FanOut: cfg.WorkerConcurrency, Log: in.Log}
	s.Broadcasts = &broadcasts.Store{DB: db, From: s.Sender}
	s.BroadcastDispatcher = &broadcasts.Dispatcher{DB: db, Sender: s.Sender, MaxAttempts: cfg.SendMaxAttempts,
		ClaimTimeout: cfg.SendClaimTimeout, Log: in.Log}
	guard := &outbound.Guard{AllowPrivate: cfg.WebhookAllowPrivateTargets}
	s.Outbound = &outbound.Store{DB: db, Guard: guard}
	s.Deliverer = &outbound.Deliverer{DB: db, Client: outbound.NewClient(guard), Schedule: cfg.WebhookRetrySchedule,
		Parallel: outbound.DefaultBatch, PerTenant: outbound.DefaultPerTenant, PerEndpoint: outbound.DefaultPerEndpoint,
		Log: in.Log}
	files := retention.Dir(cfg.ArchiveDir)
	s.Archiver = &retention.Archiver{DB: db, Files: files, Log: in.Log}
	s.Archives = &retention.Archives{DB: db, Files: files}
	s.Topics = &topics.Store{DB: db}
	s.Suppressions = &contacts.Suppressions{DB: db}
	s.Audit = &audit.Store{DB: db}
	return s, nil
}
