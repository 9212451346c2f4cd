package engine

import (
	"context"

	"tidings/internal/events"
	"tidings/internal/store"
	"tidings/queries"
)

// Hook is the events.Hook of the sequence engine, run in the event's
// transaction. A custom event enrols the contact in every enabled sequence
// it triggers (processed: all of them; triggered: those it newly enrolled
// the contact in). Any event, system events included, then evaluates the
// exit conditions of the contact's active enrolments: true exits the
// enrolment (exit_condition) and cancels its pending sends. The event that
// enrolled a contact does not count toward that enrolment's exit (see
// evaluator). The tasks of the sends it schedules are enqueued once the
// event's transaction commits (store.Tx.Schedule).
func Hook(ctx context.Context, q *store.Tx, ev *events.Recorded) (processed, triggered []string, err error) {
	tenantID := ev.Contact.TenantID
	if !events.IsSystem(ev.Name) {
		seqs, err := q.SequencesTriggeredBy(ctx, queries.SequencesTriggeredByParams{TenantID: tenantID, Name: ev.Name})
		if err != nil {
			return nil, nil, err
		}
		trigger := &Event{ID: ev.EventID, Name: ev.Name, Properties: ev.Properties, Timestamp: ev.Timestamp}
		all := make([]Sequence, 0, len(seqs))
		for _, row := range seqs {
			seq, err := sequenceOf(row.ID, row.Name, row.Enabled, row.Version, row.Definition)
			if err != nil {
				return nil, nil, err
			}
			processed = append(processed, seq.ID)
			all = append(all, seq)
		}
		if triggered, err = enrollAll(ctx, q, tenantID, all, ev.ContactID, trigger); err != nil {
			return nil, nil, err
		}
	}
	return processed, triggered, exitOnEvent(ctx, q, ev)
}

// exitOnEvent evaluates the exit conditions of the contact's active
// enrolments after the event ev.
func exitOnEvent(ctx context.Context, q *store.Tx, ev *events.Recorded) error {
	tenantID := ev.Contact.TenantID
	open, err := q.EnrolmentOpenByContact(ctx, queries.EnrolmentOpenByContactParams{TenantID: tenantID, ContactID: ev.ContactID})
	if err != nil {
		return err
	}
	for _, e := range open {
		if e.Status != Active || (e.TriggerEventID != nil && *e.TriggerEventID == ev.EventID) {
			continue
		}
		seq, err := LoadSequence(ctx, q.Queries, tenantID, e.SequenceID)
		if err != nil {
			continue // deleted meanwhile: CancelSequence ends it
		}
		if seq.Def.Exit == nil {
			continue
		}
		evr, err := newEvaluator(ctx, q.Queries, ev.Contact, seq.Def, e.EnrolledAt, deref(e.TriggerEventID))
		if err != nil {
			return err
		}
		out, err := evr.holds(seq.Def.Exit, false)
		if err != nil {
			return err
		}
		if out {
			if _, err := exit(ctx, q, tenantID, e.ID, ReasonExitCondition); err != nil {
				return ignoreNoRows(err)
			}
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
