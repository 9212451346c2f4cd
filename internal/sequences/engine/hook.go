package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"tidings/internal/events"
	"tidings/internal/store"
	"tidings/queries"
)

// Hook is the events.Hook of the sequence engine, run in a custom event's
// transaction. The event was stored with its processed sequences (the
// enabled sequences its name triggers); it enrols the contact in each of
// them (triggered: those it newly enrolled the contact in), then
// evaluates the exit conditions of the contact's active enrolments: true
// exits the enrolment (exit_condition) and cancels its pending sends.
// System events go through SystemHook. The event that enrolled a contact
// does not count toward that enrolment's exit (see evaluator). The tasks
// of the sends it schedules are enqueued once the event's transaction
// commits (store.Tx.Schedule). It is HookMany for a batch of one: one
// code path for both.
func Hook(ctx context.Context, q *store.Tx, ev *events.Recorded) (triggered []string, err error) {
	t, err := hook(ctx, q, []*events.Recorded{ev})
	if err != nil {
		return nil, err
	}
	return t[0], nil
}

// HookMany is the events.BatchHook of the sequence engine: Hook for a batch
// of custom events of distinct contacts, in the transaction that records
// them all, with a fixed number of statements however many events there
// are (the definitions of the sequences they trigger, the enrolments of
// enrollMany, the exit check's read), plus the evaluation of the exit
// conditions that a contact's active enrolments have (most have none). It
// appends to each event's TriggeredSequences what Hook returns for it.
// Events of distinct contacts touch disjoint rows (enrolments, scheduled
// sends and exits are per contact), so the batch leaves the database as
// Hook run on each event in turn would; two events of one contact in one
// batch are refused (events.Recorder puts them in separate transactions).
func HookMany(ctx context.Context, q *store.Tx, evs []*events.Recorded) error {
	triggered, err := hook(ctx, q, evs)
	if err != nil {
		return err
	}
	for i, ev := range evs {
		ev.TriggeredSequences = append(ev.TriggeredSequences, triggered[i]...)
	}
	return nil
}

// hook runs the engine for a batch of events of distinct contacts and
// returns, per event, the sequences it newly enrolled the contact in.
// The definitions are read by trigger, one read for the batch; an event
// enrols only in the sequences it was stored as processing, so what it
// reports entering is always among them (a sequence enabled between the
// two statements waits for the next event, as one enabled a moment later
// would).
func hook(ctx context.Context, q *store.Tx, evs []*events.Recorded) (triggered [][]string, err error) {
	type pair struct{ tenant, name string }
	var tp queries.SequencesTriggeredByManyParams
	seen := map[pair]bool{}
	for _, ev := range evs {
		if events.IsSystem(ev.Name) || len(ev.ProcessedSequences) == 0 {
			continue
		}
		k := pair{ev.Contact.TenantID, ev.Name}
		if !seen[k] {
			seen[k] = true
			tp.TenantIds = append(tp.TenantIds, k.tenant)
			tp.Names = append(tp.Names, k.name)
		}
	}
	bySeq := map[pair][]Sequence{}
	if len(tp.TenantIds) > 0 {
		rows, err := triggeredBy(ctx, q, tp)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			seq, err := sequenceOf(row.ID, row.Name, row.Enabled, row.Version, row.Definition)
			if err != nil {
				return nil, err
			}
			k := pair{row.TenantID, row.TriggerEvent}
			bySeq[k] = append(bySeq[k], seq)
		}
	}
	var reqs []enrolRequest
	var reqOf []int // the event of each request
	for i, ev := range evs {
		if events.IsSystem(ev.Name) {
			continue
		}
		var seqs []Sequence
		for _, s := range bySeq[pair{ev.Contact.TenantID, ev.Name}] {
			if slices.Contains(ev.ProcessedSequences, s.ID) {
				seqs = append(seqs, s)
			}
		}
		if len(seqs) > 0 {
			reqs = append(reqs, enrolRequest{tenantID: ev.Contact.TenantID, contactID: ev.ContactID, seqs: seqs,
				ev: &Event{ID: ev.EventID, Name: ev.Name, Properties: ev.Properties, Timestamp: ev.Timestamp}})
			reqOf = append(reqOf, i)
		}
	}
	// Goals first: an enrolment the batch starts cannot convert on the
	// event that started it, and an enrolment that exits converted makes
	// room for a re-enrolment the same event triggers.
	if err := convertOnEvents(ctx, q, evs); err != nil {
		return nil, err
	}
	entered, err := enrollMany(ctx, q, reqs)
	if err != nil {
		return nil, err
	}
	triggered = make([][]string, len(evs))
	for r, i := range reqOf {
		triggered[i] = entered[r]
	}
	return triggered, exitOnEvents(ctx, q, evs)
}

