package broadcasts

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"

	"time"

	"tidings/internal/delivery"
	"tidings/internal/provider"
	"tidings/internal/sequences/engine"
	"tidings/internal/store"
	"tidings/internal/templates"
	"tidings/internal/tenants"
	"tidings/internal/topics"
	"tidings/queries"
)

// Skip reasons (ADDENDUM 13), in the order a recipient is checked. The
// list grows with the consent and deliverability rules (topics, frequency
// caps): each is one more case in skipReason.
const (
	SkipContactDeleted  = "contact_deleted"
	SkipSuppressed      = "suppressed"
	SkipUnsubscribed    = "unsubscribed"
	SkipTopicOptOut     = "topic_opt_out"
	SkipNotWhitelisted  = "not_whitelisted"
	SkipFrequencyCapped = "frequency_capped"
)

// skipReason re-checks a recipient just before its message: "" when it
// may be sent. c is nil for a contact deleted since the snapshot; topic is
// the message's topic (nil: none).
func skipReason(c *queries.Contact, t queries.Tenant, topic *queries.Topic) string {
	switch {
	case c == nil:
		return SkipContactDeleted
	case c.Suppressed:
		return SkipSuppressed
	case !c.Subscribed:
		return SkipUnsubscribed
	case topic != nil && !topics.Subscribed(c.Topics, *topic):
		return SkipTopicOptOut
	case tenants.Whitelisted(t, c.Email) != nil:
		return SkipNotWhitelisted
	}
	return ""
}

// Dispatcher sends broadcasts' due recipients in batches through the send
// ledger (delivery.Sender.SendSteps): claim in one statement, re-check,
// record every message before the provider is called, settle, and move the
// recipients with their broadcasts' counters in one statement.
type Dispatcher struct {
	DB     *store.DB
	Sender *delivery.Sender
	// Parallel bounds concurrent provider calls of a batch (0: delivery's
	// default); MaxAttempts is SEND_MAX_ATTEMPTS; ClaimTimeout is
	// SEND_CLAIM_TIMEOUT, after which a claim is taken again.
	Parallel     int
	MaxAttempts  int
	ClaimTimeout time.Duration
	Log          *slog.Logger
}

// DefaultBatch is how many recipients one claim takes.
const DefaultBatch = 100

// finishRow is one row of BroadcastFinish's JSON.
type finishRow struct {
	TenantID     string     `json:"tenant_id"`
	BroadcastID  string     `json:"broadcast_id"`
	ContactID    string     `json:"contact_id"`
	Status       string     `json:"status"`
	SkipReason   *string    `json:"skip_reason"`
	SendID       *string    `json:"send_id"`
	LastError    *string    `json:"last_error"`
	ScheduledFor *time.Time `json:"scheduled_for"`
}

// Counts is what a dispatch did with the recipients it claimed.
type Counts struct {
	Claimed, Sent, Skipped, Failed, Retry int
}

