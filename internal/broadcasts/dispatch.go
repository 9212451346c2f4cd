package broadcasts

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"tidings/internal/delivery"
	"tidings/internal/provider"
	"tidings/internal/sequences/engine"
	"tidings/internal/store"
	"tidings/internal/tasks"
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
// ledger (delivery.Sender.SendStepsWith): claim in one statement, re-check,
// record every message before the provider is called, and move each
// recipient with its record in the ledger's own transactions: `sent` with
// the record, back to failed or queued with its deletion after a refusal
// (ADDENDUM 19). A recipient's failure or conflict is its own.
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

// finishRow is one row of BroadcastFinish's and BroadcastRefused's JSON.
// ClaimedAt names the claim that moves the row (BroadcastFinish), SendID
// the record (BroadcastRefused, and a sent recipient's record).
type finishRow struct {
	TenantID     string     `json:"tenant_id"`
	BroadcastID  string     `json:"broadcast_id"`
	ContactID    string     `json:"contact_id"`
	ClaimedAt    *time.Time `json:"claimed_at"`
	Status       string     `json:"status"`
	SkipReason   *string    `json:"skip_reason"`
	SendID       *string    `json:"send_id"`
	LastError    *string    `json:"last_error"`
	ScheduledFor *time.Time `json:"scheduled_for"`
	HeldBy       *string    `json:"held_by"`
}

func rowOf(r queries.BroadcastRecipient, status string) finishRow {
	return finishRow{TenantID: r.TenantID, BroadcastID: r.BroadcastID, ContactID: r.ContactID,
		ClaimedAt: r.ClaimedAt, Status: status}
}

