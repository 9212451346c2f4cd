package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/metrics"
	"tidings/internal/sequences/definition"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/queries"
)

// Enrolment statuses (API.md section 3).
const (
	Active    = "active"
	Paused    = "paused"
	Completed = "completed"
	Exited    = "exited"
)

// Reasons an enrolment exits and a scheduled send is cancelled (ADDENDUM
// sections 6-7). ReasonStepRemoved and ReasonSendFailed end enrolments
// only: the send of a removed step is cancelled step_removed, a send that
// failed for good is dead.
const (
	ReasonExitCondition   = "exit_condition"
	ReasonGateBlocked     = "gate_blocked"
	ReasonManual          = "manual"
	ReasonSequenceDeleted = "sequence_deleted"
	ReasonStepRemoved     = "step_removed"
	// ReasonTopicOptOut cancels a step whose topic the contact left; the
	// contact moves on, as for a false step condition (ADDENDUM 7, 16).
	ReasonTopicOptOut = "topic_opt_out"
	ReasonSendFailed  = "send_failed"
)

// Sequence is what the engine reads of a stored sequence.
type Sequence struct {
	ID      string
	Name    string
	Enabled bool
	Version int32
	Def     *definition.Definition
}

// NotFound is the SEQUENCE_NOT_FOUND error.
func NotFound() *apperr.Error { return apperr.NotFound("SEQUENCE_NOT_FOUND", "sequence") }

// LoadSequence reads one sequence (queries.SequenceForStep) and its parsed
// definition.
func LoadSequence(ctx context.Context, q *queries.Queries, tenantID, id string) (Sequence, error) {
	row, err := q.SequenceForStep(ctx, queries.SequenceForStepParams{TenantID: tenantID, ID: id})
	if err != nil {
		return Sequence{}, apperr.Specific(err, apperr.KindNotFound, NotFound())
	}
	return sequenceOf(row.ID, row.Name, row.Enabled, row.Version, row.Definition)
}

func sequenceOf(id, name string, enabled bool, version int32, raw json.RawMessage) (Sequence, error) {
	// The JSON form is the long form of the YAML, which ParseJSON reads
	// back (definition package). A row whose definition is empty ({}:
	// inserted by hand before 0010) has no steps and fails to parse.
	def, err := definition.ParseJSON(raw)
	if err != nil {
		return Sequence{}, fmt.Errorf("sequence %s: stored definition: %w", id, err)
	}
	return Sequence{ID: id, Name: name, Enabled: enabled, Version: version, Def: def}, nil
}

// Event is the event that enrols a contact.
type Event struct {
	ID         string
	Name       string
	Properties json.RawMessage
	Timestamp  time.Time
}

