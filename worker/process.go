package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/config"
)

// Main is the whole of a worker binary (ADDENDUM 26): cmd/worker runs the
// roles WORKER_ROLES names (Main("worker")), cmd/worker-sends and the
// others their one role (Main("worker-sends", RoleSends)). It exits the
// process: 1 when the worker could not start or stopped on an error.
func Main(binary string, fixed ...Role) {
	log, flush, err := config.NewLogger(binary)
	if err != nil {
		fmt.Fprintln(os.Stderr, binary+":", err)
		os.Exit(1)
	}
	if err := run(binary, fixed, log); err != nil {
		log.Error("worker stopped", "err", err) // an error line is written at once
		os.Exit(1)
	}
	flush()
}

func run(binary string, fixed []Role, log *slog.Logger) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	roles := fixed
	if len(fixed) == 0 {
		if roles, err = ParseRoles(cfg.WorkerRoles); err != nil {
			return err
		}
	} else if cfg.WorkerRoles != "all" && cfg.WorkerRoles != joinRoles(fixed) {
		log.Warn("WORKER_ROLES is ignored: this binary runs its own role", "binary", binary,
			"roles", joinRoles(fixed), "worker_roles", cfg.WorkerRoles)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", cfg.WorkerAdminAddr)
	if err != nil {
		return fmt.Errorf("WORKER_ADMIN_ADDR: %w", err)
	}
	return Run(ctx, cfg, log, roles, ln)
}

// schemaPoll is how often a worker waiting for the schema asks for it.
var schemaPoll = time.Second

// Run is one worker process of roles until ctx ends: the asynq server on
// the roles' queues, the periodic scheduler (maintenance), the listener
// that wakes outbound webhook delivery (webhooks), and the admin listener
// on admin. It drains running tasks before it returns.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, roles []Role, admin net.Listener) error {
	infra, err := app.Open(ctx, cfg, log, app.RoleWorker)
	if err != nil {
		_ = admin.Close()
		return err
	}
	defer infra.Close()
	// On a fresh install the api may not have migrated yet: wait for the
	// schema before any task or the scheduler runs (an interrupt while
	// waiting is a clean stop).
	if err := infra.DB.WaitForSchema(ctx, log, schemaPoll); err != nil {
		_ = admin.Close()
		if ctx.Err() != nil {
			log.Info("worker stopped before the database schema was ready")
			return nil
		}
		return err
	}
	svc, err := app.New(infra.Infra)
	if err != nil {
		_ = admin.Close()
		return err
	}
	srv := NewServer(infra.AsynqOpt, log, cfg.WorkerConcurrency, roles)
	if err := srv.Start(NewMux(svc)); err != nil {
		_ = admin.Close()
		return err
	}

	bg, stopBG := context.WithCancel(context.Background())
	var done []chan struct{}
	goBG := func(f func(context.Context)) {
		c := make(chan struct{})
		done = append(done, c)
		go func() { defer close(c); f(bg) }()
	}
	if Has(roles, RoleMaintenance) {
		periodic := asynq.NewClient(infra.AsynqOpt)
		defer periodic.Close()
		tasks := append(PeriodicTasks(), ArchivePeriodic(cfg.RetentionInterval))
		goBG(NewScheduler(periodic, infra.Inspector, infra.Redis, tasks, log).Run)
	}
	if Has(roles, RoleWebhooks) {
		goBG(func(ctx context.Context) { ListenWebhooks(ctx, svc) })
	}
	if Has(roles, RoleSegments) {
		goBG(func(ctx context.Context) { RunLive(ctx, svc) })
	}

	adminHandler, closeAdmin := AdminHandler(infra.AsynqOpt, infra.Inspector,
		AdminOptions{ReadOnly: cfg.AsynqmonReadOnly, Hosts: cfg.AdminHosts, Roles: roles}, AdminCollectors(svc)...)
	defer closeAdmin()
	adminSrv := &http.Server{Handler: adminHandler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- adminSrv.Serve(admin) }()
	log.Info("worker running", "roles", joinRoles(roles), "admin_addr", admin.Addr().String(),
		"concurrency", cfg.WorkerConcurrency, "asynqmon_read_only", cfg.AsynqmonReadOnly)

	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight tasks")
	stopBG()
	for _, c := range done {
		<-c
	}
	srv.Shutdown() // waits up to ShutdownTimeout for running tasks
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = adminSrv.Shutdown(shutdownCtx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("worker stopped cleanly")
	return nil
}
