// Package tasks is what the api, the worker and the domain packages share
// about background work: task type names, queues, payloads and the enqueue
// helpers (the asynq README's "tasks package"). The database row is always
// the truth and a task only its timer: every enqueue here may fail or be
// lost, and the worker's sweeps feed the queue again from the rows. That is
// why the enqueue helpers that follow a commit log instead of failing.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Queues, by the worker role that serves them (ADDENDUM 26): a queue's
// role is its name up to the first dot, so asynqmon and the queue gauges
// show both what waits and which role's processes it waits for. Every
// sweep runs in the maintenance role and only enqueues into the queues of
// the roles it re-feeds, so a role with no process finds its work waiting
// in its own queues when one starts.
const (
	QueueSends            = "sends"             // dispatch of due sends, broadcast starts
	QueueSegments         = "segments"          // segment computes
	QueueDomains          = "domains"           // domain checks
	QueueWebhooks         = "webhooks"          // provider webhook ingestion, parked events
	QueueWebhooksOutbound = "webhooks.outbound" // outbound webhook delivery
	QueueImports          = "imports"           // contact imports
	QueueMaintenance      = "maintenance"       // every sweep, retention, pruning, idempotency keys
)

// The queues of earlier versions: nothing enqueues to them any more, and
// the maintenance role drains what an upgrade left in them (or a process
// of the old version still writes during a rolling upgrade). critical,
// default and low are those of the versions before roles; the ".sweep"
// queues held each role's sweeps before the sweeps moved to maintenance.
const (
	QueueCritical = "critical"
	QueueDefault  = "default"
	QueueLow      = "low"

	QueueSendsSweepLegacy    = "sends.sweep"
	QueueWebhooksSweepLegacy = "webhooks.sweep"
	QueueImportsSweepLegacy  = "imports.sweep"
)

// LegacyQueues are the queues of earlier versions, drained by the
// maintenance role.
var LegacyQueues = []string{QueueCritical, QueueDefault, QueueLow,
	QueueSendsSweepLegacy, QueueWebhooksSweepLegacy, QueueImportsSweepLegacy}

// RoleMaintenance is the role that runs the sweeps and drains the legacy
// queues.
const RoleMaintenance = "maintenance"

// QueueRole names the worker role whose processes serve queue: the name up
// to its first dot; the legacy queues are the maintenance role's.
func QueueRole(queue string) string {
	if slices.Contains(LegacyQueues, queue) {
		return RoleMaintenance
	}
	role, _, _ := strings.Cut(queue, ".")
	return role
}

// Task types.
const (
	// TypeDispatch runs due scheduled sends in batches (engine.Runner.Dispatch).
	TypeDispatch = "sequences:dispatch"
	// TypeScheduledSend runs one scheduled send: the timer of earlier
	// versions, still served for tasks they queued.
	TypeScheduledSend  = "sequence:send"
	TypeScheduledSweep = "sequences:sweep"
	TypeScheduledPrune = "sequences:prune"
	TypeWebhookBatch   = "webhook:batch"
	TypeWebhookSweep   = "webhooks:sweep"
	// TypeWebhookUnpark applies parked provider events whose send's
	// record has come (on the webhooks role); the webhook sweep queues it.
	TypeWebhookUnpark = "webhooks:unpark"
	// TypeDomainSweep (maintenance) queues TypeDomainCheck when a domain's
	// periodic check is due; TypeDomainCheck (domains role) checks the due
	// domains.
	TypeDomainSweep = "domains:sweep"
	TypeDomainCheck = "domains:check"
	// TypeSendingSweep settles in doubt the transactional send records
	// whose process died waiting for the provider.
	TypeSendingSweep = "sends:sweep-sending"
	// TypeBroadcastStart starts a broadcast whose time has come: the
	// audience snapshot (broadcasts.Store.Start). Its recipients are
	// dispatched by TypeDispatch with the sequence sends.
	TypeBroadcastStart = "broadcasts:start"
	// TypeBroadcastWinner picks an A/B broadcast's automatic winner once
	// its waitFor has passed and releases the rest of the audience to it
	// (broadcasts.Store.PickDue); the scheduled sweep picks whatever is
	// due should the task be lost.
	TypeBroadcastWinner = "broadcasts:winner"
	// TypeOutboundDeliver posts due outbound webhook deliveries
	// (outbound.Deliverer) until none is left; TypeOutboundSweep queues it
	// whenever one is due (a NOTIFY lost, a retry time come) and prunes
	// deliveries past their 30 days.
	TypeOutboundDeliver = "webhooks:deliver"
	TypeOutboundSweep   = "webhooks:outbound-sweep"
	// TypeIdempotencySweep deletes Idempotency-Key records past their 24
	// hours.
	TypeIdempotencySweep = "maintenance:idempotency-keys"
	// TypeEventsArchive archives events past their tenant's retention
	// (retention.Archiver), every RETENTION_INTERVAL.
	TypeEventsArchive = "maintenance:events-archive"
	// TypeContactImport processes a staged contact import
	// (contacts.Imports.Run); TypeContactImportSweep queues it again for a
	// running import that stopped moving (the task was lost or died).
	TypeContactImport      = "contacts:import"
	TypeContactImportSweep = "contacts:import-sweep"
	// TypeSegmentCompute computes one segment (segments.Store.Compute, at
	// most once per SEGMENT_COMPUTE_INTERVAL) on the segments role, away
	// from the sends.
	TypeSegmentCompute = "segments:compute"
)