// Dispatch claims up to limit due recipients and runs them as one batch.
func (d *Dispatcher) Dispatch(ctx context.Context, limit int) (Counts, error) {
	var n Counts
	if limit <= 0 {
		limit = DefaultBatch
	}
	claimTimeout := d.ClaimTimeout
	if claimTimeout <= 0 {
		claimTimeout = 5 * time.Minute
	}
	claimed, err := d.claim(ctx, limit, time.Now().Add(-claimTimeout))
	if err != nil || len(claimed) == 0 {
		return n, err
	}
	n.Claimed = len(claimed)
	var done []finishRow
	finish := func(r queries.BroadcastRecipient, status string) *finishRow {
		done = append(done, finishRow{TenantID: r.TenantID, BroadcastID: r.BroadcastID, ContactID: r.ContactID, Status: status})
		return &done[len(done)-1]
	}

	// A recipient whose message has its record (an earlier claim died after
	// writing it) is sent: the record may be in doubt, never sent again.
	var live []queries.BroadcastRecipient
	for _, c := range claimed {
		if c.SentID == "" {
			live = append(live, c.BroadcastRecipient)
			continue
		}
		if err := d.Sender.SettleInDoubt(ctx, c.BroadcastRecipient.TenantID, c.SentID, nil); err != nil {
			d.Log.Warn("broadcast recipient's record not settled; retried at its next claim", "err", err,
				"tenant_id", c.BroadcastRecipient.TenantID, "send_id", c.SentID)
			continue
		}
		id := c.SentID
		finish(c.BroadcastRecipient, RecipientSent).SendID = &id
		n.Sent++
	}

	steps, stepRows, err := d.check(ctx, live, finish, &n)
	if err != nil {
		return n, err // the claims lapse and are taken again
	}
	if len(steps) > 0 {
		// The recipients sent are moved in the transaction that settles
		// their records: no window between "settled" and "sent".
		var settledRows []finishRow
		var touched []queries.BroadcastFinishRow
		results := d.Sender.SendSteps(ctx, steps, d.Parallel, func(ctx context.Context, q *store.Tx, settled []delivery.Settled) error {
			settledRows = settledRows[:0]
			for _, st := range settled {
				r := stepRows[st.Index]
				id := st.SendID
				settledRows = append(settledRows, finishRow{TenantID: r.TenantID, BroadcastID: r.BroadcastID,
					ContactID: r.ContactID, Status: RecipientSent, SendID: &id})
			}
			var err error
			touched, err = d.finish(ctx, q.Queries, settledRows)
			return err
		})
		d.complete(ctx, touched)
		for i, res := range results {
			r := stepRows[i]
			switch {
			case res.Err == nil || delivery.IsInDoubt(res.Err):
				n.Sent++
				if !res.InRecordDone {
					// Settled without its move: the next claim finds the
					// record and moves it.
					continue
				}
			case isCapped(res.Err):
				// Over the frequency cap: no record, nothing sent; a
				// broadcast does not wait (ADDENDUM 17).
				n.Skipped++
				reason := SkipFrequencyCapped
				finish(r, RecipientSkipped).SkipReason = &reason
			case provider.IsTemporary(res.Err) && int(r.Attempts) < d.MaxAttempts:
				n.Retry++
				row := finish(r, RecipientQueued)
				at := time.Now().Add(engine.Backoff(int(r.Attempts)))
				msg := res.Err.Error()
				row.ScheduledFor, row.LastError = &at, &msg
			default:
				n.Failed++
				msg := templates.FailureMessage(res.Err) // partial_missing, missing_variables: ADDENDUM 24
				finish(r, RecipientFailed).LastError = &msg
			}
		}
	}
	if len(done) == 0 {
		return n, nil
	}
	touched, err := d.finish(ctx, d.DB.Queries, done)
	if err != nil {
		return n, err
	}
	d.complete(ctx, touched)
	return n, nil
}

// claim takes up to limit due recipients, broadcast by broadcast, starting
// at a random one so that concurrent dispatchers and tenants share.
func (d *Dispatcher) claim(ctx context.Context, limit int, reclaimBefore time.Time) ([]queries.BroadcastClaimRow, error) {
	bs, err := d.DB.BroadcastsDispatchable(ctx)
	if err != nil || len(bs) == 0 {
		return nil, err
	}
	var out []queries.BroadcastClaimRow
	first := rand.IntN(len(bs))
	for i := range bs {
		b := bs[(first+i)%len(bs)]
		rows, err := d.DB.BroadcastClaim(ctx, queries.BroadcastClaimParams{TenantID: b.TenantID, BroadcastID: b.ID,
			ReclaimBefore: reclaimBefore, Lim: int32(limit - len(out))})
		if err != nil {
			return out, err
		}
		if out = append(out, rows...); len(out) >= limit {
			break
		}
	}
	return out, nil
}

