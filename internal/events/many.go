package events

import (
	"context"
	"encoding/json"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/store"
	"tidings/queries"
)

// RecordCustomMany records a batch of custom events, each as RecordCustom
// would, in as few transactions as it can: one for the whole batch when
// its events are of distinct contacts. A contact's second event in the
// batch goes into a second transaction, begun once the first committed
// (and so on), so the events of one contact are applied one after the
// other as separate requests would be. It returns, per event in the
// batch's order, the record or the error RecordCustom would have returned
// (CONTACT_NOT_FOUND for an unknown email, which does not disturb the
// others).
//
// One event cannot fail the others (docs/decisions.md "Events: group
// commit"): a transaction that fails before its commit (a row the
// database refuses, a hook's error, a connection lost) has stored nothing,
// and its events are recorded again one by one, each in its own
// transaction, so only an event that fails on its own fails. A commit
// that was sent and never answered (no SQLSTATE: the connection died) may
// or may not have stored the batch; its events are not written again
// (that could store them twice) and each gets the error, as a single
// event's caller would.
func (r *Recorder) RecordCustomMany(ctx context.Context, ins []Custom) ([]*Recorded, []error) {
	recs := make([]*Recorded, len(ins))
	errs := make([]error, len(ins))
	for _, round := range rounds(ins) {
		r.recordRound(ctx, ins, round, recs, errs)
	}
	return recs, errs
}

// contactKey is what names a contact among the events of a batch: the
// email is looked up as given, within the tenant.
type contactKey struct{ tenant, email string }

// rounds splits the positions of a batch so that no round holds two
// events of one contact: a contact's k-th event goes into round k.
func rounds(ins []Custom) [][]int {
	seen := make(map[contactKey]int, len(ins))
	var out [][]int
	for i, in := range ins {
		k := contactKey{in.TenantID, in.Email}
		n := seen[k]
		seen[k] = n + 1
		if n == len(out) {
			out = append(out, make([]int, 0, len(ins)))
		}
		out[n] = append(out[n], i)
	}
	return out
}

// recordRound records the events at positions idx (distinct contacts) in
// one transaction, or one by one when that transaction fails (see
// RecordCustomMany).
func (r *Recorder) recordRound(ctx context.Context, ins []Custom, idx []int, recs []*Recorded, errs []error) {
	if len(idx) == 1 {
		i := idx[0]
		recs[i], errs[i] = r.RecordCustom(ctx, ins[i])
		return
	}
	var batch []*Recorded
	committing := false
	err := r.DB.InTx(ctx, func(q *store.Tx) error {
		var err error
		if batch, err = recordMany(ctx, q.Queries, ins, idx); err != nil {
			return err
		}
		found := make([]*Recorded, 0, len(batch))
		for _, rec := range batch {
			if rec != nil {
				found = append(found, rec)
			}
		}
		if err := r.runBatchHooks(ctx, q, found); err != nil {
			return err
		}
		if err := auditBatch(ctx, q, ins, idx, batch); err != nil {
			return err
		}
		committing = true
		return nil
	})
	switch {
	case err == nil:
		for j, i := range idx {
			if batch[j] == nil {
				errs[i] = apperr.NotFound("CONTACT_NOT_FOUND", "contact")
			} else {
				recs[i] = batch[j]
			}
		}
	case committing && store.SQLState(err) == "":
		for _, i := range idx {
			errs[i] = err
		}
	default:
		for _, i := range idx {
			recs[i], errs[i] = r.RecordCustom(ctx, ins[i])
		}
	}
}

// recordMany stores the events at positions idx in one statement
// (EventRecordByEmailMany) and returns their records in the order of idx,
// nil for an event whose contact does not exist.
func recordMany(ctx context.Context, q *queries.Queries, ins []Custom, idx []int) ([]*Recorded, error) {
	n := len(idx)
	p := queries.EventRecordByEmailManyParams{TenantIds: make([]string, n), Emails: make([]string, n),
		Ids: make([]string, n), Names: make([]string, n), Properties: make([]json.RawMessage, n),
		OccurredAts: make([]time.Time, n), UpdateContacts: make([]bool, n)}
	pos := make(map[string]int, n)
	for j, i := range idx {
		in := ins[i]
		id := ids.New(ids.Event)
		pos[id] = j
		p.TenantIds[j], p.Emails[j], p.Ids[j], p.Names[j] = in.TenantID, in.Email, id, in.Name
		p.Properties[j], p.OccurredAts[j], p.UpdateContacts[j] = in.Properties, in.Timestamp, in.UpdateContact
	}
	rows, err := q.EventRecordByEmailMany(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]*Recorded, n)
	for _, row := range rows {
		j, ok := pos[row.EventID]
		if !ok {
			continue
		}
		out[j] = recorded(ins[idx[j]], queries.EventRecordByEmailRow(row))
	}
	return out, nil
}

// runBatchHooks runs the hooks on a batch of recorded events (BatchHooks,
// else each Hook on each event).
func (r *Recorder) runBatchHooks(ctx context.Context, q *store.Tx, recs []*Recorded) error {
	if len(recs) == 0 {
		return nil
	}
	if len(r.BatchHooks) > 0 {
		for _, h := range r.BatchHooks {
			if err := h(ctx, q, recs); err != nil {
				return err
			}
		}
		return nil
	}
	for _, rec := range recs {
		if err := r.runHooks(ctx, q, rec); err != nil {
			return err
		}
	}
	return nil
}

// auditBatch writes, in the batch's transaction, the audit entries of the
// requests whose events it stored (an event whose contact is unknown is
// refused: it has none).
func auditBatch(ctx context.Context, q *store.Tx, ins []Custom, idx []int, batch []*Recorded) error {
	var as []*store.Audit
	var eventIDs []string
	for j, i := range idx {
		if a := ins[i].Audit; a != nil && batch[j] != nil {
			as, eventIDs = append(as, a), append(eventIDs, batch[j].EventID)
		}
	}
	return q.AuditMany(ctx, as, eventIDs)
}
