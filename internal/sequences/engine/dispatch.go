package engine

import (
	"context"
	"encoding/json"
	"time"

	"tidings/internal/delivery"
	"tidings/internal/ids"
	"tidings/internal/metrics"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/queries"
)

// nextRow is one scheduled send to write (DispatchSchedule's JSON): the
// next step of an enrolment, due delay_seconds from now.
type nextRow struct {
	TenantID        string  `json:"tenant_id"`
	ID              string  `json:"id"`
	ContactID       string  `json:"contact_id"`
	EnrolmentID     string  `json:"enrolment_id"`
	SequenceID      string  `json:"sequence_id"`
	SequenceVersion int32   `json:"sequence_version"`
	StepID          string  `json:"step_id"`
	TemplateID      string  `json:"template_id"`
	DelaySeconds    float64 `json:"delay_seconds"`
}

// DefaultBatch is how many due scheduled sends one claim takes.
const DefaultBatch = 100

// Dispatch claims up to limit due scheduled sends in one statement (rows
// another worker holds are skipped) and runs them as one batch. It returns
// what became of each; none when nothing was due.
func (r *Runner) Dispatch(ctx context.Context, limit int) ([]Result, error) {
	if limit <= 0 {
		limit = DefaultBatch
	}
	rows, err := r.DB.DispatchClaim(ctx, int32(limit))
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := r.runClaimed(ctx, rows)
	res := make([]Result, len(out))
	for i, o := range out {
		res[i] = o.res
		if o.err != nil {
			res[i] = Result{Outcome: OutcomeFailed, Err: o.err}
		}
	}
	return res, nil
}

type runOut struct {
	res Result
	err error
}

// runClaimed runs claimed rows as one batch, in ADDENDUM 6 order for each:
// the sequence (deleted: cancelled; disabled: back to pending, held; step
// removed: cancelled step_removed), the built-in gates (contact
// subscribed, not suppressed, whitelisted in sandbox) and the YAML gates
// (failing: exited gate_blocked), the exit condition (exited
// exit_condition) and the step conditions (false: skipped, the enrolment
// moves on). The checks of every row read one statement without locks
// (DispatchContext, quick); only a decision other than "send" (rare) is
// taken again in a transaction holding the enrolment (check), which writes
// it. The steps that pass leave together through the ledger
// (delivery.Sender.SendSteps: records first, provider calls concurrent,
// settled together), and are marked sent with their enrolments moved on in
// the settling transaction (markSentMany). A row whose message already has
// its record (an earlier attempt) is marked sent without sending.
func (r *Runner) runClaimed(ctx context.Context, claimed []queries.DispatchClaimRow) []runOut {
	out := make([]runOut, len(claimed))
	var live []int
	var cp queries.DispatchContextParams
	for i, c := range claimed {
		if c.SentID != "" {
			res, err := r.sent(ctx, c.ScheduledSend, c.SentID)
			out[i] = runOut{res, err}
			continue
		}
		live = append(live, i)
		cp.TenantIds = append(cp.TenantIds, c.ScheduledSend.TenantID)
		cp.EnrolmentIds = append(cp.EnrolmentIds, c.ScheduledSend.EnrolmentID)
	}
	if len(live) == 0 {
		return out
	}
	xs, err := r.DB.DispatchContext(ctx, cp)
	if err != nil {
		for _, i := range live {
			out[i] = runOut{err: r.giveBack(ctx, claimed[i].ScheduledSend, err)}
		}
		return out
	}
	byEnrolment := make(map[[2]string]*queries.DispatchContextRow, len(xs))
	for k := range xs {
		byEnrolment[[2]string{xs[k].Enrolment.TenantID, xs[k].Enrolment.ID}] = &xs[k]
	}

	var b sendBatch
	for _, i := range live {
		row := claimed[i].ScheduledSend
		st, seq, err := r.quick(ctx, row, byEnrolment[[2]string{row.TenantID, row.EnrolmentID}])
		if err != nil {
			out[i] = runOut{err: r.giveBack(ctx, row, err)}
			continue
		}
		if st == nil {
			var o Outcome
			err = r.DB.InTx(ctx, func(q *store.Tx) error {
				var err error
				o, st, err = r.check(ctx, q, row)
				return err
			})
			if err != nil {
				out[i] = runOut{err: r.giveBack(ctx, row, err)}
				continue
			}
			if st == nil {
				out[i] = runOut{res: Result{Outcome: o}}
				continue
			}
		}
		b.add(i, row, *st, seq)
	}
	if len(b.steps) == 0 {
		return out
	}
	results := r.Sender.SendSteps(ctx, b.steps, r.Parallel, b.markSent)
	for k, res := range results {
		i, row := b.index[k], b.rows[k]
		switch {
		case isCapped(res.Err):
			// Over the frequency cap: no record, nothing sent; the step
			// waits, untried, for the contact's next period (ADDENDUM 17).
			c, _ := delivery.IsCapped(res.Err)
			out[i] = runOut{res: Result{Outcome: OutcomeHeld}, err: r.deferTo(ctx, row, c.Until, nil)}
		case isHeld(res.Err):
			// Its destination's throttle or its domain's warm-up: no
			// record, nothing sent; the step waits, untried, until the
			// hold's time, and says what holds it.
			h, _ := delivery.IsHeld(res.Err)
			out[i] = runOut{res: Result{Outcome: OutcomeHeld}, err: r.deferTo(ctx, row, h.Until, &h.By)}
		case res.Err != nil && !delivery.IsInDoubt(res.Err):
			// Nothing left: failed with a retry time, or dead.
			fr, err := r.failed(ctx, row, res.Err)
			out[i] = runOut{fr, err}
		case res.InRecordDone:
			// A send in doubt counts as sent: never sent again (ADDENDUM 12).
			out[i] = runOut{res: Result{Outcome: OutcomeSent}}
		default:
			sr, err := r.sent(ctx, row, res.SendID)
			out[i] = runOut{sr, err}
		}
	}
	return out
}

