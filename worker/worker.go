// Package worker is the background side of Tidings: the asynq server and
// its mux, the periodic scheduler, and the admin listener with asynqmon.
// Task families register themselves in NewMux, one file per family.
package worker

import (
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"tidings/internal/config"
	"tidings/internal/sequences/engine"
	"tidings/internal/store"
)

// Queue names, highest priority first.
const (
	QueueCritical = "critical" // sends that are due
	QueueDefault  = "default"  // sequence steps, webhook ingestion, segment compute
	QueueLow      = "low"      // periodic maintenance, domain checks
)

// Deps are what task handlers need.
type Deps struct {
	Config *config.Config
	DB     *store.DB
	Redis  redis.UniversalClient
	Client *asynq.Client
	// Inspector lets the sweep free the task id of a dead (archived) task.
	Inspector *asynq.Inspector
	Log       *slog.Logger
	// Sequences runs scheduled sends (TypeScheduledSend).
	Sequences *engine.Runner
}

// NewServer builds the asynq server with the service's queues.
func NewServer(opt asynq.RedisConnOpt, log *slog.Logger, concurrency int) *asynq.Server {
	return asynq.NewServer(opt, asynq.Config{
		Concurrency:     concurrency,
		Queues:          map[string]int{QueueCritical: 6, QueueDefault: 3, QueueLow: 1},
		ShutdownTimeout: 30 * time.Second,
		Logger:          slogAdapter{log},
		// A due send should leave within about a second: scheduled tasks
		// move to pending every DelayedTaskCheckInterval (default 5 s), and
		// idle workers look for pending tasks every TaskCheckInterval
		// (default 1 s; they sleep half of it plus jitter). Four more
		// Redis round trips a second per process is cheap.
		DelayedTaskCheckInterval: 250 * time.Millisecond,
		TaskCheckInterval:        250 * time.Millisecond,
		// Failed tasks are logged once, by logTasks (NewMux).
	})
}

// NewMux registers every task family's handlers.
func NewMux(d Deps) *asynq.ServeMux {
	mux := asynq.NewServeMux()
	mux.Use(logTasks(d.Log))
	mux.Handle(TypeDomainSweep, handleDomainSweep(d))
	mux.Handle(TypeIdempotencySweep, handleIdempotencySweep(d))
	mux.Handle(TypeWebhookBatch, HandleWebhookBatch(d))
	mux.Handle(TypeWebhookSweep, handleWebhookSweep(d))
	mux.Handle(TypeScheduledSend, HandleScheduledSend(d))
	mux.Handle(TypeScheduledSweep, handleScheduledSweep(d))
	mux.Handle(TypeScheduledPrune, handleScheduledPrune(d))
	return mux
}

// PeriodicTasks lists the tasks the scheduler enqueues; task families add
// theirs here.
func PeriodicTasks(d Deps) []Periodic {
	return []Periodic{domainSweepPeriodic(), idempotencySweepPeriodic(), webhookSweepPeriodic(),
		scheduledSweepPeriodic(), scheduledPrunePeriodic()}
}