// Counts is what a dispatch did with the recipients it claimed.
type Counts struct {
	Claimed, Sent, Skipped, Failed, Retry, Held int
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
		done = append(done, rowOf(r, status))
		return &done[len(done)-1]
	}

	// A recipient whose message has its record (an earlier attempt left
	// it) is settled from it: the record may be in doubt, never sent again.
	var live, recorded []queries.BroadcastRecipient
	var recordIDs []string
	for _, c := range claimed {
		if c.SentID == "" {
			live = append(live, c.BroadcastRecipient)
		} else {
			recorded, recordIDs = append(recorded, c.BroadcastRecipient), append(recordIDs, c.SentID)
		}
	}

	steps, stepRows, err := d.check(ctx, live, finish, &n)
	if err != nil {
		return n, err // the claims lapse and are taken again
	}
	var notRecorded error
	wake := map[time.Time]bool{} // the seconds in which holds end
	if len(steps) > 0 {
		results := d.Sender.SendStepsWith(ctx, steps, d.Parallel, delivery.BatchHooks{
			Recorded: func(ctx context.Context, q *store.Tx, rec []delivery.Recorded) ([]int, error) {
				return d.recorded(ctx, q, stepRows, rec)
			},
			Refused: func(ctx context.Context, q *store.Tx, refused []delivery.Refused) error {
				return d.refused(ctx, q, stepRows, refused)
			},
		})
		var exists []queries.BroadcastRecipient
		for i, res := range results {
			r := stepRows[i]
			switch {
			case res.Err == nil || delivery.IsInDoubt(res.Err):
				n.Sent++ // `sent` since its record was written
			case errors.Is(res.Err, delivery.ErrWithdrawn):
				// Cancelled or taken over by another claim before its
				// record: nothing left, and its row is not this claim's.
			case errors.Is(res.Err, delivery.ErrRecordExists):
				exists = append(exists, r)
			case errors.Is(res.Err, delivery.ErrNotRecorded):
				// The database failed: nothing sent; the claims lapse and
				// are taken again.
				notRecorded = res.Err
			case isHeld(res.Err):
				// Its destination's throttle or its domain's warm-up: no
				// record, nothing sent; it stays queued, due when the hold
				// ends, and its claim was no attempt.
				h, _ := delivery.IsHeld(res.Err)
				n.Held++
				row := finish(r, RecipientQueued)
				row.ScheduledFor, row.HeldBy = &h.Until, &h.By
				wake[h.Until.Truncate(time.Second)] = true
			case isCapped(res.Err):
				// Over the frequency cap: no record, nothing sent; a
				// broadcast does not wait (ADDENDUM 17).
				n.Skipped++
				reason := SkipFrequencyCapped
				finish(r, RecipientSkipped).SkipReason = &reason
			case res.SendID != "":
				// Refused after its record: moved with the record's
				// deletion (refused).
				if d.retry(r, res.Err) {
					n.Retry++
				} else {
					n.Failed++
				}
			case d.retry(r, res.Err):
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
		if len(exists) > 0 {
			ids, err := d.recordsOf(ctx, exists)
			if err != nil {
				return n, err // the claims lapse and are taken again
			}
			for k, r := range exists {
				if ids[k] != "" {
					recorded, recordIDs = append(recorded, r), append(recordIDs, ids[k])
				}
			}
		}
	}
	for k, r := range recorded {
		if err := d.Sender.SettleInDoubt(ctx, r.TenantID, recordIDs[k], nil); err != nil {
			d.Log.Warn("broadcast recipient's record not settled; retried at its next claim", "err", err,
				"tenant_id", r.TenantID, "send_id", recordIDs[k])
			continue
		}
		id := recordIDs[k]
		finish(r, RecipientSent).SendID = &id
		n.Sent++
	}
	if len(done) > 0 {
		err := d.DB.InTx(ctx, func(q *store.Tx) error {
			if _, err := d.finish(ctx, q.Queries, done); err != nil {
				return err
			}
			// The held recipients' dispatch wakes in each second a hold
			// ends (one task a second however many), not at the next sweep.
			for at := range wake {
				q.Schedule(tasks.Timer{TenantID: claimed[0].BroadcastRecipient.TenantID, At: at.Add(time.Second)})
			}
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	d.complete(ctx, claimed)
	return n, notRecorded
}

// retry says whether the recipient's failure is tried again: a temporary
// one while attempts are left.
func (d *Dispatcher) retry(r queries.BroadcastRecipient, err error) bool {
	return provider.IsTemporary(err) && int(r.Attempts) < d.MaxAttempts
}

// recordRow is one row of BroadcastRecord's JSON.
type recordRow struct {
	TenantID    string     `json:"tenant_id"`
	BroadcastID string     `json:"broadcast_id"`
	ContactID   string     `json:"contact_id"`
	ClaimedAt   *time.Time `json:"claimed_at"`
	SendID      string     `json:"send_id"`
}

// recorded runs in the transaction that wrote the batch's records: the
// recipients still held by this claim are `sent` with them from now; the
// others (cancelled, or taken over by another claim) withdraw theirs.
func (d *Dispatcher) recorded(ctx context.Context, q *store.Tx, rows []queries.BroadcastRecipient, rec []delivery.Recorded) ([]int, error) {
	batch := make([]recordRow, len(rec))
	for k, x := range rec {
		r := rows[x.Index]
		batch[k] = recordRow{TenantID: r.TenantID, BroadcastID: r.BroadcastID, ContactID: r.ContactID,
			ClaimedAt: r.ClaimedAt, SendID: x.SendID}
	}
	b, err := json.Marshal(batch)
	if err != nil {
		return nil, err
	}
	moved, err := q.BroadcastRecord(ctx, b)
	if err != nil {
		return nil, err
	}
	held := make(map[string]bool, len(moved))
	for _, id := range moved {
		held[id] = true
	}
	var withdraw []int
	for _, x := range rec {
		if !held[x.SendID] {
			withdraw = append(withdraw, x.Index)
		}
	}
	return withdraw, nil
}

// refused runs in the transaction that deleted the refused messages'
// records: their recipients turn failed, or queued again for a temporary
// refusal (cancelled instead on a broadcast cancelled meanwhile: the
// broadcasts are locked first, so a cancel and this move wait for each
// other).
func (d *Dispatcher) refused(ctx context.Context, q *store.Tx, rows []queries.BroadcastRecipient, refused []delivery.Refused) error {
	var lock queries.BroadcastLockSharedParams
	seen := map[[2]string]bool{}
	for _, x := range refused {
		r := rows[x.Index]
		if k := [2]string{r.TenantID, r.BroadcastID}; !seen[k] {
			seen[k] = true
			lock.TenantIds, lock.Ids = append(lock.TenantIds, r.TenantID), append(lock.Ids, r.BroadcastID)
		}
	}
	bs, err := q.BroadcastLockShared(ctx, lock)
	if err != nil {
		return err
	}
	cancelled := map[[2]string]bool{}
	for _, b := range bs {
		cancelled[[2]string{b.TenantID, b.ID}] = b.Status == Cancelled
	}
	batch := make([]finishRow, len(refused))
	for k, x := range refused {
		r := rows[x.Index]
		status := RecipientFailed
		if d.retry(r, x.Err) {
			status = RecipientQueued
			if cancelled[[2]string{r.TenantID, r.BroadcastID}] {
				status = RecipientCancelled
			}
		}
		row := rowOf(r, status)
		id, msg := x.SendID, x.Err.Error()
		row.SendID, row.LastError = &id, &msg
		if status == RecipientQueued {
			at := time.Now().Add(engine.Backoff(int(r.Attempts)))
			row.ScheduledFor = &at
		}
		batch[k] = row
	}
	b, err := json.Marshal(batch)
	if err != nil {
		return err
	}
	_, err = q.BroadcastRefused(ctx, b)
	return err
}

// recordsOf reads the records of recipients whose insert found one: ids[k]
// is rows[k]'s ("" when gone since).
func (d *Dispatcher) recordsOf(ctx context.Context, rows []queries.BroadcastRecipient) ([]string, error) {
	var keys queries.BroadcastRecipientSendsParams
	for _, r := range rows {
		keys.TenantIds = append(keys.TenantIds, r.TenantID)
		keys.BroadcastIds = append(keys.BroadcastIds, r.BroadcastID)
		keys.ContactIds = append(keys.ContactIds, r.ContactID)
	}
	found, err := d.DB.BroadcastRecipientSends(ctx, keys)
	if err != nil {
		return nil, err
	}
	byKey := make(map[[3]string]string, len(found))
	for _, f := range found {
		byKey[[3]string{f.TenantID, f.BroadcastID, f.ContactID}] = f.ID
	}
	ids := make([]string, len(rows))
	for k, r := range rows {
		ids[k] = byKey[[3]string{r.TenantID, r.BroadcastID, r.ContactID}]
	}
	return ids, nil
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
		// An A/B broadcast's rest, once its winner is picked, takes the
		// winner's variant as it is claimed (release).
		if b.WinnerVariantID != nil {
			rest, err := d.DB.BroadcastClaimRest(ctx, queries.BroadcastClaimRestParams{TenantID: b.TenantID, BroadcastID: b.ID,
				VariantID: *b.WinnerVariantID, Lim: int32(limit - len(out))})
			if err != nil {
				return out, err
			}
			for _, r := range rest {
				out = append(out, queries.BroadcastClaimRow(r))
			}
			if len(out) >= limit {
				break
			}
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
		if r.VariantID != nil {
			// An A/B broadcast's recipient gets its variant's template
			// and subject line (ADDENDUM 20).
			if x := ExperimentOf(*b); x != nil {
				if i := x.VariantOf(*r.VariantID); i >= 0 {
					v := x.Variants[i]
					if v.TemplateID != nil {
						st.TemplateID = *v.TemplateID
					}
					st.Subject = deref(v.Subject)
				}
			}
		}
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

// complete marks sent the broadcasts of the claimed recipients whose
// every recipient has ended; run after the commits that moved them.
func (d *Dispatcher) complete(ctx context.Context, claimed []queries.BroadcastClaimRow) {
	seen := map[[2]string]bool{}
	for _, c := range claimed {
		r := c.BroadcastRecipient
		k := [2]string{r.TenantID, r.BroadcastID}
		if seen[k] {
			continue
		}
		seen[k] = true
		if _, err := d.DB.BroadcastComplete(ctx, queries.BroadcastCompleteParams{TenantID: r.TenantID, ID: r.BroadcastID}); err != nil {
			d.Log.Warn("broadcast completion not checked; the sweep will", "err", err, "broadcast_id", r.BroadcastID)
		}
	}
}

func isCapped(err error) bool { _, ok := delivery.IsCapped(err); return ok }
func isHeld(err error) bool   { _, ok := delivery.IsHeld(err); return ok }