// triggeredBy reads the enabled sequences each (tenant, event name) pair
// triggers. One pair, a lone event's, is asked with scalar parameters
// (SequencesTriggeredBy): PostgreSQL may plan a statement over arrays
// again at every execution (its estimate follows their length, so a
// one-element array's custom plan always looks cheaper than the cached
// one), which made the one-event transaction about a fifth slower
// (measured, the fair baseline of docs/benchmarks.md); a batch pays it
// once.
func triggeredBy(ctx context.Context, q *store.Tx, tp queries.SequencesTriggeredByManyParams) ([]queries.SequencesTriggeredByManyRow, error) {
	if len(tp.TenantIds) > 1 {
		return q.SequencesTriggeredByMany(ctx, tp)
	}
	rows, err := q.SequencesTriggeredBy(ctx, queries.SequencesTriggeredByParams{TenantID: tp.TenantIds[0], Name: tp.Names[0]})
	out := make([]queries.SequencesTriggeredByManyRow, len(rows))
	for i, r := range rows {
		out[i] = queries.SequencesTriggeredByManyRow{TenantID: tp.TenantIds[0], TriggerEvent: tp.Names[0], ID: r.ID,
			Name: r.Name, Enabled: r.Enabled, Version: r.Version, Definition: r.Definition}
	}
	return out, err
}

// exitOnEvents evaluates, after a batch of events of distinct contacts,
// the exit conditions of those contacts' active enrolments. One read finds
// the active enrolments whose sequence has an exit condition (usually
// none), a second locks those in key order, and only they are evaluated.
// An enrolment that an event of the batch started is not ended by it.
func exitOnEvents(ctx context.Context, q *store.Tx, evs []*events.Recorded) error {
	type contact struct{ tenant, id string }
	by := make(map[contact]*events.Recorded, len(evs))
	var p queries.EnrolmentActiveWithExitForContactsParams
	for _, ev := range evs {
		k := contact{ev.Contact.TenantID, ev.ContactID}
		if by[k] != nil {
			return fmt.Errorf("engine: two events of contact %s in one batch", ev.ContactID)
		}
		by[k] = ev
		p.TenantIds = append(p.TenantIds, k.tenant)
		p.ContactIds = append(p.ContactIds, k.id)
	}
	var found []queries.Enrolment
	var err error
	if len(evs) == 1 {
		// A lone event (RecordCustom) asks with scalars: see triggeredBy.
		found, err = q.EnrolmentActiveWithExitOfContact(ctx, queries.EnrolmentActiveWithExitOfContactParams{
			TenantID: p.TenantIds[0], ContactID: p.ContactIds[0]})
	} else {
		found, err = q.EnrolmentActiveWithExitForContacts(ctx, p)
	}
	if err != nil || len(found) == 0 {
		return err
	}
	slices.SortFunc(found, func(a, b queries.Enrolment) int {
		return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), cmp.Compare(a.ID, b.ID))
	})
	var lp queries.EnrolmentLockActiveParams
	for _, e := range found {
		lp.TenantIds = append(lp.TenantIds, e.TenantID)
		lp.Ids = append(lp.Ids, e.ID)
	}
	open, err := q.EnrolmentLockActive(ctx, lp)
	if err != nil {
		return err
	}
	for _, e := range open {
		ev := by[contact{e.TenantID, e.ContactID}]
		if ev == nil || (e.TriggerEventID != nil && *e.TriggerEventID == ev.EventID) {
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
