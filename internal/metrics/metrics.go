// Package metrics keeps the engagement counters of API.md ("Metrics
// counters") and ADDENDUM section 11: what is counted, per tenant per UTC
// day and per sequence and template per UTC month, and how the counts are
// read back (GET /api/metrics...).
//
// Counting is exact because it happens in the transaction of the fact it
// counts: Count is called inside the transaction that records a send, writes
// or cancels a scheduled send, or moves a send's outcome, so a fact that
// commits is counted once and a fact that rolls back (a duplicate webhook
// event, a lost race, a crash) is not counted at all. There is no second
// write to lose and nothing to reconcile.
//
// The counters live in metric_counts (schema 0011), sharded 16 ways by
// transaction id so that concurrent sends of one tenant do not queue on one
// row lock; reads sum the shards (docs/decisions.md "Metrics").
package metrics

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"
)

// Counts are the counters one fact moves, or a sum of them. bounced is
// BouncedHard + BouncedSoft and replied is always 0 (no inbound mail yet),
// so neither is kept.
type Counts struct {
	// Scheduled counts scheduled sends written (a leading send step
	// included), Sent the send records, Cancelled the scheduled sends that
	// moved to cancelled.
	Scheduled, Sent, Cancelled int64
	// Delivered, BouncedHard, BouncedSoft and Complained count a send's
	// status moves, as its email.delivered, email.bounced and
	// email.complained events do.
	Delivered, BouncedHard, BouncedSoft, Complained int64
	// Opened and Clicked count a send's first open and first click.
	Opened, Clicked int64
	// Unsubscribed counts unsubscribes a message caused (its link, its
	// one-click header, the provider's unsubscribe event); only a
	// broadcast's stats show it.
	Unsubscribed int64
	// MachineOpened and MachineClicked count the opens and clicks of
	// machines (mail scanners, prefetchers: ADDENDUM 17), which Opened and
	// Clicked leave out.
	MachineOpened, MachineClicked int64
}

// Bounced is hard plus soft bounces.
func (c Counts) Bounced() int64 { return c.BouncedHard + c.BouncedSoft }

func (c Counts) zero() bool { return c == Counts{} }

func (c *Counts) add(o Counts) {
	c.Scheduled += o.Scheduled
	c.Sent += o.Sent
	c.Cancelled += o.Cancelled
	c.Delivered += o.Delivered
	c.BouncedHard += o.BouncedHard
	c.BouncedSoft += o.BouncedSoft
	c.Complained += o.Complained
	c.Opened += o.Opened
	c.Clicked += o.Clicked
	c.Unsubscribed += o.Unsubscribed
	c.MachineOpened += o.MachineOpened
	c.MachineClicked += o.MachineClicked
}

// Fact is one thing that happened to count: its tenant, the template and
// sequence it belongs to, when it happened and what it counts.
type Fact struct {
	TenantID string
	// TemplateID counts the fact for the template too; SequenceID (empty
	// for a transactional send) for the sequence.
	TemplateID, SequenceID string
	// BroadcastID counts it for the broadcast too (its stats).
	BroadcastID string
	// At is when it happened, which decides its UTC day and month; zero
	// means the transaction's now() (a scheduled send cancelled by the
	// statement before, whose finished_at is that now()).
	At time.Time
	Counts
}

// off is the process-wide switch of Disable.
var off atomic.Bool

// Disable turns counting off for the whole process until the returned
// function turns it on again. It exists for the send benchmark, which
// measures what counting costs; nothing in the product calls it.
func Disable() (enable func()) {
	off.Store(true)
	return func() { off.Store(false) }
}

// Enabled reports whether counting is on (Disable). Facts counted inside
// another statement (the send record's: queries.SendInsert) ask it.
func Enabled() bool { return !off.Load() }

// addRow is one row of queries.MetricsAdd.
type addRow struct {
	TenantID     string     `json:"tenant_id"`
	Scope        string     `json:"scope"`
	ScopeID      string     `json:"scope_id"`
	At           *time.Time `json:"at,omitempty"`
	Scheduled    int64      `json:"scheduled,omitempty"`
	Sent         int64      `json:"sent,omitempty"`
	Cancelled    int64      `json:"cancelled,omitempty"`
	Delivered    int64      `json:"delivered,omitempty"`
	BouncedHard  int64      `json:"bounced_hard,omitempty"`
	BouncedSoft  int64      `json:"bounced_soft,omitempty"`
	Complained   int64      `json:"complained,omitempty"`
	Opened       int64      `json:"opened,omitempty"`
	Clicked      int64      `json:"clicked,omitempty"`
	Unsubscribed int64      `json:"unsubscribed,omitempty"`
	// machine_* are the opens and clicks of machines.
	MachineOpened  int64 `json:"machine_opened,omitempty"`
	MachineClicked int64 `json:"machine_clicked,omitempty"`
}

