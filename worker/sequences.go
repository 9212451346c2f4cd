package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/config"
	"tidings/internal/delivery"
	"tidings/internal/domains"
	"tidings/internal/events"
	"tidings/internal/provider"
	"tidings/internal/render"
	"tidings/internal/sequences/engine"
	"tidings/internal/store"
	"tidings/internal/telemetry"
	"tidings/internal/templates"
	"tidings/internal/tracking"
	"tidings/queries"
)

// Sequence sends (ADDENDUM sections 6-7). Each scheduled_sends row is the
// truth; a TypeScheduledSend task with the row's id as task id, processed
// at the row's scheduledFor, is its timer. Whoever writes rows enqueues
// them after the commit (EnqueueScheduledSends); an enqueue that fails, a
// task id still taken, a Redis that lost its data, a retry time that came:
// the sweep (TypeScheduledSweep, every SequenceSweepEvery, fixed periodic
// task ids) enqueues every due pending or failed row again, and gives
// claims older than ClaimTimeout (their worker died) back as failed.
const (
	TypeScheduledSend  = "sequence:send"
	TypeScheduledSweep = "sequences:sweep"
	TypeScheduledPrune = "sequences:prune"
)

const (
	// SequenceSweepEvery bounds how late a send is whose task was lost, and
	// adds at most this much to a retry's backoff.
	SequenceSweepEvery = 5 * time.Second
	// ClaimTimeout is how old a claim must be before the sweep takes the
	// row back (SEND_CLAIM_TIMEOUT's default): well past sendTimeout, so a
	// slow attempt still running is never doubled.
	ClaimTimeout     = 5 * time.Minute
	sendTimeout      = time.Minute
	sequenceSweepMax = 1000
	// sweepProbe is the sweep's first page: in a backlog whose tasks are
	// queued, each row costs an enqueue refused and a look at the task, so
	// the sweep reads few before it concludes the queue is whole.
	sweepProbe = 100
	// sweepBudget bounds one sweep's paging through lost due rows; with
	// SequenceSweepEvery it sets how fast a lost backlog comes back (some
	// 5,000 enqueues a second here, far above the drain rate).
	sweepBudget       = 4 * time.Second
	sweepTimeout      = 30 * time.Second
	scheduledKeptFor  = 7 * 24 * time.Hour
	scheduledPruneDue = time.Hour
)

