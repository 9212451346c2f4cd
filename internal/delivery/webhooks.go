package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/sendgridevents"
	"tidings/internal/sesevents"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/queries"
)

// ProviderSendGrid names SendGrid's rows in webhook_batches and
// provider_events.
const ProviderSendGrid = "sendgrid"

// ProviderSES names SES's rows: one verified SNS notification each.
const ProviderSES = "ses"

// sesTakeMax is how many waiting SES notifications one task run applies
// together (WebhookBatchTakePending): a transaction per event would cap
// the rate far below SendGrid's batches.
const sesTakeMax = 1000

// Retention of webhook bookkeeping (docs/decisions.md). SendGrid retries an
// unanswered POST for up to 72 hours, so an event id is kept well beyond
// that; an applied batch body is kept for operators to look at.
const (
	DedupRetention = 7 * 24 * time.Hour
	BatchRetention = 3 * 24 * time.Hour
)

// Webhooks keeps and applies the provider's event batches. The HTTP handler
// stores a verified body (Accept) and answers; the worker applies it
// (ApplyBatch). The row is the truth: whatever happens to the queue, a
// stored batch is applied by its task or by the sweep.
type Webhooks struct {
	DB       *store.DB
	Outcomes *Outcomes
	// Tasks enqueues the task that applies a stored batch; nil leaves it
	// to the sweep.
	Tasks *tasks.Client

	// taken remembers the SES rows this process applied with another
	// row's run (applySES), after the commit: their own tasks, most of
	// which run here, then end without a query. A task that runs in
	// another process asks the database (WebhookBatchIsApplied).
	taken takenSet
}

// takenSetMax bounds takenSet: a burst's rows have their tasks run within
// seconds, long before a hundred thousand more are taken.
const takenSetMax = 100_000

// takenSet is a bounded set of row ids; the oldest go first.
type takenSet struct {
	mu   sync.Mutex
	ids  map[int64]struct{}
	ring []int64
	next int
}

func (s *takenSet) add(ids []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids, s.ring = make(map[int64]struct{}, takenSetMax), make([]int64, 0, takenSetMax)
	}
	for _, id := range ids {
		if len(s.ring) < takenSetMax {
			s.ring = append(s.ring, id)
		} else {
			delete(s.ids, s.ring[s.next])
			s.ring[s.next] = id
			s.next = (s.next + 1) % takenSetMax
		}
		s.ids[id] = struct{}{}
	}
}

func (s *takenSet) has(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ids[id]
	return ok
}

// Accept stores a verified SendGrid body, enqueues its task and returns the
// batch id. A failed enqueue is not an error: the row is kept, and the
// sweep enqueues it a minute later, so SendGrid never re-posts what is
// already kept.
func (w *Webhooks) Accept(ctx context.Context, body []byte) (int64, error) {
	return w.AcceptFrom(ctx, ProviderSendGrid, body)
}

// AcceptFrom is Accept for provider's body: ProviderSendGrid's batch, or
// ProviderSES's one verified SNS notification.
func (w *Webhooks) AcceptFrom(ctx context.Context, provider string, body []byte) (int64, error) {
	id, err := w.DB.WebhookBatchInsert(ctx, queries.WebhookBatchInsertParams{Provider: provider, Body: body})
	if err != nil {
		return 0, err
	}
	w.Tasks.WebhookBatch(ctx, id)
	return id, nil
}

// BatchResult is what applying one batch found.
type BatchResult struct {
	Events     int // events in the batch
	Applied    int // applied to a send
	Duplicates int // sg_event_id seen before (in this batch or an earlier one)
	Dropped    int // unknown tenant (and, in batches applied before parking, send)
	Parked     int // send record not visible yet: parked (Unpark)
	Ignored    int // types Tidings does not act on, or not attributable (no ids)
	// OtherProvider: the send's record names another provider than the
	// one whose webhook reported the event; not applied (Outcome.Provider).
	OtherProvider int
	// AlreadyApplied: the batch had been applied before; nothing was done.
	AlreadyApplied bool
	// Unreadable: the body was not a batch of events (kept, marked applied).
	Unreadable error
}

