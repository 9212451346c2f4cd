// Command worker runs Tidings' background work: the asynq server, the
// periodic scheduler and the admin listener (asynqmon, health, metrics). It
// only wires: the services come from internal/app, the tasks from worker.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/config"
	"tidings/worker"
)

func main() {
	log, flush, err := config.NewLogger("worker")
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	if err := run(log); err != nil {
		log.Error("worker stopped", "err", err) // an error line is written at once
		os.Exit(1)
	}
	flush()
}

func run(log *slog.Logger) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	infra, err := app.Open(ctx, cfg, log, app.RoleWorker)
	if err != nil {
		return err
	}
	defer infra.Close()
	svc, err := app.New(infra.Infra)
	if err != nil {
		return err
	}
	srv := worker.NewServer(infra.AsynqOpt, log, cfg.WorkerConcurrency)
	if err := srv.Start(worker.NewMux(svc)); err != nil {
		return err
	}

	periodic := asynq.NewClient(infra.AsynqOpt)
	defer periodic.Close()
	schedCtx, stopSched := context.WithCancel(context.Background())
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		tasks := append(worker.PeriodicTasks(), worker.ArchivePeriodic(cfg.RetentionInterval))
		worker.NewScheduler(periodic, tasks, log).Run(schedCtx)
	}()

	listenCtx, stopListen := context.WithCancel(context.Background())
	listenDone := make(chan struct{})
	go func() { defer close(listenDone); worker.ListenWebhooks(listenCtx, svc) }()

	adminHandler, closeAdmin := worker.AdminHandler(infra.AsynqOpt, infra.Inspector, cfg.AsynqmonReadOnly,
		worker.AdminCollectors(svc)...)
	defer closeAdmin()
	admin := &http.Server{Addr: cfg.WorkerAdminAddr, Handler: adminHandler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- admin.ListenAndServe() }()
	log.Info("worker running", "admin_addr", cfg.WorkerAdminAddr, "concurrency", cfg.WorkerConcurrency,
		"asynqmon_read_only", cfg.AsynqmonReadOnly)

	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight tasks")
	stopSched()
	<-schedDone
	stopListen()
	<-listenDone
	srv.Shutdown() // waits up to ShutdownTimeout for running tasks
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = admin.Shutdown(shutdownCtx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("worker stopped cleanly")
	return nil
}