type scheduledPayload struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"scheduledSendId"`
}

// EnqueueScheduledSends hands scheduled sends to the queue (critical), each
// as a task whose id is the row's id, processed at its time. A task
// already queued for a row is success; other failures are logged and left
// to the sweep, which is why this returns nothing: the rows are written.
func EnqueueScheduledSends(ctx context.Context, c *asynq.Client, log *slog.Logger, timers []engine.Timer) {
	if c == nil {
		return
	}
	for _, t := range timers {
		if err := enqueueScheduled(ctx, c, t); err != nil {
			log.Warn("scheduled send not enqueued; the sweep will", "scheduled_send_id", t.ID, "err", err)
		}
	}
}

func enqueueScheduled(ctx context.Context, c *asynq.Client, t engine.Timer) error {
	err := enqueueTask(ctx, c, t)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}

func enqueueTask(ctx context.Context, c *asynq.Client, t engine.Timer) error {
	payload, err := json.Marshal(scheduledPayload{TenantID: t.TenantID, ID: t.ID})
	if err != nil {
		return err
	}
	// Retries are the rows' (failed, with a retry time), not asynq's: a
	// task is not retried by asynq (MaxRetry 0), the sweep re-feeds the row.
	_, err = c.EnqueueContext(ctx, asynq.NewTask(TypeScheduledSend, payload),
		asynq.TaskID(t.ID), asynq.ProcessAt(t.At), asynq.Queue(QueueCritical),
		asynq.MaxRetry(0), asynq.Timeout(sendTimeout))
	return err
}

// enqueueSwept is the sweep's enqueue, which also frees a task id that a
// dead task still holds. A task whose worker was killed is archived by
// asynq when its lease runs out (MaxRetry 0), and an archived task keeps
// its id: without this the row's new task would be refused as a duplicate
// until the archive is trimmed, months later.
// It reports whether it queued a task (false: one was waiting or running).
func enqueueSwept(ctx context.Context, d Deps, t engine.Timer) (bool, error) {
	if d.Client == nil {
		return false, nil
	}
	err := enqueueTask(ctx, d.Client, t)
	if !errors.Is(err, asynq.ErrTaskIDConflict) {
		return err == nil, err
	}
	if d.Inspector == nil {
		return false, nil
	}
	info, err := d.Inspector.GetTaskInfo(QueueCritical, t.ID)
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound):
	case err != nil:
		return false, err
	case info.State != asynq.TaskStateArchived && info.State != asynq.TaskStateCompleted:
		return false, nil // waiting or running: it will claim the row
	default:
		if err := d.Inspector.DeleteTask(QueueCritical, t.ID); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return false, err
		}
	}
	err = enqueueTask(ctx, d.Client, t)
	return err == nil, ignoreConflict(err)
}

func ignoreConflict(err error) error {
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}

// HandleScheduledSend runs one scheduled send (engine.Runner.Run) and
// enqueues the next step it scheduled. It is exported for tests.
func HandleScheduledSend(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		var p scheduledPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil || p.ID == "" || p.TenantID == "" {
			return fmt.Errorf("scheduled send payload %q: %w", t.Payload(), asynq.SkipRetry)
		}
		res, err := d.Sequences.Run(ctx, p.TenantID, p.ID)
		if err != nil {
			telemetry.ScheduledRun(string(engine.OutcomeFailed))
			// The row is failed (or still pending) and the sweep re-feeds
			// it. The task succeeds all the same: a failed task would be
			// archived and keep the row's task id.
			d.Log.Error("scheduled send attempt failed; the sweep retries it", "scheduled_send_id", p.ID, "err", err)
			return nil
		}
		EnqueueScheduledSends(ctx, d.Client, d.Log, res.Timers)
		telemetry.ScheduledRun(string(res.Outcome))
		switch res.Outcome {
		case engine.OutcomeFailed, engine.OutcomeDead:
			d.Log.Warn("scheduled send failed", "scheduled_send_id", p.ID, "outcome", res.Outcome, "err", res.Err)
		case engine.OutcomeNone:
		default:
			d.Log.Info("scheduled send processed", "scheduled_send_id", p.ID, "outcome", res.Outcome)
		}
		return nil
	}
}

// SweepScheduled reclaims stale claims and enqueues every due row again;
// it returns how many it enqueued. Exported for tests.
func SweepScheduled(ctx context.Context, d Deps, now time.Time, claimTimeout time.Duration) (int, error) {
	reclaimed, err := d.DB.ScheduledSendReclaim(ctx, queries.ScheduledSendReclaimParams{
		MaxAttempts: int32(d.Config.SendMaxAttempts), StaleBefore: now.Add(-claimTimeout)})
	if err != nil {
		return 0, err
	}
	// A reclaimed row is due on the database's clock, which may be a
	// moment ahead of now: it is enqueued here rather than by the next
	// sweep.
	var timers []engine.Timer
	seen := map[string]bool{}
	for _, r := range reclaimed {
		d.Log.Warn("stale claim taken back", "scheduled_send_id", r.ID, "status", r.Status)
		if r.Status == "dead" {
			if err := engine.Dead(ctx, d.DB.Queries, r.TenantID, r.EnrolmentID); err != nil {
				return 0, err
			}
			continue
		}
		timers, seen[r.ID] = append(timers, engine.Timer{TenantID: r.TenantID, ID: r.ID, At: r.ScheduledFor}), true
	}
	n := 0
	for _, t := range timers {
		if _, err := enqueueSwept(ctx, d, t); err != nil {
			d.Log.Warn("scheduled send not enqueued by the sweep", "scheduled_send_id", t.ID, "err", err)
		}
		n++
	}
	// Due rows, a page at a time. A page whose rows mostly have their task
	// waiting in the queue means the queue is whole (a backlog, not a
	// loss): the sweep stops there. A page of lost tasks (Redis flushed or
	// restarted empty) goes on to the next, within sweepBudget, so a lost
	// backlog is fed back at the rate the queue takes it, not a page per
	// sweep.
	// The first page is small: in a backlog it is all the sweep reads.
	start := time.Now()
	p := queries.ScheduledSendDueParams{Now: now, Lim: sweepProbe, AfterFor: time.Unix(0, 0)}
	for {
		due, err := d.DB.ScheduledSendDue(ctx, p)
		if err != nil {
			return n, err
		}
		requeued := 0
		for _, r := range due {
			if seen[r.ID] {
				continue
			}
			again, err := enqueueSwept(ctx, d, engine.Timer{TenantID: r.TenantID, ID: r.ID, At: r.ScheduledFor})
			if err != nil {
				d.Log.Warn("scheduled send not enqueued by the sweep", "scheduled_send_id", r.ID, "err", err)
			}
			if again {
				requeued++
			}
			n++
		}
		if len(due) < int(p.Lim) || requeued < len(due)/2 || time.Since(start) > sweepBudget || ctx.Err() != nil {
			return n, nil
		}
		last := due[len(due)-1]
		p.AfterFor, p.AfterTenant, p.AfterID = last.ScheduledFor, last.TenantID, last.ID
		p.Lim = sequenceSweepMax
	}
}

func scheduledSweepPeriodic() Periodic {
	return Periodic{Name: TypeScheduledSweep, Every: SequenceSweepEvery, Queue: QueueCritical, Task: func() *asynq.Task {
		return asynq.NewTask(TypeScheduledSweep, nil, asynq.MaxRetry(0), asynq.Timeout(sweepTimeout))
	}}
}

func scheduledPrunePeriodic() Periodic {
	return Periodic{Name: TypeScheduledPrune, Every: scheduledPruneDue, Queue: QueueLow, Task: func() *asynq.Task {
		return asynq.NewTask(TypeScheduledPrune, nil, asynq.MaxRetry(0), asynq.Timeout(sweepTimeout))
	}}
}

func handleScheduledSweep(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		timeout := d.Config.SendClaimTimeout
		if timeout <= 0 {
			timeout = ClaimTimeout
		}
		_, err := SweepScheduled(ctx, d, time.Now(), timeout)
		return err
	}
}

func handleScheduledPrune(d Deps) asynq.HandlerFunc {
	return func(ctx context.Context, _ *asynq.Task) error {
		n, err := d.DB.ScheduledSendPrune(ctx, time.Now().Add(-scheduledKeptFor))
		if n > 0 {
			d.Log.Info("sent and cancelled scheduled sends pruned", "count", n)
		}
		return err
	}
}

// NewSequenceRunner builds the runner of scheduled sends: a delivery.Sender
// as the api builds it (provider, tracking signer from TRACKING_SECRET,
// templates rendered by r with the configured render limits).
func NewSequenceRunner(cfg *config.Config, db *store.DB, prov provider.Provider, r *render.Renderer, log *slog.Logger) (*engine.Runner, error) {
	signer, err := tracking.NewSigner(cfg.TrackingSecret)
	if err != nil {
		return nil, err
	}
	sender := &delivery.Sender{DB: db, Templates: &templates.Renderer{DB: db, R: r},
		Domains:  &domains.Store{DB: db, DNS: &domains.Checker{Server: cfg.DNSResolver}, DKIMSuffix: cfg.DKIMCNAMESuffix, CheckInterval: cfg.DomainCheckInterval},
		Provider: prov, Tracking: signer, BaseURL: cfg.PublicBaseURL, SandboxFrom: cfg.SandboxFromAddress,
		Events: &events.Recorder{DB: db}, Log: log}
	return &engine.Runner{DB: db, Sender: sender, MaxAttempts: cfg.SendMaxAttempts, Log: log}, nil
}

// NewRenderer is the template renderer with the configured render limits.
func NewRenderer(cfg *config.Config) *render.Renderer {
	return render.NewRenderer(render.RendererOptions{
		MaxLoopIterations: cfg.RenderMaxLoopIterations, MaxStringBytes: cfg.RenderMaxStringBytes,
		MaxOutput: cfg.RenderMaxOutputBytes, MaxRenderTime: cfg.RenderMaxTime})
}