// ApplyBatch applies one stored batch in one transaction: parse it, claim
// the event ids in provider_events (ids already there are duplicates and
// skipped), apply the new events with Outcomes.Apply, and mark the batch
// applied with its counts. Applying a batch again changes nothing. Events
// of unknown tenants or sends are counted and dropped, and a body that does
// not parse is marked applied with nothing done: neither is worth a retry.
// An unknown batch id is a NOT_FOUND.
func (w *Webhooks) ApplyBatch(ctx context.Context, id int64) (BatchResult, error) {
	var res BatchResult
	// Without a query, then without a transaction: most SES runs end in
	// one of the two.
	if w.taken.has(id) {
		return BatchResult{AlreadyApplied: true}, nil
	}
	if done, err := w.DB.WebhookBatchIsApplied(ctx, id); err == nil && done {
		return BatchResult{AlreadyApplied: true}, nil
	}
	err := w.DB.InTx(ctx, func(q *store.Tx) error {
		res = BatchResult{}
		b, err := q.WebhookBatchGetForUpdate(ctx, id)
		if err != nil {
			return apperr.Specific(err, apperr.KindNotFound, apperr.NotFound("NOT_FOUND", "webhook batch"))
		}
		if b.AppliedAt != nil {
			res.AlreadyApplied = true
			return nil
		}
		if b.Provider == ProviderSES {
			return w.applySES(ctx, q, b, &res)
		}
		evs, err := sendgridevents.Parse(b.Body)
		if err != nil {
			res.Unreadable = err
			return q.WebhookBatchMarkApplied(ctx, queries.WebhookBatchMarkAppliedParams{ID: id})
		}
		res.Events = len(evs)
		if err := w.apply(ctx, q, ProviderSendGrid, evs, &res); err != nil {
			return err
		}
		return q.WebhookBatchMarkApplied(ctx, queries.WebhookBatchMarkAppliedParams{ID: id,
			Applied: int32(res.Applied), Duplicates: int32(res.Duplicates), Dropped: int32(res.Dropped + res.Ignored + res.OtherProvider)})
	})
	return res, err
}

// applySES applies one stored SNS notification and up to sesTakeMax
// others still waiting, in the caller's transaction: their events are
// deduplicated by SNS MessageId and applied as one batch. The counts go on
// b's row; the others are marked applied as they are taken.
func (w *Webhooks) applySES(ctx context.Context, q *store.Tx, b queries.WebhookBatch, res *BatchResult) error {
	more, err := q.WebhookBatchTakePending(ctx, queries.WebhookBatchTakePendingParams{Provider: ProviderSES, ID: b.ID, Lim: sesTakeMax - 1})
	if err != nil {
		return err
	}
	evs := make([]sendgridevents.Event, 0, len(more)+1)
	add := func(body []byte) {
		e, err := sesevents.ParseStored(body)
		if err != nil {
			res.Ignored++ // stored verified: cannot happen, and is no reason to retry
			return
		}
		evs = append(evs, sendgridevents.Event{Type: e.Type, Email: e.Email, Timestamp: e.At, EventID: e.EventID,
			MessageID: e.MessageID, Reason: e.Reason, URL: e.URL, SendID: e.SendID, TenantID: e.TenantID,
			Outcome: e.Outcome, IgnoreReason: e.IgnoreReason})
	}
	add(b.Body)
	ids := make([]int64, len(more))
	for i, m := range more {
		add(m.Body)
		ids[i] = m.ID
	}
	q.AfterCommit(func(context.Context) { w.taken.add(ids) })
	res.Events = len(more) + 1
	if err := w.apply(ctx, q, ProviderSES, evs, res); err != nil {
		return err
	}
	return q.WebhookBatchMarkApplied(ctx, queries.WebhookBatchMarkAppliedParams{ID: b.ID,
		Applied: int32(res.Applied), Duplicates: int32(res.Duplicates), Dropped: int32(res.Dropped + res.Ignored + res.OtherProvider)})
}

func (w *Webhooks) apply(ctx context.Context, q *store.Tx, provider string, evs []sendgridevents.Event, res *BatchResult) error {
	first := make(map[string]int, len(evs)) // event id -> index of its first occurrence
	ids := make([]string, 0, len(evs))
	for i, e := range evs {
		if e.Outcome == sendgridevents.Ignored {
			res.Ignored++
			continue
		}
		if _, seen := first[e.EventID]; seen {
			res.Duplicates++
			continue
		}
		first[e.EventID] = i
		ids = append(ids, e.EventID)
	}
	if len(ids) == 0 {
		return nil
	}
	fresh, err := q.ProviderEventClaim(ctx, queries.ProviderEventClaimParams{Provider: provider, EventIds: ids})
	if err != nil {
		return fmt.Errorf("claim event ids: %w", err)
	}
	res.Duplicates += len(ids) - len(fresh)
	outs := make([]Outcome, 0, len(fresh))
	for _, id := range fresh {
		e := evs[first[id]]
		outs = append(outs, Outcome{TenantID: e.TenantID, SendID: e.SendID, Kind: e.Outcome, At: e.Timestamp,
			URL: e.URL, Reason: e.Reason, Email: e.Email, Machine: e.MachineOpen, Provider: provider})
	}
	n, err := w.Outcomes.Apply(ctx, q, outs)
	if err != nil {
		return err
	}
	res.Applied, res.Parked, res.OtherProvider = n.Applied, len(n.Missing), n.OtherProvider
	return w.park(ctx, q, provider, n.Missing, time.Now().Add(ParkFor))
}

// ParkFor is how long an event for a send without a visible record waits
// for it (ADDENDUM 12: "within minutes"). A record is committed before its
// message leaves, so an event can only beat it by a moment (a replica, a
// commit in flight); past this, a bounce, complaint or unsubscribe reaches
// the contact by its address and anything else is dropped.
const ParkFor = 10 * time.Minute

