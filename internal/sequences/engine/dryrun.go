package engine

import (
	"context"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/sequences/definition"
	"tidings/internal/store"
	"tidings/queries"
)

// DryRunResult is what a step would do for a contact now, and why.
type DryRunResult struct {
	Outcome      string
	DecisionPath []map[string]any
	Step         definition.Step
	Contact      queries.Contact
	Sequence     Sequence
	// Enrolment is the contact's open enrolment; nil when not in the
	// sequence.
	Enrolment *queries.Enrolment
	// TriggerEvent is the event that enrolled the contact, if any.
	TriggerEvent *queries.EnrolmentTriggerEventRow
	// Branch is the enrolment's branch, or for a contact not in the
	// sequence the one it would be drawn (ADDENDUM 20).
	Branch string
}

// DryRun evaluates, without writing anything, what the email step stepID
// (default: the contact's current step, else the first email step) would
// do for the contact now: the checks of Runner.Run in the same order with
// the same evaluator. A contact not in the sequence is evaluated as if it
// were enrolled now. A stepID that is not an email step of the sequence is
// VALIDATION_ERROR.
func DryRun(ctx context.Context, q *queries.Queries, tenantID, sequenceID, contactID, stepID string) (DryRunResult, error) {
	var res DryRunResult
	seq, err := LoadSequence(ctx, q, tenantID, sequenceID)
	if err != nil {
		return res, err
	}
	c, err := q.ContactGet(ctx, queries.ContactGetParams{TenantID: tenantID, ID: contactID})
	if err != nil {
		return res, apperr.Specific(err, apperr.KindNotFound, apperr.NotFound("CONTACT_NOT_FOUND", "contact"))
	}
	t, err := q.TenantGet(ctx, tenantID)
	if err != nil {
		return res, err
	}
	res.Sequence, res.Contact = seq, c
	since, trigger := time.Time{}, ""
	e, err := q.EnrolmentOpen(ctx, queries.EnrolmentOpenParams{TenantID: tenantID, SequenceID: sequenceID, ContactID: contactID})
	switch {
	case err == nil:
		res.Enrolment = &e
		res.Branch = e.Branch
		since, trigger = e.EnrolledAt, deref(e.TriggerEventID)
		if trigger != "" {
			if ev, err := q.EnrolmentTriggerEvent(ctx, queries.EnrolmentTriggerEventParams{TenantID: tenantID, ID: trigger}); err == nil {
				res.TriggerEvent = &ev
			}
		}
	case store.IsNoRows(err) || apperr.IsKind(err, apperr.KindNotFound):
		since = time.Now() // as if enrolled now: no event counts yet
		res.Branch = BranchOf(seq, contactID)
	default:
		return res, err
	}
	if stepID == "" && res.Enrolment != nil {
		stepID = res.Enrolment.CurrentStep
		// A held-out enrolment stays at its first step, which may be a
		// split: the checks are then shown for the first email step.
		if i := seq.Def.StepIndex(stepID); i >= 0 && seq.Def.Steps[i].Kind != definition.KindEmail {
			stepID = ""
		}
	}
	if stepID == "" {
		if s, _, ok := plan(seq.Def, "", res.Branch); ok {
			stepID = s.ID
		} else if steps := seq.Def.EmailSteps(); len(steps) > 0 {
			// The holdout, or a branch without email steps: the first
			// email step, which the checks then skip.
			stepID = steps[0].ID
		}
	}
	idx := seq.Def.StepIndex(stepID)
	if idx < 0 || seq.Def.Steps[idx].Kind != definition.KindEmail {
		return res, apperr.Invalid("stepId", "must name an email step of the sequence")
	}
	res.Step = seq.Def.Steps[idx]
	evr, err := newEvaluator(ctx, q, c, seq.Def, since, trigger)
	if err != nil {
		return res, err
	}
	d := decide(evr, c, t, seq, res.Step, res.Branch)
	if d.err != nil {
		return res, d.err
	}
	res.Outcome, res.DecisionPath = d.outcome, d.path
	return res, nil
}