// sendBatch is the steps of a batch that passed their checks, with their
// rows and the sequences the checks read.
type sendBatch struct {
	index []int
	rows  []queries.ScheduledSend
	steps []delivery.Step
	seqs  []*Sequence
}

func (b *sendBatch) add(i int, row queries.ScheduledSend, st delivery.Step, seq *Sequence) {
	b.index = append(b.index, i)
	b.rows = append(b.rows, row)
	b.steps = append(b.steps, st)
	b.seqs = append(b.seqs, seq)
}

// markSent marks the settled steps sent and moves their enrolments on, in
// the transaction that settled their records, with a fixed number of
// statements: the enrolments locked in key order, then their scheduled
// sends marked (the lock order), the enrolments advanced, completed or
// exited, and the next steps scheduled. It is markSent (run.go) for a batch.
func (b *sendBatch) markSent(ctx context.Context, q *store.Tx, settled []delivery.Settled) error {
	if len(settled) == 0 {
		return nil
	}
	var lp queries.DispatchEnrolmentsLockParams
	type markRow struct {
		TenantID string `json:"tenant_id"`
		ID       string `json:"id"`
		SendID   string `json:"send_id"`
	}
	marks := make([]markRow, len(settled))
	for k, st := range settled {
		row := b.rows[st.Index]
		lp.TenantIds = append(lp.TenantIds, row.TenantID)
		lp.Ids = append(lp.Ids, row.EnrolmentID)
		marks[k] = markRow{TenantID: row.TenantID, ID: row.ID, SendID: st.SendID}
	}
	locked, err := q.DispatchEnrolmentsLock(ctx, lp)
	if err != nil {
		return err
	}
	enrolments := make(map[[2]string]queries.DispatchEnrolmentsLockRow, len(locked))
	for _, x := range locked {
		enrolments[[2]string{x.Enrolment.TenantID, x.Enrolment.ID}] = x
	}
	mj, err := json.Marshal(marks)
	if err != nil {
		return err
	}
	was, err := q.DispatchMarkSent(ctx, mj)
	if err != nil {
		return err
	}
	// Cancelled while its message was leaving (an unsubscribe in flight):
	// the message is the truth, so its cancellation no longer counts.
	var uncancel []metrics.Fact
	for _, w := range was {
		if w.WasStatus == StatusCancelled && w.WasFinishedAt != nil {
			f := metrics.Cancelled(w.TenantID, w.SequenceID, w.TemplateID, *w.WasFinishedAt)
			f.Cancelled = -1
			uncancel = append(uncancel, f)
		}
	}
	if err := metrics.Count(ctx, q, uncancel...); err != nil {
		return err
	}

	type moveRow struct {
		TenantID         string `json:"tenant_id"`
		ID               string `json:"id"`
		CurrentStep      string `json:"current_step"`
		CurrentStepIndex int32  `json:"current_step_index"`
	}
	var advance, complete []moveRow
	var next []nextRow
	for _, st := range settled {
		row := b.rows[st.Index]
		x, ok := enrolments[[2]string{row.TenantID, row.EnrolmentID}]
		e := x.Enrolment
		if !ok || e.Status != Active || e.CurrentStep != row.StepID || x.SeqVersion == nil {
			continue // ended, paused or moved on meanwhile; sequence deleted
		}
		var seq Sequence
		if seen := b.seqs[st.Index]; seen != nil && seen.Version == *x.SeqVersion {
			seq = *seen
		} else if seq, err = sequenceOf(row.SequenceID, "", true, *x.SeqVersion, x.SeqDefinition); err != nil {
			return err
		}
		if seq.Def.StepIndex(row.StepID) < 0 {
			if _, err := exit(ctx, q, row.TenantID, e.ID, ReasonStepRemoved); err != nil {
				return ignoreNoRows(err)
			}
			continue
		}
		step, delay, found := plan(seq.Def, row.StepID, e.Branch)
		if !found {
			last := seq.Def.Steps[len(seq.Def.Steps)-1].ID
			complete = append(complete, moveRow{TenantID: e.TenantID, ID: e.ID, CurrentStep: last,
				CurrentStepIndex: int32(len(seq.Def.Steps))})
			continue
		}
		advance = append(advance, moveRow{TenantID: e.TenantID, ID: e.ID, CurrentStep: step.ID,
			CurrentStepIndex: int32(seq.Def.StepIndex(step.ID) + 1)})
		next = append(next, nextRow{TenantID: e.TenantID, ID: ids.New(ids.ScheduledSend), ContactID: e.ContactID,
			EnrolmentID: e.ID, SequenceID: seq.ID, SequenceVersion: seq.Version, StepID: step.ID,
			TemplateID: step.Template, DelaySeconds: delay.Seconds()})
	}
	if len(advance) > 0 {
		j, err := json.Marshal(advance)
		if err != nil {
			return err
		}
		if err := q.DispatchAdvance(ctx, j); err != nil {
			return err
		}
		j, err = json.Marshal(next)
		if err != nil {
			return err
		}
		scheduled, err := q.DispatchSchedule(ctx, j)
		if err != nil {
			return err
		}
		facts := make([]metrics.Fact, len(scheduled))
		for i, ss := range scheduled {
			facts[i] = metrics.Fact{TenantID: ss.TenantID, SequenceID: ss.SequenceID, TemplateID: ss.TemplateID,
				At: ss.CreatedAt, Counts: metrics.Counts{Scheduled: 1}}
			q.Schedule(tasks.Timer{TenantID: ss.TenantID, ID: ss.ID, At: ss.ScheduledFor})
		}
		if err := metrics.Count(ctx, q, facts...); err != nil {
			return err
		}
	}
	if len(complete) > 0 {
		j, err := json.Marshal(complete)
		if err != nil {
			return err
		}
		if err := q.DispatchComplete(ctx, j); err != nil {
			return err
		}
	}
	return nil
}

func isCapped(err error) bool { _, ok := delivery.IsCapped(err); return ok }
func isHeld(err error) bool   { _, ok := delivery.IsHeld(err); return ok }

// deferTo gives a claimed row back untried, pending at at (its timer
// queued after the commit): a step over the frequency cap, or held by a
// throttle or warm-up (heldBy).
func (r *Runner) deferTo(ctx context.Context, row queries.ScheduledSend, at time.Time, heldBy *string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return r.DB.InTx(ctx, func(q *store.Tx) error {
		if _, err := q.ScheduledSendDefer(ctx, queries.ScheduledSendDeferParams{TenantID: row.TenantID, ID: row.ID,
			ScheduledFor: at, ClaimedAt: row.ClaimedAt, HeldBy: heldBy}); err != nil {
			return err
		}
		q.Schedule(tasks.Timer{TenantID: row.TenantID, ID: row.ID, At: at})
		return nil
	})
}
