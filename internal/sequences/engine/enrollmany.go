package engine

import (
	"context"
	"encoding/json"

	"tidings/internal/ids"
	"tidings/internal/metrics"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/queries"
)

// enrollAll is Enroll for every sequence an event triggers, in the event's
// transaction, with a fixed number of statements however many sequences
// match: the newest enrolment of each (one read), the new enrolments with
// their sequence_entered entries (one statement), the first scheduled
// sends with their scheduled entries (one statement) and their metrics
// (one statement). The rules are Enroll's: an open enrolment, or any
// enrolment without trigger.reenroll, keeps the contact out; a sequence
// without an email step completes at once. It returns the ids of the
// sequences the contact newly entered, in the order of seqs.
func enrollAll(ctx context.Context, q *store.Tx, tenantID string, seqs []Sequence, contactID string, ev *Event) ([]string, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	seqIDs := make([]string, len(seqs))
	for i, s := range seqs {
		seqIDs[i] = s.ID
	}
	latest, err := q.EnrolmentLatestMany(ctx, queries.EnrolmentLatestManyParams{TenantID: tenantID,
		ContactID: contactID, SequenceIds: seqIDs})
	if err != nil {
		return nil, err
	}
	blocked := map[string]bool{}
	for _, l := range latest {
		blocked[l.SequenceID] = isOpen(l.Status)
	}
	type start struct {
		seq   Sequence
		plan  planned
		enrID string
	}
	var starts []start
	p := queries.EnrolmentStartManyParams{TenantID: tenantID, ContactID: contactID}
	if ev != nil {
		p.EventID, p.EventName = &ev.ID, &ev.Name
	}
	for _, s := range seqs {
		if open, seen := blocked[s.ID]; seen && (open || !s.Def.Trigger.Reenroll) {
			continue
		}
		pl := planFirst(s)
		st := start{seq: s, plan: pl, enrID: ids.New(ids.Enrolment)}
		starts = append(starts, st)
		p.Ids = append(p.Ids, st.enrID)
		p.SequenceIds = append(p.SequenceIds, s.ID)
		p.CurrentSteps = append(p.CurrentSteps, pl.at)
		p.CurrentStepIndexes = append(p.CurrentStepIndexes, pl.index)
		p.Versions = append(p.Versions, s.Version)
	}
	if len(starts) == 0 {
		return nil, nil
	}
	rows, err := q.EnrolmentStartMany(ctx, p)
	if err != nil {
		return nil, err
	}
	inserted := make(map[string]queries.Enrolment, len(rows))
	for _, r := range rows {
		inserted[r.ID] = queries.Enrolment(r)
	}
	var triggered []string
	var next []nextRow
	for _, st := range starts {
		e, ok := inserted[st.enrID]
		if !ok {
			continue // a concurrent enrolment of the same contact won the open slot
		}
		triggered = append(triggered, st.seq.ID)
		if !st.plan.found {
			if _, err := end(ctx, q, tenantID, e.ID, Completed, "", nil); err != nil {
				return nil, err
			}
			continue
		}
		next = append(next, nextRow{TenantID: tenantID, ID: ids.New(ids.ScheduledSend), ContactID: contactID,
			EnrolmentID: e.ID, SequenceID: st.seq.ID, SequenceVersion: st.seq.Version, StepID: st.plan.step.ID,
			TemplateID: st.plan.step.Template, DelaySeconds: st.plan.delay.Seconds()})
	}
	if len(next) == 0 {
		return triggered, nil
	}
	j, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	sends, err := q.DispatchSchedule(ctx, j)
	if err != nil {
		return nil, err
	}
	facts := make([]metrics.Fact, len(sends))
	for i, ss := range sends {
		facts[i] = metrics.Fact{TenantID: ss.TenantID, SequenceID: ss.SequenceID, TemplateID: ss.TemplateID,
			At: ss.CreatedAt, Counts: metrics.Counts{Scheduled: 1}}
		q.Schedule(tasks.Timer{TenantID: ss.TenantID, ID: ss.ID, At: ss.ScheduledFor})
	}
	return triggered, metrics.Count(ctx, q, facts...)
}
