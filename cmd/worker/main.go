// Command worker runs Tidings' background work: the asynq server, the
// periodic scheduler and the admin listener (asynqmon, health).
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

	"tidings/internal/config"
	"tidings/internal/provider"
	"tidings/internal/store"
	"tidings/worker"
)

func main() {
	log, err := config.NewLogger("worker")
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	if err := run(log); err != nil {
		log.Error("worker stopped", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	rdb, err := cfg.OpenRedis(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	opt, err := cfg.AsynqRedisOpt()
	if err != nil {
		return err
	}
	client := asynq.NewClient(opt)
	defer client.Close()

	// Sequence sends go through the same provider and renderer settings
	// as the api's sends.
	prov, err := provider.New(cfg)
	if err != nil {
		return err
	}
	runner, err := worker.NewSequenceRunner(cfg, db, prov, worker.NewRenderer(cfg), log)
	if err != nil {
		return err
	}
	inspector := asynq.NewInspector(opt)
	defer inspector.Close()
	deps := worker.Deps{Config: cfg, DB: db, Redis: rdb, Client: client, Inspector: inspector, Log: log, Sequences: runner}
	srv := worker.NewServer(opt, log, 10)
	if err := srv.Start(worker.NewMux(deps)); err != nil {
		return err
	}

	schedCtx, stopSched := context.WithCancel(context.Background())
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		worker.NewScheduler(client, worker.PeriodicTasks(deps), log).Run(schedCtx)
	}()

	adminHandler, closeAdmin := worker.AdminHandler(opt)
	defer closeAdmin()
	admin := &http.Server{Addr: cfg.WorkerAdminAddr, Handler: adminHandler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- admin.ListenAndServe() }()
	log.Info("worker running", "admin_addr", cfg.WorkerAdminAddr)

	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight tasks")
	stopSched()
	<-schedDone
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
