package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/delivery"
	"tidings/internal/localtime"
	"tidings/internal/metrics"
	"tidings/internal/provider"
	"tidings/internal/sequences/definition"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/internal/templates"
	"tidings/internal/tenants"
	"tidings/internal/topics"
	"tidings/queries"
)

// Outcome is what one run of a scheduled send did.
type Outcome string

// Outcomes of Runner.Run (Outcomes lists them; the worker's metric
// tidings_scheduled_sends_processed_total labels runs by them).
const (
	OutcomeNone      Outcome = "none"      // not claimable: done, cancelled, not due, or another worker has it
	OutcomeSent      Outcome = "sent"      // sent (or found sent by an earlier attempt)
	OutcomeSkipped   Outcome = "skipped"   // step conditions false
	OutcomeHeld      Outcome = "held"      // sequence disabled, or outside its send window: back to pending
	OutcomeCancelled Outcome = "cancelled" // step removed, sequence deleted, enrolment ended
	OutcomeExited    Outcome = "exited"    // gate blocked or exit condition
	OutcomeFailed    Outcome = "failed"    // temporary failure, retried later
	OutcomeDead      Outcome = "dead"      // failed for good
)

// Outcomes are every Outcome, for the metric that counts runs by outcome.
var Outcomes = []Outcome{OutcomeSent, OutcomeSkipped, OutcomeHeld, OutcomeCancelled, OutcomeExited, OutcomeFailed,
	OutcomeDead, OutcomeNone}

// Retry backoff of ADDENDUM section 7.
const (
	RetryBase = 10 * time.Second
	RetryMax  = time.Hour
)

// Backoff is the wait after the attempts-th failed attempt:
// 10 s × 2^(attempts-1), at most an hour.
func Backoff(attempts int) time.Duration {
	if attempts < 1 {
		attempts = 1
	}
	if attempts > 20 {
		return RetryMax
	}
	return min(RetryBase<<(attempts-1), RetryMax)
}

