// Command api serves the Tidings HTTP API. It only wires: the services come
// from internal/app, the routes from api.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"tidings/api"
	"tidings/internal/app"
	"tidings/internal/auth"
	"tidings/internal/config"
	"tidings/internal/ratelimit"
	"tidings/internal/sendgridevents"
	"tidings/internal/sesevents"
)

// drain is how long in-flight requests may take once SIGTERM came.
const drain = 30 * time.Second

func main() {
	log, flush, err := config.NewLogger("api")
	if err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
	if err := run(log); err != nil {
		log.Error("api stopped", "err", err) // an error line is written at once
		os.Exit(1)
	}
	flush()
}

func run(log *slog.Logger) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		log.Warn("DEV_MODE: would refuse to start otherwise", "reason", w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	infra, err := app.Open(ctx, cfg, log, app.RoleAPI)
	if err != nil {
		return err
	}
	defer infra.Close()
	svc, err := app.New(infra.Infra)
	if err != nil {
		return err
	}
	// A key that is set must be a usable P-256 key; unset, the webhook
	// refuses every POST (api.New logs it once).
	var webhookKey *sendgridevents.Verifier
	if cfg.SendgridWebhookPublicKey != "" {
		if webhookKey, err = sendgridevents.NewVerifier(cfg.SendgridWebhookPublicKey); err != nil {
			return fmt.Errorf("SENDGRID_WEBHOOK_PUBLIC_KEY: %w", err)
		}
	}
	// SES's outcomes: SNS certificates only from SES_SNS_CERT_HOSTS
	// (default sns.<SES_REGION>.amazonaws.com); neither set, refused.
	var sns *sesevents.Verifier
	if len(cfg.SESSNSCertHosts) > 0 {
		sns = sesevents.NewVerifier(cfg.SESSNSCertHosts, cfg.SESSNSTopicARNs, nil)
	}
	// Requests run under base, which outlives SIGTERM by the drain.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	web, err := api.New(api.Deps{
		Services:      svc,
		Limiter:       ratelimit.New(infra.Redis, cfg.RateLimitPerMinute, app.RedisPrefix),
		UnauthLimiter: api.UnauthLimiter(infra.Redis, cfg.UnauthRateLimitPerMinute, time.Minute, app.RedisPrefix),
		Sessions: auth.NewSessionVerifier(cfg.DashboardJWTSecret, cfg.DashboardOIDCIssuer, cfg.DashboardOIDCAudience,
			auth.WithHS256Claims(cfg.DashboardJWTIssuer, cfg.DashboardJWTAudience)),
		WebhookKey:  webhookKey,
		SNS:         sns,
		BaseContext: base,
	})
	if err != nil {
		return err
	}
	// The key cache listens for revocations until the process stops.
	var wg sync.WaitGroup
	keysCtx, stopKeys := context.WithCancel(context.Background())
	wg.Go(func() { svc.Keys.Run(keysCtx) })
	defer func() { stopKeys(); wg.Wait() }()

	// The admin listener (metrics) outlives the drain, so the drain
	// itself can be watched.
	adminLn, err := net.Listen("tcp", cfg.APIAdminAddr)
	if err != nil {
		return fmt.Errorf("API_ADMIN_ADDR: %w", err)
	}
	adminCtx, stopAdmin := context.WithCancel(context.Background())
	wg.Go(func() {
		if err := api.ServeAdmin(adminCtx, adminLn); err != nil {
			log.Error("admin listener stopped", "err", err)
		}
	})
	defer stopAdmin()

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return err
	}
	log.Info("api listening", "addr", cfg.HTTPAddr, "admin_addr", cfg.APIAdminAddr)
	err = api.Serve(ctx, web, ln, drain, log)
	// The HTTP drain waited for the requests whose events were queued;
	// Close writes whatever a request that outlived it left queued and
	// waits for every batch to commit before the pool closes.
	svc.Ingest.Close()
	return err
}