// Scopes of a counter row (schema 0011).
const (
	scopeTenant   = "tenant"
	scopeSequence = string(ScopeSequence)
	scopeTemplate = string(ScopeTemplate)
	// scopeBroadcast rows are per UTC month too; a broadcast's stats sum
	// its rows over every month.
	scopeBroadcast = "broadcast"
)

// Scope names the objects whose monthly counters ScopedOne and ScopedList
// read; its value is the counter rows' scope.
type Scope string

// The scopes of the scoped reads.
const (
	ScopeSequence Scope = "sequence"
	ScopeTemplate Scope = "template"
)

// Adder is what counting needs of the caller's transaction: the generated
// queries, alone or inside a store.Tx.
type Adder interface {
	MetricsAdd(ctx context.Context, rows json.RawMessage) error
}

// Count adds the facts to the counters inside the caller's transaction q:
// each fact to its tenant's UTC day and, when it names them, to its
// template's and sequence's UTC month. All of them are one statement, so
// counting costs one round trip whatever the number of facts and scopes.
// Call it in the transaction that writes the fact, after the write that
// decides whether the fact happened (an update that changed a row), and
// preferably last in it: the counter rows stay locked until the commit.
func Count(ctx context.Context, q Adder, facts ...Fact) error {
	if off.Load() {
		return nil
	}
	// The facts are summed per counter row first: a batch of 250
	// enrolments is 750 facts' worth of scopes but a handful of rows, and
	// the statement's cost follows the rows it parses.
	type rowKey struct {
		tenant, scope, scopeID string
		// period is the UTC day (tenant scope) or month of At, as the
		// statement computes it; "" for the transaction's now().
		period string
	}
	type sum struct {
		at *time.Time
		Counts
	}
	sums := make(map[rowKey]*sum, 4)
	var order []rowKey
	add := func(f Fact, scope, scopeID string) {
		k := rowKey{tenant: f.TenantID, scope: scope, scopeID: scopeID}
		var at *time.Time
		if !f.At.IsZero() {
			t := f.At.UTC()
			at = &t
			if scope == scopeTenant {
				k.period = t.Format(DateLayout)
			} else {
				k.period = t.Format(MonthLayout)
			}
		}
		if s, ok := sums[k]; ok {
			s.add(f.Counts)
			return
		}
		sums[k] = &sum{at: at, Counts: f.Counts}
		order = append(order, k)
	}
	for _, f := range facts {
		if f.zero() {
			continue
		}
		add(f, scopeTenant, "")
		if f.TemplateID != "" {
			add(f, scopeTemplate, f.TemplateID)
		}
		if f.SequenceID != "" {
			add(f, scopeSequence, f.SequenceID)
		}
		if f.BroadcastID != "" {
			add(f, scopeBroadcast, f.BroadcastID)
		}
	}
	if len(order) == 0 {
		return nil
	}
	rows := make([]addRow, len(order))
	for i, k := range order {
		s := sums[k]
		rows[i] = addRow{TenantID: k.tenant, Scope: k.scope, ScopeID: k.scopeID, At: s.at,
			Scheduled: s.Scheduled, Sent: s.Sent, Cancelled: s.Cancelled, Delivered: s.Delivered,
			BouncedHard: s.BouncedHard, BouncedSoft: s.BouncedSoft, Complained: s.Complained,
			Opened: s.Opened, Clicked: s.Clicked, Unsubscribed: s.Unsubscribed,
			MachineOpened: s.MachineOpened, MachineClicked: s.MachineClicked}
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	return q.MetricsAdd(ctx, b)
}

// Cancelled is the fact of a scheduled send of the sequence and template
// moving to cancelled at at (zero: the transaction's now()).
func Cancelled(tenantID, sequenceID, templateID string, at time.Time) Fact {
	return Fact{TenantID: tenantID, SequenceID: sequenceID, TemplateID: templateID, At: at,
		Counts: Counts{Cancelled: 1}}
}

// cancelledRow is what the scheduled-send cancel statements return of each
// row they cancelled (queries.ScheduledSendCancelBy*Row).
type cancelledRow = struct {
	SequenceID string
	TemplateID string
	FinishedAt *time.Time
}

// CountCancelled counts the scheduled sends of tenantID that a cancel
// statement of the same transaction returned: only rows that really moved
// to cancelled, so cancelling twice counts once.
func CountCancelled[R ~cancelledRow](ctx context.Context, q Adder, tenantID string, rows []R) error {
	facts := make([]Fact, len(rows))
	for i, row := range rows {
		r := cancelledRow(row) // generic code reads no fields of R itself
		var at time.Time
		if r.FinishedAt != nil {
			at = *r.FinishedAt
		}
		facts[i] = Cancelled(tenantID, r.SequenceID, r.TemplateID, at)
	}
	return Count(ctx, q, facts...)
}