// SegmentComputeTimeout bounds one segment compute: a tenant of millions
// of contacts is one statement of minutes.
const SegmentComputeTimeout = 15 * time.Minute

// SegmentPayload is the payload of TypeSegmentCompute.
type SegmentPayload struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"segmentId"`
}

// ImportTimeout bounds one contact import task; one that runs out goes on
// where it stopped (the next run, or the sweep's).
const ImportTimeout = 30 * time.Minute

// ImportPayload is the payload of TypeContactImport.
type ImportPayload struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"importId"`
}

// ImportTaskID is the task id of an import, so it is queued at most once
// at a time however often the api or the sweep enqueues it.
func ImportTaskID(tenantID, id string) string { return "import:" + tenantID + ":" + id }

// SendTimeout bounds one scheduled-send task.
const SendTimeout = time.Minute

// DispatchTimeout bounds one dispatch task: a few batches, each bounded
// by PROVIDER_TIMEOUT and its writes.
const DispatchTimeout = 2 * time.Minute

// Webhook batch tasks are retried by asynq (the batch is applied
// idempotently); the sweep frees the id of one that ran out of retries.
const (
	WebhookMaxRetry = 10
	WebhookTimeout  = 2 * time.Minute
)

// Timer is a scheduled send to hand to the queue once the transaction that
// wrote its row has committed.
type Timer struct {
	TenantID string
	ID       string
	At       time.Time
}

