package engine

import (
	"context"

	"tidings/internal/events"
	"tidings/internal/store"
	"tidings/queries"
)

// Hook is the events.Hook of the sequence engine, run in a custom event's
// transaction. The event enrols the contact in every enabled sequence it
// triggers (processed: all of them; triggered: those it newly enrolled the
// contact in), then evaluates the exit conditions of the contact's active
// enrolments: true exits the enrolment (exit_condition) and cancels its
// pending sends. System events go through SystemHook. The event that
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
		if err := exitIfDone(ctx, q, ev.Contact, e); err != nil {
			return err
		}
	}
	return nil
}

// exitIfDone exits the active enrolment e (exit_condition) when its
// sequence's exit condition holds for contact c.
func exitIfDone(ctx context.Context, q *store.Tx, c queries.Contact, e queries.Enrolment) error {
	seq, err := LoadSequence(ctx, q.Queries, e.TenantID, e.SequenceID)
	if err != nil || seq.Def.Exit == nil {
		return nil // deleted meanwhile (CancelSequence ends it), or no exit condition
	}
	evr, err := newEvaluator(ctx, q.Queries, c, seq.Def, e.EnrolledAt, deref(e.TriggerEventID))
	if err != nil {
		return err
	}
	out, err := evr.holds(seq.Def.Exit, false)
	if err != nil || !out {
		return err
	}
	_, err = exit(ctx, q, e.TenantID, e.ID, ReasonExitCondition)
	return ignoreNoRows(err)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// SystemHook is the events.SystemHook of the sequence engine: system events
// (a send, its outcomes, an unsubscribe) may end active enrolments whose
// exit condition they make true. One read finds, for a whole batch, the
// active enrolments of its contacts whose sequence has an exit condition;
// most contacts have none, and only those are evaluated.
func SystemHook(ctx context.Context, q *store.Tx, evs []events.SystemRecorded) error {
	seen := map[[2]string]bool{}
	var p queries.DispatchOpenWithExitParams
	for _, ev := range evs {
		k := [2]string{ev.TenantID, ev.ContactID}
		if !seen[k] {
			seen[k] = true
			p.TenantIds = append(p.TenantIds, ev.TenantID)
			p.ContactIds = append(p.ContactIds, ev.ContactID)
		}
	}
	open, err := q.DispatchOpenWithExit(ctx, p)
	if err != nil || len(open) == 0 {
		return err
	}
	for _, e := range open {
		c, err := q.ContactGet(ctx, queries.ContactGetParams{TenantID: e.TenantID, ID: e.ContactID})
		if err != nil {
			return ignoreNoRows(err)
		}
		if err := exitIfDone(ctx, q, c, e); err != nil {
			return err
		}
	}
	return nil
}