// Enroll enrols a contact in an enabled sequence, in the caller's
// transaction. An open (active or paused) enrolment is returned as it is
// (created false). Without trigger.reenroll a contact that was ever
// enrolled is not enrolled again: its newest enrolment is returned,
// created false; with it, a contact enters again once the previous
// enrolment ended. A new enrolment starts at the first email step: its
// scheduled send is due after the delays before it (now for a leading
// send), with its scheduled timeline entry (the enrolment is its own
// sequence_entered entry: schema 0032). A sequence
// without email steps completes at once. ev is the triggering event, nil
// for a manual enrolment.
func Enroll(ctx context.Context, q *store.Tx, tenantID string, seq Sequence, contactID string, ev *Event) (queries.Enrolment, bool, error) {
	if !seq.Enabled {
		return queries.Enrolment{}, false, apperr.Invalid("sequenceId", "the sequence is disabled: it enrols no contacts")
	}
	latest, err := q.EnrolmentLatest(ctx, queries.EnrolmentLatestParams{TenantID: tenantID, SequenceID: seq.ID, ContactID: contactID})
	switch {
	case err == nil:
		if isOpen(latest.Status) || !seq.Def.Trigger.Reenroll {
			return latest, false, nil
		}
	case !store.IsNoRows(err) && !apperr.IsKind(err, apperr.KindNotFound):
		return queries.Enrolment{}, false, err
	}
	branch := BranchOf(seq, contactID)
	pl := planFirst(seq, branch)
	step, delay, found, at, idx := pl.step, pl.delay, pl.found, pl.at, int(pl.index)
	var evID, evName *string
	if ev != nil {
		evID, evName = &ev.ID, &ev.Name
	}
	var holdout *float64
	if secs := holdoutSeconds(seq, branch); secs >= 0 {
		holdout = &secs
	}
	// The enrolment is also its sequence_entered timeline entry (schema
	// 0032): its version and event are what the entry shows.
	e, err := q.EnrolmentInsert(ctx, queries.EnrolmentInsertParams{TenantID: tenantID, ID: ids.New(ids.Enrolment),
		SequenceID: seq.ID, ContactID: contactID, CurrentStep: at, CurrentStepIndex: int32(idx), TriggerEventID: evID,
		SequenceVersion: &seq.Version, TriggerEventName: evName, Branch: branch, HoldoutSeconds: holdout})
	if store.IsNoRows(err) || apperr.IsKind(err, apperr.KindNotFound) {
		// A concurrent enrolment of the same contact won the open slot.
		e, err = q.EnrolmentOpen(ctx, queries.EnrolmentOpenParams{TenantID: tenantID, SequenceID: seq.ID, ContactID: contactID})
		return e, false, err
	}
	if err != nil {
		return e, false, apperr.Specific(err, apperr.KindInvalid, apperr.NotFound("CONTACT_NOT_FOUND", "contact"))
	}
	if !found && (holdout == nil || *holdout == 0) {
		// Nothing to send (or, held out, nothing to wait for): complete.
		e2, err := end(ctx, q, tenantID, e.ID, Completed, "", nil)
		return e2, true, err
	}
	if !found {
		return e, true, nil // held out: the sweep completes it at holdout_until
	}
	if _, err := schedule(ctx, q, e, seq, step, delay); err != nil {
		return e, false, err
	}
	return e, true, nil
}

func isOpen(status string) bool { return status == Active || status == Paused }

// planned is where a new enrolment starts: its first email step and the
// delays before it (found false: none, it completes at once), and the
// step it is at (at, index: 1-based) meanwhile.
type planned struct {
	step  definition.Step
	delay time.Duration
	found bool
	at    string
	index int32
}

func planFirst(seq Sequence, branch string) planned {
	step, delay, found := plan(seq.Def, "", branch)
	pl := planned{step: step, delay: delay, found: found, at: seq.Def.Steps[0].ID, index: 1}
	if found {
		pl.at, pl.index = step.ID, int32(seq.Def.StepIndex(step.ID)+1)
	}
	return pl
}

// plan walks the steps after the step with id after (from the first when
// after is empty) to the next email step of the enrolment's branch,
// summing the delays on the way. It returns false when no email step
// follows: the enrolment completes. Trailing delays therefore do not
// postpone completion. Steps of other branches are passed over as a false
// condition passes a step (ADDENDUM 20), at once: a step skipped takes no
// time, so passing it here rather than when it comes due changes no
// delay, and schedules no send that could only be cancelled. A split step
// takes no time either (the branch was drawn at enrolment). The holdout
// runs no step: it finds none.
func plan(def *definition.Definition, after, branch string) (definition.Step, time.Duration, bool) {
	var delay time.Duration
	for {
		s, ok := def.Next(after)
		if !ok {
			return definition.Step{}, 0, false
		}
		if !s.RunsFor(branch) {
			after = s.ID
			continue
		}
		if s.Kind == definition.KindEmail {
			return s, delay, true
		}
		delay += s.Delay
		after = s.ID
	}
}

