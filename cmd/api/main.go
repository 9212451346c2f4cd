// Command api serves the Tidings HTTP API.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"

	"tidings/api"
	"tidings/internal/apikeys"
	"tidings/internal/auth"
	"tidings/internal/config"
	"tidings/internal/domains"
	"tidings/internal/keycache"
	"tidings/internal/mjml"
	"tidings/internal/provider"
	"tidings/internal/ratelimit"
	"tidings/internal/render"
	"tidings/internal/sendgridevents"
	"tidings/internal/store"
)

func main() {
	log, err := config.NewLogger("api")
	if err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
	if err := run(log); err != nil {
		log.Error("api stopped", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if cfg.TrackingSecretGenerated {
		log.Warn("TRACKING_SECRET is not set: using a random secret, tracking links break on restart")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if cfg.Migrate {
		if err := db.Migrate(ctx, log); err != nil {
			return err
		}
	}
	rdb, err := cfg.OpenRedis(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()

	// Template PUTs compile MJML on long-lived node processes; without node
	// or the mjml package the API refuses to start (make mjml-deps).
	pool, err := mjml.NewPool(ctx, mjml.Options{})
	if err != nil {
		return fmt.Errorf("MJML compiler: %w", err)
	}
	defer pool.Close()

	// A key that is set must be a usable P-256 key; unset, the webhook
	// refuses every POST (api.New logs it once).
	var webhookKey *sendgridevents.Verifier
	if cfg.SendgridWebhookPublicKey != "" {
		if webhookKey, err = sendgridevents.NewVerifier(cfg.SendgridWebhookPublicKey); err != nil {
			return fmt.Errorf("SENDGRID_WEBHOOK_PUBLIC_KEY: %w", err)
		}
	}
	asynqOpt, err := cfg.AsynqRedisOpt()
	if err != nil {
		return err
	}
	queue := asynq.NewClient(asynqOpt)
	defer queue.Close()

	keys := keycache.New(apikeys.Loader(db), rdb, "tidings:apikeys:evict", cfg.APIKeyCacheTTL, log)
	go keys.Run(ctx)

	// The provider is checked at start (a sendgrid key, a parsable
	// SMTP_URL, a writable OUTBOX_DIR), so a misconfiguration stops the
	// process instead of failing the first send.
	prov, err := provider.New(cfg)
	if err != nil {
		return err
	}
	log.Info("email provider", "provider", prov.Name(), "connected", cfg.ProviderConnected())

	app := api.New(api.Deps{
		Config:      cfg,
		DB:          db,
		Redis:       rdb,
		Limiter:     ratelimit.New(rdb, cfg.RateLimitPerMinute, "tidings:"),
		Sessions:    auth.NewSessionVerifier(cfg.DashboardJWTSecret, cfg.DashboardOIDCIssuer, cfg.DashboardOIDCAudience),
		Keys:        keys,
		Log:         log,
		RedisPrefix: "tidings:",
		MJML:        pool,
		Renderer: render.NewRenderer(render.RendererOptions{
			MaxLoopIterations: cfg.RenderMaxLoopIterations, MaxStringBytes: cfg.RenderMaxStringBytes,
			MaxOutput: cfg.RenderMaxOutputBytes, MaxRenderTime: cfg.RenderMaxTime}),
		Provider: prov,
		// Domain checks ask DNS_RESOLVER, or the first nameserver of
		// /etc/resolv.conf when it is unset (read at each check).
		DNS:        &domains.Checker{Server: cfg.DNSResolver},
		WebhookKey: webhookKey,
		Queue:      queue,
	})
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return err
	}
	log.Info("api listening", "addr", cfg.HTTPAddr)
	return api.Serve(ctx, app, ln, 30*time.Second, log)
}
