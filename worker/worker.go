// Package worker is the background side of Tidings: the asynq server and
// its mux, the roles that split the work into queues (roles.go), the
// periodic scheduler, the admin listener with asynqmon, and the process
// every worker binary runs (Main). Task families register themselves in
// NewMux, one file per family; task names, payloads, queues and
// enqueueing live in internal/tasks, shared with the api and the domain
// packages.
package worker

import (
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/tasks"
)

// Deps are what task handlers need: the services every process shares.
type Deps = *app.Services

// NewServer builds the asynq server of a process of roles: it takes tasks
// from those roles' queues only, up to concurrency at once
// (WORKER_CONCURRENCY).
func NewServer(opt asynq.RedisConnOpt, log *slog.Logger, concurrency int, roles []Role) *asynq.Server {
	return asynq.NewServer(opt, asynq.Config{
		Concurrency:     concurrency,
		Queues:          Queues(roles),
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

// NewMux registers every task family's handlers. A process runs only the
// tasks of its roles' queues (NewServer); it knows every type all the
// same, so the maintenance role can drain the legacy queues, which held
// every type.
func NewMux(d Deps) *asynq.ServeMux {
	mux := asynq.NewServeMux()
	mux.Use(logTasks(d.Log))
	mux.Handle(tasks.TypeDomainSweep, handleDomainSweep(d))
	mux.Handle(tasks.TypeDomainCheck, HandleDomainCheck(d))
	mux.Handle(tasks.TypeIdempotencySweep, handleIdempotencySweep(d))
	mux.Handle(tasks.TypeWebhookBatch, HandleWebhookBatch(d))
	mux.Handle(tasks.TypeWebhookSweep, handleWebhookSweep(d))
	mux.Handle(tasks.TypeWebhookUnpark, HandleWebhookUnpark(d))
	mux.Handle(tasks.TypeDispatch, HandleDispatch(d))
	mux.Handle(tasks.TypeScheduledSend, HandleScheduledSend(d))
	mux.Handle(tasks.TypeScheduledSweep, handleScheduledSweep(d))
	mux.Handle(tasks.TypeScheduledPrune, handleScheduledPrune(d))
	mux.Handle(tasks.TypeSendingSweep, handleSendingSweep(d))
	mux.Handle(tasks.TypeBroadcastStart, HandleBroadcastStart(d))
	mux.Handle(tasks.TypeBroadcastWinner, HandleBroadcastWinner(d))
	mux.Handle(tasks.TypeOutboundDeliver, HandleOutboundDeliver(d))
	mux.Handle(tasks.TypeOutboundSweep, handleOutboundSweep(d))
	mux.Handle(tasks.TypeEventsArchive, HandleEventsArchive(d))
	mux.Handle(tasks.TypeContactImport, HandleContactImport(d))
	mux.Handle(tasks.TypeContactImportSweep, handleContactImportSweep(d))
	mux.Handle(tasks.TypeSegmentCompute, HandleSegmentCompute(d))
	return mux
}

// PeriodicTasks lists the tasks the scheduler enqueues (the scheduler runs
// in the maintenance role, and so do these: every one goes to the
// maintenance queue and only enqueues into other roles' queues); task
// families add theirs here.
func PeriodicTasks() []Periodic {
	return []Periodic{domainSweepPeriodic(), idempotencySweepPeriodic(), webhookSweepPeriodic(),
		scheduledSweepPeriodic(), scheduledPrunePeriodic(), sendingSweepPeriodic(), outboundSweepPeriodic(),
		importSweepPeriodic()}
}