// schedule writes the scheduled send of an email step due delay from now
// (the database's clock; the row is also its scheduled timeline entry,
// schema 0033) and its task once the transaction commits.
func schedule(ctx context.Context, q *store.Tx, e queries.Enrolment, seq Sequence, step definition.Step, delay time.Duration) (queries.ScheduledSend, error) {
	ss, err := q.ScheduledSendInsert(ctx, queries.ScheduledSendInsertParams{TenantID: e.TenantID, ID: ids.New(ids.ScheduledSend),
		ContactID: e.ContactID, EnrolmentID: e.ID, SequenceID: seq.ID, SequenceVersion: seq.Version, StepID: step.ID,
		TemplateID: step.Template, DelaySeconds: delay.Seconds()})
	if err != nil {
		return ss, err
	}
	if err := metrics.Count(ctx, q, metrics.Fact{TenantID: ss.TenantID, SequenceID: ss.SequenceID,
		TemplateID: ss.TemplateID, At: ss.CreatedAt, Counts: metrics.Counts{Scheduled: 1}}); err != nil {
		return ss, err
	}
	q.Schedule(tasks.Timer{TenantID: ss.TenantID, ID: ss.ID, At: ss.ScheduledFor})
	return ss, nil
}

// advance moves an active enrolment past the step with id after: to the
// next email step, scheduled after the delays between (counted from now,
// the moment this step was processed), or to completed.
func advance(ctx context.Context, q *store.Tx, e queries.Enrolment, seq Sequence, after string) error {
	step, delay, ok := plan(seq.Def, after, e.Branch)
	if !ok {
		last := seq.Def.Steps[len(seq.Def.Steps)-1].ID
		n := int32(len(seq.Def.Steps))
		_, err := end(ctx, q, e.TenantID, e.ID, Completed, "", &stepAt{id: last, index: n})
		return ignoreNoRows(err)
	}
	moved, err := q.EnrolmentAdvance(ctx, queries.EnrolmentAdvanceParams{TenantID: e.TenantID, ID: e.ID,
		CurrentStep: step.ID, CurrentStepIndex: int32(seq.Def.StepIndex(step.ID) + 1)})
	if store.IsNoRows(err) || apperr.IsKind(err, apperr.KindNotFound) {
		return nil // no longer active: exited or paused meanwhile
	}
	if err != nil {
		return err
	}
	_, err = schedule(ctx, q, moved, seq, step, delay)
	return err
}

type stepAt struct {
	id    string
	index int32
}

// end ends an open enrolment with its timeline entry; NotFound when it had
// ended already.
func end(ctx context.Context, q *store.Tx, tenantID, id, status, reason string, at *stepAt) (queries.Enrolment, error) {
	p := queries.EnrolmentEndParams{TenantID: tenantID, ID: id, Status: status}
	if reason != "" {
		p.ExitReason = &reason
	}
	if at != nil {
		p.CurrentStep, p.CurrentStepIndex = &at.id, &at.index
	}
	r, err := q.EnrolmentEnd(ctx, p)
	return queries.Enrolment(r), err
}

// exit ends an open enrolment as exited and cancels its open sends with the
// same reason (a reason outside the cancel reasons cancels nothing: its
// caller finishes the send itself).
func exit(ctx context.Context, q *store.Tx, tenantID, enrolmentID, reason string) (queries.Enrolment, error) {
	// Enrolment first, then its sends: the order Runner.Run locks them in,
	// so the two cannot deadlock.
	e, err := end(ctx, q, tenantID, enrolmentID, Exited, reason, nil)
	if err != nil || !cancelReason(reason) {
		return e, err
	}
	cancelled, err := q.ScheduledSendCancelByEnrolment(ctx, queries.ScheduledSendCancelByEnrolmentParams{
		TenantID: tenantID, EnrolmentID: enrolmentID, Reason: reason})
	if err != nil {
		return e, err
	}
	return e, metrics.CountCancelled(ctx, q, tenantID, cancelled)
}

func cancelReason(r string) bool {
	switch r {
	case "contact_deleted", "unsubscribed", "suppressed", ReasonSequenceDeleted, ReasonExitCondition,
		ReasonGateBlocked, ReasonManual, ReasonStepRemoved, ReasonTopicOptOut, ReasonConverted:
		return true
	}
	return false
}

func ignoreNoRows(err error) error {
	if store.IsNoRows(err) || apperr.IsKind(err, apperr.KindNotFound) {
		return nil
	}
	return err
}