// ScheduledPayload is the payload of TypeScheduledSend.
type ScheduledPayload struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"scheduledSendId"`
}

// BroadcastPayload is the payload of TypeBroadcastStart.
type BroadcastPayload struct {
	TenantID string `json:"tenantId"`
	ID       string `json:"broadcastId"`
}

// WebhookPayload is the payload of TypeWebhookBatch.
type WebhookPayload struct {
	BatchID int64 `json:"batchId"`
}

// WebhookTaskID is the task id of a batch, so a batch is queued at most
// once at a time however often the api or the sweep enqueues it.
func WebhookTaskID(batchID int64) string { return fmt.Sprintf("webhook:%d", batchID) }

// Client enqueues tasks. A nil *Client enqueues nothing (tests and tools
// that leave everything to the sweeps). Safe for concurrent use.
type Client struct {
	c   *asynq.Client
	ins *asynq.Inspector
	rdb redis.UniversalClient // repairs asynq's set of queues (TaskInfo)
	log *slog.Logger
}

// NewClient wraps an asynq client; ins (may be nil) lets Requeue free the
// id of a task that is dead (archived or completed).
func NewClient(c *asynq.Client, ins *asynq.Inspector, log *slog.Logger) *Client {
	return &Client{c: c, ins: ins, log: log}
}

// WithRedis lets the client put its queues back in asynq's set of queues
// after a Redis flush (TaskInfo); rdb is the Redis the tasks live in.
func (c *Client) WithRedis(rdb redis.UniversalClient) *Client {
	c.rdb = rdb
	return c
}

// ScheduledSends sets the timers of scheduled sends: a dispatch task at
// each distinct second they are due (task id dispatch:<unix second>, so
// however many sends fall due in one second, one task wakes for them), or
// at once for sends due now. A dispatch claims whatever is due, not only
// these rows. A task already queued for that second is success; other
// failures are logged and left to the sweep: the rows are written, which
// is what matters.
func (c *Client) ScheduledSends(ctx context.Context, timers []Timer) {
	if c == nil || len(timers) == 0 {
		return
	}
	now := time.Now()
	seen := map[int64]bool{}
	for _, t := range timers {
		// asynq keeps process times in whole seconds and releases a task
		// once its second has begun: wake at the second after the due time.
		sec := t.At.Truncate(time.Second)
		if sec.Before(t.At) {
			sec = sec.Add(time.Second)
		}
		if seen[sec.Unix()] {
			continue
		}
		seen[sec.Unix()] = true
		var err error
		if !sec.After(now) {
			// Due now: no id, so a dispatch already running (past its last
			// claim) cannot swallow this wake-up.
			err = c.enqueue(ctx, dispatchTask(now, ""))
		} else {
			err = ignoreConflict(c.enqueue(ctx, dispatchTask(sec, fmt.Sprintf("dispatch:%d", sec.Unix()))))
		}
		if err != nil {
			c.log.Warn("scheduled send timer not set; the sweep will", "scheduled_send_id", t.ID, "err", err)
		}
	}
}

// FanOut makes sure n dispatch tasks (ids dispatch:fan:0..n-1) are queued
// or running, so a backlog is drained by every worker slot of every
// process; an id still held by a dead task is freed. It returns how many
// it queued.
func (c *Client) FanOut(ctx context.Context, n int) (int, error) {
	queued := 0
	for i := range n {
		ok, err := c.requeue(ctx, dispatchTask(time.Now(), fmt.Sprintf("dispatch:fan:%d", i)))
		if err != nil {
			return queued, err
		}
		if ok {
			queued++
		}
	}
	return queued, nil
}

// BroadcastStart sets the timer of a broadcast's start at at (now when it
// has passed), one task per broadcast and instant; a failure is logged and
// left to the sweep, which starts whatever is due.
func (c *Client) BroadcastStart(ctx context.Context, tenantID, id string, at time.Time) {
	if c == nil {
		return
	}
	payload, _ := json.Marshal(BroadcastPayload{TenantID: tenantID, ID: id})
	t := task{t: asynq.NewTask(TypeBroadcastStart, payload, asynq.ProcessAt(at), asynq.MaxRetry(3),
		asynq.Timeout(DispatchTimeout)), id: fmt.Sprintf("broadcast:%s:%s:%d", tenantID, id, at.Unix()), queue: QueueSends}
	if err := ignoreConflict(c.enqueue(ctx, t)); err != nil {
		c.log.Warn("broadcast start timer not set; the sweep will", "tenant_id", tenantID, "broadcast_id", id, "err", err)
	}
}

// BroadcastWinner sets the timer of an A/B broadcast's automatic winner
// at at, one task per broadcast; a failure is logged and left to the
// sweep, which picks every winner that is due.
func (c *Client) BroadcastWinner(ctx context.Context, tenantID, id string, at time.Time) {
	if c == nil {
		return
	}
	payload, _ := json.Marshal(BroadcastPayload{TenantID: tenantID, ID: id})
	t := task{t: asynq.NewTask(TypeBroadcastWinner, payload, asynq.ProcessAt(at), asynq.MaxRetry(3),
		asynq.Timeout(DispatchTimeout)), id: fmt.Sprintf("broadcast-winner:%s:%s", tenantID, id), queue: QueueSends}
	if err := ignoreConflict(c.enqueue(ctx, t)); err != nil {
		c.log.Warn("broadcast winner timer not set; the sweep will", "tenant_id", tenantID, "broadcast_id", id, "err", err)
	}
}

// OutboundDeliver wakes the outbound webhook deliverer: one task per
// second however many facts wake it (a running one loops until nothing is
// due); a failure is left to the sweep.
func (c *Client) OutboundDeliver(ctx context.Context) {
	if c == nil {
		return
	}
	sec := time.Now().Unix()
	t := task{t: asynq.NewTask(TypeOutboundDeliver, nil, asynq.MaxRetry(0), asynq.Timeout(DispatchTimeout),
		asynq.Retention(time.Minute)), id: fmt.Sprintf("whout:%d", sec), queue: QueueWebhooksOutbound}
	if err := ignoreConflict(c.enqueue(ctx, t)); err != nil {
		c.log.Warn("outbound webhook delivery not queued; the sweep will", "err", err)
	}
}

// ContactImport queues the task of a staged import; a failure is logged
// and left to the import sweep.
func (c *Client) ContactImport(ctx context.Context, tenantID, id string) {
	if c == nil {
		return
	}
	if err := ignoreConflict(c.enqueue(ctx, importTask(tenantID, id))); err != nil {
		c.log.Warn("contact import staged but not enqueued; the sweep will", "tenant_id", tenantID, "import_id", id, "err", err)
	}
}

// SegmentCompute queues a compute of one segment, at most one waiting per
// segment (task id segment:<tenant>:<segment>): a compute asked for while
// one waits is the waiting one. It reports whether it queued a task.
func (c *Client) SegmentCompute(ctx context.Context, tenantID, id string) (bool, error) {
	payload, _ := json.Marshal(SegmentPayload{TenantID: tenantID, ID: id})
	return c.requeue(ctx, task{t: asynq.NewTask(TypeSegmentCompute, payload, asynq.MaxRetry(3),
		asynq.Timeout(SegmentComputeTimeout)), id: "segment:" + tenantID + ":" + id, queue: QueueSegments})
}

// RequeueBroadcastStart is the scheduled sweep's start of a due broadcast
// whose own start task was lost or died: a TypeBroadcastStart on the sends
// role, at most one waiting per broadcast (task id
// broadcast:<tenant>:<id>:sweep; an id a dead task holds is freed). A
// start that runs twice starts once (broadcasts.Store.Start). It reports
// whether it queued a task.
func (c *Client) RequeueBroadcastStart(ctx context.Context, tenantID, id string) (bool, error) {
	payload, _ := json.Marshal(BroadcastPayload{TenantID: tenantID, ID: id})
	return c.requeue(ctx, task{t: asynq.NewTask(TypeBroadcastStart, payload, asynq.MaxRetry(3),
		asynq.Timeout(DispatchTimeout)), id: "broadcast:" + tenantID + ":" + id + ":sweep", queue: QueueSends})
}

// DomainCheckTimeout bounds one TypeDomainCheck: it takes no new domain
// near it, and the rest stay due for the next.
const DomainCheckTimeout = 50 * time.Second

// DomainCheck queues the check of the due domains on the domains role, at
// most one waiting or running (task id domains:check); it reports whether
// it queued a task.
func (c *Client) DomainCheck(ctx context.Context) (bool, error) {
	return c.requeue(ctx, task{t: asynq.NewTask(TypeDomainCheck, nil, asynq.MaxRetry(0),
		asynq.Timeout(DomainCheckTimeout)), id: "domains:check", queue: QueueDomains})
}

// WebhookUnparkTimeout bounds one TypeWebhookUnpark.
const WebhookUnparkTimeout = 50 * time.Second

// WebhookUnpark queues the application of parked provider events on the
// webhooks role, at most one waiting or running (task id
// webhooks:unpark); it reports whether it queued a task.
func (c *Client) WebhookUnpark(ctx context.Context) (bool, error) {
	return c.requeue(ctx, task{t: asynq.NewTask(TypeWebhookUnpark, nil, asynq.MaxRetry(0),
		asynq.Timeout(WebhookUnparkTimeout)), id: "webhooks:unpark", queue: QueueWebhooks})
}

// RequeueContactImport is the sweep's enqueue of a running import; it
// reports whether it queued a task.
func (c *Client) RequeueContactImport(ctx context.Context, tenantID, id string) (bool, error) {
	return c.requeue(ctx, importTask(tenantID, id))
}

func importTask(tenantID, id string) task {
	payload, _ := json.Marshal(ImportPayload{TenantID: tenantID, ID: id})
	return task{t: asynq.NewTask(TypeContactImport, payload, asynq.MaxRetry(3), asynq.Timeout(ImportTimeout)),
		id: ImportTaskID(tenantID, id), queue: QueueImports}
}

// WebhookBatch enqueues the task that applies a stored webhook batch; a
// failure is logged and left to the webhook sweep.
func (c *Client) WebhookBatch(ctx context.Context, batchID int64) {
	if c == nil {
		return
	}
	if err := ignoreConflict(c.enqueue(ctx, webhookTask(batchID))); err != nil {
		c.log.Warn("webhook batch stored but not enqueued; the sweep will", "batch_id", batchID, "err", err)
	}
}

// RequeueWebhookBatch is the sweep's enqueue of a stored batch; it reports
// whether it queued a task.
func (c *Client) RequeueWebhookBatch(ctx context.Context, batchID int64) (bool, error) {
	return c.requeue(ctx, webhookTask(batchID))
}

// Periodic enqueues a periodic task under the id of its period; a conflict
// (another process enqueued this period) reports false, nil.
func (c *Client) Periodic(ctx context.Context, t *asynq.Task, id, queue string, retention time.Duration) (bool, error) {
	_, err := c.c.EnqueueContext(ctx, t, asynq.TaskID(id), asynq.Queue(queue), asynq.Retention(retention))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return false, nil
	}
	return err == nil, err
}

type task struct {
	t     *asynq.Task
	id    string
	queue string
}

func dispatchTask(at time.Time, id string) task {
	return task{t: asynq.NewTask(TypeDispatch, nil, asynq.ProcessAt(at), asynq.MaxRetry(0),
		asynq.Timeout(DispatchTimeout)), id: id, queue: QueueSends}
}

func webhookTask(batchID int64) task {
	payload, _ := json.Marshal(WebhookPayload{BatchID: batchID})
	return task{t: asynq.NewTask(TypeWebhookBatch, payload, asynq.MaxRetry(WebhookMaxRetry),
		asynq.Timeout(WebhookTimeout)), id: WebhookTaskID(batchID), queue: QueueWebhooks}
}

func (c *Client) enqueue(ctx context.Context, t task) error {
	opts := []asynq.Option{asynq.Queue(t.queue)}
	if t.id != "" {
		opts = append(opts, asynq.TaskID(t.id))
	}
	_, err := c.c.EnqueueContext(ctx, t.t, opts...)
	return err
}

// requeue enqueues t, and frees a task id that a dead task still holds. A
// task whose worker was killed (MaxRetry 0), or that ran out of retries,
// is archived by asynq, and an archived task keeps its id: without this
// the row's new task would be refused as a duplicate until the archive is
// trimmed, months later, and the sweep would "re-enqueue" it forever.
func (c *Client) requeue(ctx context.Context, t task) (bool, error) {
	if c == nil {
		return false, nil
	}
	err := c.enqueue(ctx, t)
	if !errors.Is(err, asynq.ErrTaskIDConflict) {
		return err == nil, err
	}
	if c.ins == nil {
		return false, nil
	}
	info, err := TaskInfo(ctx, c.ins, c.rdb, t.queue, t.id)
	switch {
	case errors.Is(err, asynq.ErrTaskNotFound):
	case err != nil:
		return false, err
	case info.State != asynq.TaskStateArchived && info.State != asynq.TaskStateCompleted:
		return false, nil // waiting or running: it will do the work
	default:
		if err := c.ins.DeleteTask(t.queue, t.id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return false, err
		}
	}
	err = c.enqueue(ctx, t)
	return err == nil, ignoreConflict(err)
}

func ignoreConflict(err error) error {
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	return err
}