// check reads the batch's contacts and tenants and re-checks each
// recipient: a skipped one is finished with its reason, the others become
// steps (stepRows[i] is steps[i]'s recipient).
func (d *Dispatcher) check(ctx context.Context, live []queries.BroadcastRecipient,
	finish func(queries.BroadcastRecipient, string) *finishRow, n *Counts) ([]delivery.Step, []queries.BroadcastRecipient, error) {
	if len(live) == 0 {
		return nil, nil, nil
	}
	var keys queries.ContactGetManyParams
	for _, r := range live {
		keys.TenantIds = append(keys.TenantIds, r.TenantID)
		keys.Ids = append(keys.Ids, r.ContactID)
	}
	cs, err := d.DB.ContactGetMany(ctx, keys)
	if err != nil {
		return nil, nil, err
	}
	contacts := make(map[[2]string]*queries.Contact, len(cs))
	for i := range cs {
		contacts[[2]string{cs[i].TenantID, cs[i].ID}] = &cs[i]
	}
	tenantRows := map[string]*queries.Tenant{}
	bcasts := map[[2]string]*queries.Broadcast{}
	// The topic of each broadcast's message: its own, else its template's
	// (nil: none).
	bTopics := map[[2]string]*queries.Topic{}
	var steps []delivery.Step
	var stepRows []queries.BroadcastRecipient
	for _, r := range live {
		t := tenantRows[r.TenantID]
		if t == nil {
			row, err := d.DB.TenantGet(ctx, r.TenantID)
			if err != nil {
				return nil, nil, err
			}
			t = &row
			tenantRows[r.TenantID] = t
		}
		bk := [2]string{r.TenantID, r.BroadcastID}
		b := bcasts[bk]
		if b == nil {
			row, err := d.DB.BroadcastGet(ctx, queries.BroadcastGetParams{TenantID: r.TenantID, ID: r.BroadcastID})
			if err != nil {
				return nil, nil, err
			}
			b = &row
			bcasts[bk] = b
			if bTopics[bk], err = topics.OfMessage(ctx, d.DB.Queries, r.TenantID, deref(b.Topic), b.TemplateID); err != nil {
				return nil, nil, err
			}
		}
		c := contacts[[2]string{r.TenantID, r.ContactID}]
		topic := bTopics[bk]
		if reason := skipReason(c, *t, topic); reason != "" {
			finish(r, RecipientSkipped).SkipReason = &reason
			n.Skipped++
			continue
		}
		st := delivery.Step{TenantID: r.TenantID, ContactID: r.ContactID, TemplateID: b.TemplateID,
			BroadcastID: r.BroadcastID, From: deref(b.FromAddress), Tenant: t, Contact: c}
		if topic != nil {
			st.Topic = topic.ID
		}
		steps = append(steps, st)
		stepRows = append(stepRows, r)
	}
	return steps, stepRows, nil
}

// finish moves recipients and their broadcasts' counters in one
// statement, and returns the broadcasts touched (to complete once the
// transaction has committed).
func (d *Dispatcher) finish(ctx context.Context, q *queries.Queries, rows []finishRow) ([]queries.BroadcastFinishRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return nil, err
	}
	return q.BroadcastFinish(ctx, b)
}

// complete marks sent the broadcasts whose every recipient has ended; run
// after the commit that moved them.
func (d *Dispatcher) complete(ctx context.Context, touched []queries.BroadcastFinishRow) {
	seen := map[[2]string]bool{}
	for _, t := range touched {
		k := [2]string{t.TenantID, t.BroadcastID}
		if seen[k] {
			continue
		}
		seen[k] = true
		if _, err := d.DB.BroadcastComplete(ctx, queries.BroadcastCompleteParams{TenantID: t.TenantID, ID: t.BroadcastID}); err != nil {
			d.Log.Warn("broadcast completion not checked; the sweep will", "err", err, "broadcast_id", t.BroadcastID)
		}
	}
}

func isCapped(err error) bool { _, ok := delivery.IsCapped(err); return ok }
