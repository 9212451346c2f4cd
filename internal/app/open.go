package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/hibiken/asynq"

	"tidings/internal/config"
	"tidings/internal/mjml"
	"tidings/internal/render"
	"tidings/internal/retention"
	"tidings/internal/store"
	"tidings/internal/tasks"
)

// Role says which binary opens the infrastructure; the two differ only in
// what they serve.
type Role string

// The two binaries.
const (
	RoleAPI    Role = "api"
	RoleWorker Role = "worker"
)

// RedisPrefix namespaces the services' Redis keys in production.
const RedisPrefix = "tidings:"

// Opened is the infrastructure of a process and how to close it.
type Opened struct {
	Infra
	// AsynqOpt is the asynq connection (the worker's server and dashboard).
	AsynqOpt asynq.RedisConnOpt
	// Inspector reads and frees task ids (the sweeps, the dashboard's
	// metrics).
	Inspector *asynq.Inspector
	closers   []func() error
}

// Close closes what Open opened, in reverse order.
func (o *Opened) Close() error {
	var errs []error
	for i := len(o.closers) - 1; i >= 0; i-- {
		errs = append(errs, o.closers[i]())
	}
	return errors.Join(errs...)
}

// Open connects to PostgreSQL and Redis, checks the provider, and (for the
// api) applies migrations and starts the MJML compiler pool. Every
// misconfiguration is an error here rather than a failure of the first
// request or task.
func Open(ctx context.Context, cfg *config.Config, log *slog.Logger, role Role) (o *Opened, err error) {
	o = &Opened{Infra: Infra{Config: cfg, Log: log, RedisPrefix: RedisPrefix}}
	defer func() {
		if err != nil {
			_ = o.Close()
		}
	}()
	if cfg.TrackingSecretGenerated {
		log.Warn("TRACKING_SECRET is not set: using the fixed development secret (EMAIL_PROVIDER=outbox only)")
	}
	if o.DB, err = store.Open(ctx, cfg.DatabaseURL); err != nil {
		return o, err
	}
	o.closers = append(o.closers, func() error { o.DB.Close(); return nil })
	// Imports stage and process on a pool of their own, so that however
	// many run, requests find a connection (docs/decisions.md "Import
	// limits").
	if o.ImportDB, err = o.DB.Share(ctx, cfg.ImportDBConns); err != nil {
		return o, err
	}
	o.closers = append(o.closers, func() error { o.ImportDB.Close(); return nil })
	if role == RoleAPI {
		if err := checkSpoolDir(cfg.ImportSpoolDir); err != nil {
			return o, err
		}
	}
	if role == RoleAPI && cfg.Migrate {
		if err := o.DB.Migrate(ctx, log); err != nil {
			return o, err
		}
	}
	// Events are partitioned by month: the coming months' partitions are
	// made at every start as well as by the worker's retention run, so an
	// event never finds its month missing.
	if role == RoleAPI {
		if _, err := o.DB.EventsEnsurePartitions(ctx, retention.PartitionsAhead); err != nil {
			return o, fmt.Errorf("event partitions: %w", err)
		}
	}
	if o.Redis, err = cfg.OpenRedis(ctx); err != nil {
		return o, err
	}
	o.closers = append(o.closers, o.Redis.Close)
	if o.AsynqOpt, err = cfg.AsynqRedisOpt(); err != nil {
		return o, err
	}
	client := asynq.NewClient(o.AsynqOpt)
	o.closers = append(o.closers, client.Close)
	o.Inspector = asynq.NewInspector(o.AsynqOpt)
	o.closers = append(o.closers, o.Inspector.Close)
	o.Tasks = tasks.NewClient(client, o.Inspector, log).WithRedis(o.Redis)

	// The provider is checked at start (a sendgrid key, a parsable
	// SMTP_URL, a writable OUTBOX_DIR).
	if o.Pool, err = OpenPool(ctx, cfg); err != nil {
		return o, err
	}
	log.Info("email providers", "providers", cfg.Providers, "transactional", cfg.TransactionalProviders,
		"marketing", cfg.MarketingProviders, "connected", cfg.ProviderConnected())
	o.Renderer = render.NewRenderer(render.RendererOptions{
		MaxLoopIterations: cfg.RenderMaxLoopIterations, MaxStringBytes: cfg.RenderMaxStringBytes,
		MaxOutput: cfg.RenderMaxOutputBytes, MaxRenderTime: cfg.RenderMaxTime})
	if role == RoleAPI {
		// Template PUTs compile MJML on long-lived node processes; without
		// node or the mjml package the api refuses to start (make mjml-deps).
		pool, err := mjml.NewPool(ctx, mjml.Options{})
		if err != nil {
			return o, fmt.Errorf("MJML compiler: %w", err)
		}
		o.MJML = pool
		o.closers = append(o.closers, pool.Close)
	}
	return o, nil
}

// checkSpoolDir checks that import bodies can be written to dir
// (IMPORT_SPOOL_DIR; "": the system's temporary directory) at start,
// rather than at the first import.
func checkSpoolDir(dir string) error {
	f, err := os.CreateTemp(dir, "tidings-import-check-*")
	if err != nil {
		return fmt.Errorf("IMPORT_SPOOL_DIR: %w", err)
	}
	_ = f.Close()
	return os.Remove(f.Name())
}