// parkedRow is one row of ProviderEventPark's JSON.
type parkedRow struct {
	TenantID   string    `json:"tenant_id"`
	SendID     string    `json:"send_id"`
	Email      string    `json:"email"`
	Outcome    string    `json:"outcome"`
	OccurredAt time.Time `json:"occurred_at"`
	URL        string    `json:"url"`
	Reason     string    `json:"reason"`
}

func (w *Webhooks) park(ctx context.Context, q *store.Tx, provider string, outs []Outcome, until time.Time) error {
	if len(outs) == 0 {
		return nil
	}
	rows := make([]parkedRow, len(outs))
	for i, o := range outs {
		rows[i] = parkedRow{TenantID: o.TenantID, SendID: o.SendID, Email: o.Email, Outcome: o.Kind.String(),
			OccurredAt: o.At, URL: o.URL, Reason: o.Reason}
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	return q.ProviderEventPark(ctx, queries.ProviderEventParkParams{Provider: provider, Rows: b, ParkedUntil: until})
}

// UnparkResult says what one pass over the parked events did.
type UnparkResult struct {
	// Applied found their record; FellBack reached the contact by its
	// address (no record); Dropped had neither; Parked wait on;
	// OtherProvider found a record another provider sent (not applied).
	Applied, FellBack, Dropped, Parked, OtherProvider int
}

// Unpark applies the parked events whose record has appeared, and those
// past their time: a hard bounce or complaint suppresses, and an
// unsubscribe unsubscribes, the tenant's contact with the event's address
// (a message without a record must not keep mailing a bounced address);
// anything else is dropped. One transaction, at most limit events.
func (w *Webhooks) Unpark(ctx context.Context, now time.Time, limit int32) (UnparkResult, error) {
	var res UnparkResult
	err := w.DB.InTx(ctx, func(q *store.Tx) error {
		res = UnparkResult{}
		rows, err := q.ProviderEventParkedTake(ctx, queries.ProviderEventParkedTakeParams{Now: now, Lim: limit})
		if err != nil || len(rows) == 0 {
			return err
		}
		outs := make([]Outcome, 0, len(rows))
		until := map[[2]string]time.Time{}
		providers := map[[2]string]string{}
		for _, r := range rows {
			kind, ok := sendgridevents.ParseOutcome(r.Outcome)
			if !ok {
				res.Dropped++
				continue
			}
			outs = append(outs, Outcome{TenantID: r.TenantID, SendID: r.SendID, Kind: kind, At: r.OccurredAt,
				URL: r.Url, Reason: r.Reason, Email: r.Email, Provider: r.Provider})
			until[[2]string{r.TenantID, r.SendID}] = r.ParkedUntil
			providers[[2]string{r.TenantID, r.SendID}] = r.Provider
		}
		n, err := w.Outcomes.Apply(ctx, q, outs)
		if err != nil {
			return err
		}
		res.Applied, res.OtherProvider = n.Applied, n.OtherProvider
		for _, o := range n.Missing {
			u := until[[2]string{o.TenantID, o.SendID}]
			if u.After(now) {
				res.Parked++
				if err := w.park(ctx, q, providers[[2]string{o.TenantID, o.SendID}], []Outcome{o}, u); err != nil {
					return err
				}
				continue
			}
			fell, err := w.Outcomes.fallBack(ctx, q, o)
			if err != nil {
				return err
			}
			if fell {
				res.FellBack++
			} else {
				res.Dropped++
			}
		}
		return nil
	})
	return res, err
}

// StaleBatches lists batches still unapplied olderThan after they arrived
// (their task was lost), oldest first, at most limit.
func (w *Webhooks) StaleBatches(ctx context.Context, olderThan time.Duration, limit int32) ([]int64, error) {
	return w.DB.WebhookBatchListStale(ctx, queries.WebhookBatchListStaleParams{Before: time.Now().Add(-olderThan), Lim: limit})
}

// Requeue enqueues the tasks of stale batches again, freeing the id of a
// task that ran out of retries (archived), which would otherwise refuse
// the new task forever; it returns how many it queued.
func (w *Webhooks) Requeue(ctx context.Context, olderThan time.Duration, limit int32) (int, error) {
	stale, err := w.StaleBatches(ctx, olderThan, limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range stale {
		ok, err := w.Tasks.RequeueWebhookBatch(ctx, id)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// Prune forgets event ids older than DedupRetention and applied batches
// older than BatchRetention.
func (w *Webhooks) Prune(ctx context.Context, now time.Time) (ids, batches int64, err error) {
	if ids, err = w.DB.ProviderEventPrune(ctx, now.Add(-DedupRetention)); err != nil {
		return 0, 0, err
	}
	batches, err = w.DB.WebhookBatchPrune(ctx, now.Add(-BatchRetention))
	return ids, batches, err
}