// Exit ends the contact's open enrolment in the sequence (DELETE
// /api/sequences/{id}/contacts/{contactId}: reason manual) and cancels its
// pending sends. NotFound when there is none.
func Exit(ctx context.Context, q *store.Tx, tenantID, sequenceID, contactID, reason string) (queries.Enrolment, error) {
	e, err := q.EnrolmentOpen(ctx, queries.EnrolmentOpenParams{TenantID: tenantID, SequenceID: sequenceID, ContactID: contactID})
	if err != nil {
		return e, apperr.Specific(err, apperr.KindNotFound, apperr.NotFound("NOT_FOUND", "enrolment"))
	}
	return exit(ctx, q, tenantID, e.ID, reason)
}

// CancelSequence is what deleting a sequence does to its contacts: open
// sends cancelled (sequence_deleted), open enrolments exited. It is the
// sequences.Store OnDelete hook.
func CancelSequence(ctx context.Context, q *store.Tx, tenantID, sequenceID string) error {
	// Enrolments first, then sends (the lock order of Runner.Run).
	if err := q.EnrolmentExitBySequence(ctx, queries.EnrolmentExitBySequenceParams{
		TenantID: tenantID, SequenceID: sequenceID, Reason: ReasonSequenceDeleted}); err != nil {
		return err
	}
	cancelled, err := q.ScheduledSendCancelBySequence(ctx, queries.ScheduledSendCancelBySequenceParams{
		TenantID: tenantID, SequenceID: sequenceID, Reason: ReasonSequenceDeleted})
	if err != nil {
		return err
	}
	return metrics.CountCancelled(ctx, q, tenantID, cancelled)
}

// StepsRemoved is what storing a new version of a sequence does to its
// contacts (the sequences.Store OnNewVersion hook): an enrolment whose
// pending send is for a step the version no longer has as an email step
// exits step_removed, and its sends are cancelled step_removed, at once
// rather than when the send comes due (ADDENDUM 6). The enrolments are
// followed from their current step id otherwise: nothing else changes.
// A claimed send (on its way) is left to its worker, which finds the step
// gone, or marks it sent if its message left.
func StepsRemoved(ctx context.Context, q *store.Tx, tenantID, sequenceID string, d *definition.Definition) error {
	var steps []string
	for _, s := range d.Steps {
		if s.Kind == definition.KindEmail {
			steps = append(steps, s.ID)
		}
	}
	enrolments, err := q.ScheduledSendEnrolmentsOffSteps(ctx, queries.ScheduledSendEnrolmentsOffStepsParams{
		TenantID: tenantID, SequenceID: sequenceID, StepIds: steps})
	if err != nil {
		return err
	}
	for _, id := range enrolments {
		if _, err := exit(ctx, q, tenantID, id, ReasonStepRemoved); ignoreNoRows(err) != nil {
			return err
		}
	}
	return nil
}

// SetEnabled is what enabling or disabling a sequence does to its
// contacts (the sequences.Store OnEnabled hook): disabling pauses the
// active enrolments, whose due sends then wait (the worker gives a claimed
// one back untried); enabling resumes the paused ones and records a timer
// for every send that came due meanwhile, so they leave promptly once the
// transaction commits.
func SetEnabled(ctx context.Context, q *store.Tx, tenantID, sequenceID string, enabled bool) error {
	if _, err := q.EnrolmentSetPaused(ctx, queries.EnrolmentSetPausedParams{TenantID: tenantID, SequenceID: sequenceID,
		Paused: !enabled}); err != nil {
		return err
	}
	if !enabled {
		return nil
	}
	due, err := q.ScheduledSendDueBySequence(ctx, queries.ScheduledSendDueBySequenceParams{TenantID: tenantID, SequenceID: sequenceID})
	if err != nil {
		return err
	}
	for _, d := range due {
		q.Schedule(tasks.Timer{TenantID: d.TenantID, ID: d.ID, At: d.ScheduledFor})
	}
	return nil
}

// Dead ends the enrolment of a send that is dead (exited, send_failed):
// the sweep calls it for a claim that ran out of attempts.
func Dead(ctx context.Context, q *store.Tx, tenantID, enrolmentID string) error {
	_, err := end(ctx, q, tenantID, enrolmentID, Exited, ReasonSendFailed, nil)
	return ignoreNoRows(err)
}