// Runner runs due scheduled sends: the asynq handler's whole work.
type Runner struct {
	DB     *store.DB
	Sender *delivery.Sender
	// MaxAttempts is SEND_MAX_ATTEMPTS: a send failing that often is dead.
	MaxAttempts int
	// Parallel bounds a batch's concurrent provider calls (0: the
	// delivery default).
	Parallel int
	Log      *slog.Logger
	// Now is the clock of send windows; nil means time.Now.
	Now func() time.Time
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// windowOpen is when a step of seq may go out for contact c of tenant t
// from now on: now when its window is open (or it has none), else the
// window's next opening on the contact's clock (ADDENDUM 13).
func windowOpen(seq Sequence, c queries.Contact, t queries.Tenant, now time.Time) time.Time {
	if seq.Def.Window == nil {
		return now
	}
	var props map[string]any
	_ = json.Unmarshal(c.Properties, &props)
	return seq.Def.Window.Next(now, localtime.Zone(props["timezone"], t.Timezone))
}

// Result is what Run did.
type Result struct {
	Outcome Outcome
	Err     error // the send failure of OutcomeFailed and OutcomeDead
}

// Run processes one scheduled send: it claims the row atomically (a
// duplicate task, or a row handled meanwhile, claims nothing) and runs it
// as a batch of one (runClaimed, the pipeline Dispatch runs batches
// through).
func (r *Runner) Run(ctx context.Context, tenantID, id string) (Result, error) {
	claimed, err := r.claim(ctx, tenantID, id)
	if store.IsNoRows(err) || apperr.IsKind(err, apperr.KindNotFound) {
		return Result{Outcome: OutcomeNone}, nil
	}
	if err != nil {
		return Result{}, err
	}
	out := r.runClaimed(ctx, []queries.DispatchClaimRow{queries.DispatchClaimRow(claimed)})
	return out[0].res, out[0].err
}

// EarlyWait is the most a task that arrives before its row is due waits
// for it. asynq keeps a task's process time in whole seconds and moves it
// to its queue once that second has begun, so a send due at 12:00:00.700
// runs from 12:00:00.000 on; without the wait it would claim nothing and
// leave the row to the next sweep, seconds late.
const EarlyWait = 1500 * time.Millisecond

// claim claims the row; a row that is not due yet but will be within
// EarlyWait is waited for and claimed then.
func (r *Runner) claim(ctx context.Context, tenantID, id string) (queries.ScheduledSendClaimRow, error) {
	p := queries.ScheduledSendClaimParams{TenantID: tenantID, ID: id}
	claimed, err := r.DB.ScheduledSendClaim(ctx, p)
	if !store.IsNoRows(err) && !apperr.IsKind(err, apperr.KindNotFound) {
		return claimed, err
	}
	secs, err2 := r.DB.ScheduledSendUntilDue(ctx, queries.ScheduledSendUntilDueParams{TenantID: tenantID, ID: id})
	wait := time.Duration(secs * float64(time.Second))
	if err2 != nil || wait <= 0 || wait > EarlyWait {
		return claimed, err // done, taken, or due later: its own task or the sweep runs it
	}
	select {
	case <-ctx.Done():
		return claimed, ctx.Err()
	case <-time.After(wait):
	}
	return r.DB.ScheduledSendClaim(ctx, p)
}

// quick reads what the checks need in one statement, unlocked, and returns
// the step to send when every check passes, with the sequence read. Any
// other case (nil step) goes to check, which decides under locks.
// x is what DispatchContext read for the row's enrolment (nil: nothing,
// the enrolment is gone).
func (r *Runner) quick(ctx context.Context, row queries.ScheduledSend, x *queries.DispatchContextRow) (*delivery.Step, *Sequence, error) {
	if x == nil {
		return nil, nil, nil
	}
	e := x.Enrolment
	if x.SeqVersion == nil || e.Status != Active || !*x.SeqEnabled || x.Tenant.SendingStatus == tenants.Paused {
		return nil, nil, nil
	}
	seq, err := sequenceOf(row.SequenceID, deref(x.SeqName), true, *x.SeqVersion, x.SeqDefinition)
	if err != nil {
		return nil, nil, err
	}
	idx := seq.Def.StepIndex(row.StepID)
	if idx < 0 || seq.Def.Steps[idx].Kind != definition.KindEmail {
		return nil, nil, nil
	}
	step := seq.Def.Steps[idx]
	if now := r.now(); windowOpen(seq, x.Contact, x.Tenant, now).After(now) {
		return nil, nil, nil // outside the window: check defers it
	}
	evr, err := newEvaluator(ctx, r.DB.Queries, x.Contact, seq.Def, e.EnrolledAt, deref(e.TriggerEventID))
	if err != nil {
		return nil, nil, err
	}
	if d := decide(evr, x.Contact, x.Tenant, seq, step, e.Branch); d.err != nil || d.outcome != WouldSend {
		return nil, nil, d.err
	}
	topic, err := topics.OfMessage(ctx, r.DB.Queries, row.TenantID, seq.Def.Topic, step.Template)
	if err != nil {
		return nil, nil, err
	}
	if topic != nil && !topics.Subscribed(x.Contact.Topics, *topic) {
		return nil, nil, nil // check cancels it topic_opt_out
	}
	st := stepOf(row, seq, step, x.Tenant, x.Contact)
	st.Topic = topicID(topic)
	if x.EventName != nil {
		st.Event = delivery.EventOf(queries.EnrolmentTriggerEventRow{Name: *x.EventName,
			Properties: x.EventProperties, OccurredAt: *x.EventOccurredAt})
	}
	return st, &seq, nil
}

// topicID is the id of a message's topic, "" for none.
func topicID(t *queries.Topic) string {
	if t == nil {
		return ""
	}
	return t.ID
}

func stepOf(row queries.ScheduledSend, seq Sequence, step definition.Step, t queries.Tenant, c queries.Contact) *delivery.Step {
	return &delivery.Step{TenantID: row.TenantID, ContactID: row.ContactID, TemplateID: step.Template,
		SequenceID: seq.ID, StepID: step.ID, ScheduledSendID: row.ID, From: seq.Def.From,
		Tenant: &t, Contact: &c}
}

// giveBack returns a claimed row to failed after an error of ours (the
// database), so that the sweep retries it; the attempt counts.
func (r *Runner) giveBack(ctx context.Context, row queries.ScheduledSend, cause error) error {
	if _, err := r.failed(ctx, row, cause); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// check decides what to do with a claimed row, in a transaction holding
// its enrolment, and writes the decision; a non-nil step is to be sent.
func (r *Runner) check(ctx context.Context, q *store.Tx, row queries.ScheduledSend) (Outcome, *delivery.Step, error) {
	e, err := q.EnrolmentGetForUpdate(ctx, queries.EnrolmentGetForUpdateParams{TenantID: row.TenantID, ID: row.EnrolmentID})
	if err != nil {
		return "", nil, err
	}
	seq, err := LoadSequence(ctx, q.Queries, row.TenantID, row.SequenceID)
	if apperr.IsCode(err, "SEQUENCE_NOT_FOUND") {
		if err := r.finish(ctx, q, row, StatusCancelled, ReasonSequenceDeleted, ""); err != nil {
			return "", nil, err
		}
		_, err := exit(ctx, q, row.TenantID, e.ID, ReasonSequenceDeleted)
		return OutcomeCancelled, nil, ignoreNoRows(err)
	}
	if err != nil {
		return "", nil, err
	}
	if !isOpen(e.Status) {
		reason := deref(e.ExitReason)
		if !cancelReason(reason) {
			reason = ReasonManual
		}
		return OutcomeCancelled, nil, r.finish(ctx, q, row, StatusCancelled, reason, "")
	}
	// A disabled sequence, or a tenant whose sending is paused (by hand or
	// by the deliverability guard), holds its sends rather than ending its
	// enrolments (ADDENDUM 6): back to pending untried; they go out once
	// sending resumes (the sweep finds them due).
	t, err := q.TenantGet(ctx, row.TenantID)
	if err != nil {
		return "", nil, err
	}
	if !seq.Enabled || e.Status == Paused || t.SendingStatus == tenants.Paused {
		_, err := q.ScheduledSendRelease(ctx, queries.ScheduledSendReleaseParams{TenantID: row.TenantID, ID: row.ID,
			ClaimedAt: row.ClaimedAt})
		return OutcomeHeld, nil, err
	}
	idx := seq.Def.StepIndex(row.StepID)
	if idx < 0 || seq.Def.Steps[idx].Kind != "email" {
		if err := r.finish(ctx, q, row, StatusCancelled, ReasonStepRemoved, ""); err != nil {
			return "", nil, err
		}
		_, err := exit(ctx, q, row.TenantID, e.ID, ReasonStepRemoved)
		return OutcomeCancelled, nil, ignoreNoRows(err)
	}
	step := seq.Def.Steps[idx]
	c, err := q.ContactGet(ctx, queries.ContactGetParams{TenantID: row.TenantID, ID: row.ContactID})
	if err != nil {
		return "", nil, err
	}
	// Outside the sequence's send window the step waits, untried, for the
	// window's next opening (its scheduledFor moves there).
	if now := r.now(); windowOpen(seq, c, t, now).After(now) {
		at := windowOpen(seq, c, t, now)
		if _, err := q.ScheduledSendDefer(ctx, queries.ScheduledSendDeferParams{TenantID: row.TenantID, ID: row.ID,
			ScheduledFor: at, ClaimedAt: row.ClaimedAt}); err != nil {
			return "", nil, err
		}
		q.Schedule(tasks.Timer{TenantID: row.TenantID, ID: row.ID, At: at})
		return OutcomeHeld, nil, nil
	}
	evr, err := newEvaluator(ctx, q.Queries, c, seq.Def, e.EnrolledAt, deref(e.TriggerEventID))
	if err != nil {
		return "", nil, err
	}
	d := decide(evr, c, t, seq, step, e.Branch)
	if d.err != nil {
		return "", nil, d.err
	}
	switch d.outcome {
	case WouldBlock, WouldExit:
		reason := ReasonGateBlocked
		if d.outcome == WouldExit {
			reason = ReasonExitCondition
		}
		if err := r.finish(ctx, q, row, StatusCancelled, reason, ""); err != nil {
			return "", nil, err
		}
		_, err := exit(ctx, q, row.TenantID, e.ID, reason)
		return OutcomeExited, nil, ignoreNoRows(err)
	case WouldSkip:
		// A skipped step's send ends cancelled without a cancelReason:
		// nothing went wrong, and the schema's reasons name faults.
		if err := r.finish(ctx, q, row, StatusCancelled, "", ""); err != nil {
			return "", nil, err
		}
		return OutcomeSkipped, nil, advance(ctx, q, e, seq, step.ID)
	}
	// A step whose topic the contact left is cancelled topic_opt_out and
	// the contact moves on (ADDENDUM 7): checked at send time, like
	// unsubscribe.
	topic, err := topics.OfMessage(ctx, q.Queries, row.TenantID, seq.Def.Topic, step.Template)
	if err != nil {
		return "", nil, err
	}
	if topic != nil && !topics.Subscribed(c.Topics, *topic) {
		if err := r.finish(ctx, q, row, StatusCancelled, ReasonTopicOptOut, ""); err != nil {
			return "", nil, err
		}
		return OutcomeSkipped, nil, advance(ctx, q, e, seq, step.ID)
	}
	st := stepOf(row, seq, step, t, c)
	st.Topic = topicID(topic)
	if e.TriggerEventID != nil {
		ev, err := q.EnrolmentTriggerEvent(ctx, queries.EnrolmentTriggerEventParams{TenantID: row.TenantID, ID: *e.TriggerEventID})
		if err == nil {
			st.Event = delivery.EventOf(ev)
		} else if !store.IsNoRows(err) && !apperr.IsKind(err, apperr.KindNotFound) {
			return "", nil, err
		}
	}
	return OutcomeSent, st, nil
}

// Dry-run outcomes, also the engine's decisions.
const (
	WouldSend  = "would_send"
	WouldSkip  = "would_skip"
	WouldExit  = "would_exit"
	WouldBlock = "blocked"
)

// Decision is the outcome of the checks before a step and how it was
// reached (the dry run shows it).
type Decision struct {
	outcome string
	path    []map[string]any
	err     error
}

// decide runs the checks of ADDENDUM 6 in order for one email step of an
// enrolment of branch: gates (built-in, then YAML), exit condition, step
// conditions, where a step of another branch, or any step for the holdout,
// is a false condition (ADDENDUM 20).
func decide(evr *evaluator, c queries.Contact, t queries.Tenant, seq Sequence, step definition.Step, branch string) Decision {
	var d Decision
	add := func(stage string, passed bool, explanation string, details map[string]any) {
		d.path = append(d.path, map[string]any{"stage": stage, "passed": passed, "explanation": explanation,
			"details": details})
	}
	builtin := []struct {
		name string
		err  error
	}{
		{"sequence_enabled", boolErr(seq.Enabled, "the sequence is disabled")},
		{"contact_subscribed", boolErr(c.Subscribed, "the contact is unsubscribed")},
		{"contact_not_suppressed", boolErr(!c.Suppressed, "the contact is suppressed (bounced or complained)")},
		{"recipient_whitelisted", tenants.Whitelisted(t, c.Email)},
	}
	checks := []map[string]any{}
	for _, b := range builtin {
		passed := b.err == nil
		m := map[string]any{"gate": b.name, "passed": passed}
		if !passed {
			m["reason"] = errMessage(b.err)
		}
		checks = append(checks, m)
		if !passed {
			add("gates", false, "blocked by a built-in gate: "+errMessage(b.err), map[string]any{"builtIn": checks})
			d.outcome = WouldBlock
			return d
		}
	}
	gates, err := evr.holds(seq.Def.Gates, true)
	if err != nil {
		d.err = err
		return d
	}
	details := map[string]any{"builtIn": checks}
	if seq.Def.Gates != nil {
		details["conditions"] = evr.explain(seq.Def.Gates)
	}
	if !gates {
		add("gates", false, "blocked by the sequence's gates: "+failing(details["conditions"].([]map[string]any)), details)
		d.outcome = WouldBlock
		return d
	}
	add("gates", true, "all gates pass", details)

	exitNow, err := evr.holds(seq.Def.Exit, false)
	if err != nil {
		d.err = err
		return d
	}
	switch {
	case seq.Def.Exit == nil:
		add("exit_conditions", true, "the sequence has no exit condition", map[string]any{})
	case exitNow:
		add("exit_conditions", false, "the exit condition holds: the contact would leave the sequence",
			map[string]any{"conditions": evr.explain(seq.Def.Exit)})
		d.outcome = WouldExit
		return d
	default:
		add("exit_conditions", true, "the exit condition does not hold", map[string]any{"conditions": evr.explain(seq.Def.Exit)})
	}

	if !step.RunsFor(branch) {
		why := "the step is for branch " + step.Branch + " and the enrolment is in branch " + branch
		if branch == definition.BranchHoldout {
			why = "the enrolment is in the holdout, the control group, which is sent nothing"
		}
		add("step_conditions", false, "the step would be skipped: "+why,
			map[string]any{"stepId": step.ID, "stepBranch": step.Branch, "branch": branch})
		d.outcome = WouldSkip
		return d
	}
	cond, err := evr.holds(step.Conditions, true)
	if err != nil {
		d.err = err
		return d
	}
	switch {
	case step.Conditions == nil:
		add("step_conditions", true, "the step has no conditions", map[string]any{"stepId": step.ID})
	case !cond:
		leaves := evr.explain(step.Conditions)
		add("step_conditions", false, "the step would be skipped: "+failing(leaves),
			map[string]any{"stepId": step.ID, "conditions": leaves})
		d.outcome = WouldSkip
		return d
	default:
		add("step_conditions", true, "the step's conditions hold",
			map[string]any{"stepId": step.ID, "conditions": evr.explain(step.Conditions)})
	}
	d.outcome = WouldSend
	return d
}

func boolErr(ok bool, msg string) error {
	if ok {
		return nil
	}
	return errors.New(msg)
}

func errMessage(err error) string {
	if e, ok := apperr.As(err); ok {
		return e.Message
	}
	return err.Error()
}

// finish ends this claim of row with status; reason is the cancelReason,
// lastErr the error of failed and dead.
func (r *Runner) finish(ctx context.Context, q *store.Tx, row queries.ScheduledSend, status, reason, lastErr string) error {
	p := queries.ScheduledSendFinishParams{TenantID: row.TenantID, ID: row.ID, ClaimedAt: row.ClaimedAt, Status: status}
	if reason != "" {
		p.CancelReason = &reason
	}
	if lastErr != "" {
		p.LastError = &lastErr
	}
	if status == StatusFailed {
		at := time.Now().Add(Backoff(int(row.Attempts)))
		p.RetryAt = &at
	}
	n, err := q.ScheduledSendFinish(ctx, p)
	if err != nil || n == 0 || status != StatusCancelled {
		return err
	}
	return metrics.Count(ctx, q, metrics.Cancelled(row.TenantID, row.SequenceID, row.TemplateID, time.Time{}))
}

// sent marks the row sent and moves the enrolment on, scheduling its next
// email step from now.
func (r *Runner) sent(ctx context.Context, row queries.ScheduledSend, sendID string) (Result, error) {
	// The message has (or may have) left: record it even if the task's
	// context is done. A record still `sending` (its attempt's process
	// died waiting for the provider) is settled in doubt with the mark.
	ctx2, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := r.Sender.SettleInDoubt(ctx2, row.TenantID, sendID, func(ctx context.Context, q *store.Tx, sendID string) error {
		return markSent(ctx, q, row, sendID, nil)
	})
	if err != nil {
		r.Log.Error("scheduled send went out but was not marked sent; the sweep will find its send record",
			"err", err, "tenant_id", row.TenantID, "scheduled_send_id", row.ID, "send_id", sendID)
		return Result{}, err
	}
	return Result{Outcome: OutcomeSent}, nil
}

// markSent marks row sent with its send and moves the enrolment on, in the
// caller's transaction. seen is the sequence as the checks read it a
// moment ago, reused when its version is still current (nil: parse the
// stored definition).
func markSent(ctx context.Context, q *store.Tx, row queries.ScheduledSend, sendID string, seen *Sequence) error {
	// The enrolment first, then its send: the lock order of exit and check.
	x, lockErr := q.EnrolmentForAdvance(ctx, queries.EnrolmentForAdvanceParams{TenantID: row.TenantID, ID: row.EnrolmentID})
	was, err := q.ScheduledSendMarkSent(ctx, queries.ScheduledSendMarkSentParams{TenantID: row.TenantID,
		ID: row.ID, SendID: &sendID})
	if err != nil {
		return err
	}
	// Cancelled while its message was leaving (an unsubscribe in flight):
	// the message is the truth, so its cancellation no longer counts.
	if len(was) == 1 && was[0].WasStatus == StatusCancelled && was[0].WasFinishedAt != nil {
		un := metrics.Cancelled(row.TenantID, row.SequenceID, row.TemplateID, *was[0].WasFinishedAt)
		un.Cancelled = -1
		if err := metrics.Count(ctx, q, un); err != nil {
			return err
		}
	}
	e := x.Enrolment
	if lockErr != nil || e.Status != Active || e.CurrentStep != row.StepID || x.SeqVersion == nil {
		return ignoreNoRows(lockErr) // ended, paused or moved on meanwhile; sequence deleted
	}
	var seq Sequence
	if seen != nil && seen.Version == *x.SeqVersion {
		seq = *seen
	} else {
		var err error
		if seq, err = sequenceOf(row.SequenceID, "", true, *x.SeqVersion, x.SeqDefinition); err != nil {
			return err
		}
	}
	if seq.Def.StepIndex(row.StepID) < 0 {
		_, err := exit(ctx, q, row.TenantID, e.ID, ReasonStepRemoved)
		return ignoreNoRows(err)
	}
	return advance(ctx, q, e, seq, row.StepID)
}

// failed records a failed attempt: failed with a retry time when the error
// may pass and attempts are left, dead otherwise (which exits the
// enrolment, reason send_failed).
func (r *Runner) failed(ctx context.Context, row queries.ScheduledSend, cause error) (Result, error) {
	status := StatusFailed
	if permanent(cause) || int(row.Attempts) >= r.MaxAttempts {
		status = StatusDead
	}
	// A message its template refused says why first (partial_missing,
	// missing_variables: ADDENDUM 24).
	msg := templates.FailureMessage(cause)
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := r.DB.InTx(ctx, func(q *store.Tx) error {
		// The enrolment first, then its send: the lock order of every
		// writer (docs/decisions.md "Lock order"); an unsubscribe locking
		// them the same way waits instead of deadlocking.
		if _, err := q.EnrolmentGetForUpdate(ctx, queries.EnrolmentGetForUpdateParams{TenantID: row.TenantID,
			ID: row.EnrolmentID}); err != nil && !apperr.IsKind(err, apperr.KindNotFound) {
			return err
		}
		if err := r.finish(ctx, q, row, status, "", msg); err != nil {
			return err
		}
		if status == StatusDead {
			_, err := end(ctx, q, row.TenantID, row.EnrolmentID, Exited, ReasonSendFailed, nil)
			return ignoreNoRows(err)
		}
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("record failed attempt of %s: %w", row.ID, err)
	}
	return Result{Outcome: Outcome(status), Err: cause}, nil
}

// permanent reports whether a send failure will not pass by retrying: the
// provider refused the message itself (not a temporary answer), or our own
// checks failed (template missing or disabled, render budget, from
// domain). Anything else (temporary provider answers, network, database)
// is retried.
func permanent(err error) bool {
	if provider.IsTemporary(err) {
		return false
	}
	switch apperr.KindOf(err) {
	case apperr.KindInvalid, apperr.KindNotFound, apperr.KindForbidden, apperr.KindUnprocessable, apperr.KindUpstream:
		return true
	}
	return false
}
