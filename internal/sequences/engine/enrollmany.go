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

// enrolRequest is one event's enrolments: the contact and the enabled
// sequences the event triggers.
type enrolRequest struct {
	tenantID, contactID string
	seqs                []Sequence
	ev                  *Event
}

// enrollMany is Enroll for every sequence each event of a batch triggers
// (one request per event, distinct contacts), in the events' transaction,
// with a fixed number of statements however many events and sequences
// there are: the newest enrolment of each contact in each sequence (one
// read), the new enrolments (one statement), the first scheduled sends
// (one statement) and their metrics (one statement); each enrolment and
// scheduled send is also its timeline entry (schemas 0032 and 0033). The
// rules are Enroll's: an open enrolment, or any enrolment without
// trigger.reenroll, keeps the contact out; a sequence without an email
// step completes at once. It returns, per request, the ids of the
// sequences its contact newly entered, in the order of its seqs.
func enrollMany(ctx context.Context, q *store.Tx, reqs []enrolRequest) ([][]string, error) {
	triggered := make([][]string, len(reqs))
	var lp queries.EnrolmentLatestForContactsParams
	for _, r := range reqs {
		for _, s := range r.seqs {
			lp.TenantIds = append(lp.TenantIds, r.tenantID)
			lp.ContactIds = append(lp.ContactIds, r.contactID)
			lp.SequenceIds = append(lp.SequenceIds, s.ID)
		}
	}
	if len(lp.SequenceIds) == 0 {
		return triggered, nil
	}
	latest, err := q.EnrolmentLatestForContacts(ctx, lp)
	if err != nil {
		return nil, err
	}
	type key struct{ tenant, contact, seq string }
	blocked := make(map[key]bool, len(latest))
	for _, l := range latest {
		blocked[key{l.TenantID, l.ContactID, l.SequenceID}] = isOpen(l.Status)
	}
	type start struct {
		req   int
		seq   Sequence
		plan  planned
		enrID string
		// holdout is holdoutSeconds: -1 for a treated enrolment.
		holdout float64
	}
	var starts []start
	var p queries.EnrolmentStartForContactsParams
	for i, r := range reqs {
		for _, s := range r.seqs {
			if open, seen := blocked[key{r.tenantID, r.contactID, s.ID}]; seen && (open || !s.Def.Trigger.Reenroll) {
				continue
			}
			branch := BranchOf(s, r.contactID)
			pl := planFirst(s, branch)
			st := start{req: i, seq: s, plan: pl, enrID: ids.New(ids.Enrolment), holdout: holdoutSeconds(s, branch)}
			starts = append(starts, st)
			p.TenantIds = append(p.TenantIds, r.tenantID)
			p.Ids = append(p.Ids, st.enrID)
			p.SequenceIds = append(p.SequenceIds, s.ID)
			p.ContactIds = append(p.ContactIds, r.contactID)
			p.CurrentSteps = append(p.CurrentSteps, pl.at)
			p.CurrentStepIndexes = append(p.CurrentStepIndexes, pl.index)
			p.Versions = append(p.Versions, s.Version)
			p.EventIds = append(p.EventIds, r.ev.ID)
			p.EventNames = append(p.EventNames, r.ev.Name)
			p.Branches = append(p.Branches, branch)
			p.HoldoutSeconds = append(p.HoldoutSeconds, st.holdout)
		}
	}
	if len(starts) == 0 {
		return triggered, nil
	}
	rows, err := q.EnrolmentStartForContacts(ctx, p)
	if err != nil {
		return nil, err
	}
	inserted := make(map[string]queries.Enrolment, len(rows))
	for _, r := range rows {
		inserted[r.ID] = r
	}
	var next []nextRow
	for _, st := range starts {
		e, ok := inserted[st.enrID]
		if !ok {
			continue // a concurrent enrolment of the same contact won the open slot
		}
		triggered[st.req] = append(triggered[st.req], st.seq.ID)
		if !st.plan.found {
			if st.holdout > 0 {
				continue // held out: the sweep completes it at holdout_until
			}
			if _, err := end(ctx, q, e.TenantID, e.ID, Completed, "", nil); err != nil {
				return nil, err
			}
			continue
		}
		next = append(next, nextRow{TenantID: e.TenantID, ID: ids.New(ids.ScheduledSend), ContactID: e.ContactID,
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
