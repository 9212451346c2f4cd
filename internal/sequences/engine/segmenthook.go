package engine

import (
	"context"

	"tidings/internal/segments"
	"tidings/internal/sequences/definition"
	"tidings/internal/store"
	"tidings/queries"
)

// SegmentHook is segments.Store.OnChange (ADDENDUM 21): in the transaction
// that writes live segments' membership changes, it enrols each contact
// that entered (or exited) a segment in the enabled sequences whose
// trigger is {segment, on: entered|exited}, with the re-enrolment rules of
// an event trigger (Enroll). A contact that was a member when the sequence
// was created is not enrolled: only changes start sequences.
func SegmentHook(ctx context.Context, q *store.Tx, tenantID string, changes []segments.Change) error {
	type key struct{ segment, on string }
	bySeg := map[key][]Sequence{}
	for _, ch := range changes {
		k := key{ch.SegmentID, definition.TriggerExited}
		if ch.Entered {
			k.on = definition.TriggerEntered
		}
		seqs, ok := bySeg[k]
		if !ok {
			rows, err := q.SequencesTriggeredBySegment(ctx, queries.SequencesTriggeredBySegmentParams{TenantID: tenantID,
				SegmentID: k.segment, TriggerOn: k.on})
			if err != nil {
				return err
			}
			for _, r := range rows {
				seq, err := sequenceOf(r.ID, r.Name, r.Enabled, r.Version, r.Definition)
				if err != nil {
					return err
				}
				seqs = append(seqs, seq)
			}
			bySeg[k] = seqs
		}
		for _, seq := range seqs {
			if _, _, err := Enroll(ctx, q, tenantID, seq, ch.ContactID, nil); err != nil {
				return err
			}
		}
	}
	return nil
}
