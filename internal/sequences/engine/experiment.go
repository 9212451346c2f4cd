package engine

import (
	"context"
	"slices"
	"time"

	"tidings/internal/events"
	"tidings/internal/experiments"
	"tidings/internal/sequences/definition"
	"tidings/internal/store"
	"tidings/queries"
)

// ReasonConverted exits an enrolment whose goal event arrived, with
// exitOnGoal, and cancels its pending sends (ADDENDUM 20).
const ReasonConverted = "converted"

// BranchOf is the branch a new enrolment of the contact gets (ADDENDUM
// 20): the holdout when the contact falls in the sequence's holdout share,
// else its branch of the split, else the default branch. Both draws are
// hashes of the sequence's and the contact's ids (package experiments),
// independent of each other, so the split's weights hold among the
// contacts not held out, and a contact gets the same answer on every
// enrolment and in every dry run. The draw is made at enrolment rather
// than at the split step: every enrolment then counts in its group from
// the moment it entered (intent to treat), as the holdout's do, so the
// groups an experiment compares are alike but for the treatment.
func BranchOf(seq Sequence, contactID string) string {
	if experiments.InHoldout(seq.ID, contactID, seq.Def.Holdout) {
		return definition.BranchHoldout
	}
	sp := seq.Def.Split()
	if sp == nil {
		return definition.BranchDefault
	}
	// In the order of their names: the draw does not change when the YAML
	// lists the same branches in another order.
	names := seq.Def.BranchNames()
	bs := make([]experiments.Branch, len(names))
	for i, n := range names {
		bs[i] = experiments.Branch{Name: n, Weight: sp.Branches[n]}
	}
	return experiments.Split(seq.ID, contactID, bs)
}

// holdoutSpan is how long after enrolment a holdout enrolment completes:
// when the sequence would have reached its last email step, counting the
// delays on the way (trailing delays do not postpone completion, as for
// any enrolment); with a split, the longest of its branches', so that no
// treated enrolment is still running when its control has completed.
// Zero: it completes at once.
func holdoutSpan(def *definition.Definition) time.Duration {
	var longest time.Duration
	for _, b := range def.BranchNames() {
		var total, upTo time.Duration
		for _, s := range def.Steps {
			if !s.RunsFor(b) {
				continue
			}
			switch s.Kind {
			case definition.KindDelay:
				total += s.Delay
			case definition.KindEmail:
				upTo = total
			}
		}
		longest = max(longest, upTo)
	}
	return longest
}

// holdoutSeconds is what EnrolmentInsert and EnrolmentStartForContacts
// read: a holdout enrolment's span in seconds, or -1 (nil) for a treated
// one.
func holdoutSeconds(seq Sequence, branch string) float64 {
	if branch != definition.BranchHoldout {
		return -1
	}
	return holdoutSpan(seq.Def).Seconds()
}

// convertOnEvents converts, for a batch of custom events of distinct
// contacts, the enrolments whose goal each event is (ADDENDUM 20), where
// the event is recorded: one statement finds and marks them through the
// sequences_goal index, so an event that is nobody's goal costs one index
// probe and no scan of events. With exitOnGoal an open enrolment that
// converts exits (converted) and its pending sends are cancelled.
func convertOnEvents(ctx context.Context, q *store.Tx, evs []*events.Recorded) error {
	var p queries.EnrolmentConvertManyParams
	for _, ev := range evs {
		if events.IsSystem(ev.Name) {
			continue
		}
		p.TenantIds = append(p.TenantIds, ev.Contact.TenantID)
		p.ContactIds = append(p.ContactIds, ev.ContactID)
		p.Names = append(p.Names, ev.Name)
		p.Ats = append(p.Ats, ev.Timestamp)
		p.EventIds = append(p.EventIds, ev.EventID)
	}
	var converted []queries.EnrolmentConvertManyRow
	switch len(p.TenantIds) {
	case 0:
		return nil
	case 1:
		// A lone event asks with scalars (see triggeredBy).
		rows, err := q.EnrolmentConvert(ctx, queries.EnrolmentConvertParams{TenantID: p.TenantIds[0],
			Name: p.Names[0], ContactID: p.ContactIds[0], At: p.Ats[0], EventID: p.EventIds[0]})
		if err != nil {
			return err
		}
		for _, r := range rows {
			converted = append(converted, queries.EnrolmentConvertManyRow(r))
		}
	default:
		var err error
		if converted, err = q.EnrolmentConvertMany(ctx, p); err != nil {
			return err
		}
	}
	for _, c := range converted {
		if !c.Exits {
			continue
		}
		// An enrolment that had ended already is not open: exit finds
		// nothing to end and cancels nothing.
		if _, err := exit(ctx, q, c.TenantID, c.EnrolmentID, ReasonConverted); ignoreNoRows(err) != nil {
			return err
		}
	}
	return nil
}

// maxHoldoutsPerSweep bounds the holdout enrolments one sweep completes;
// the rest wait for the next.
const maxHoldoutsPerSweep = 1000

// CompleteHoldouts completes the holdout enrolments whose span has passed
// at now (the sweep's work, ADDENDUM 20: they complete when the sequence
// would have); it returns how many.
func CompleteHoldouts(ctx context.Context, db *store.DB, now time.Time) (int, error) {
	done, err := db.EnrolmentCompleteHoldouts(ctx, queries.EnrolmentCompleteHoldoutsParams{Now: now,
		Lim: maxHoldoutsPerSweep})
	return len(done), err
}

// BranchStats are one branch's numbers in a sequence experiment: its
// enrolments (entered) and converted ones, the messages its enrolments
// were sent and of those the delivered, opened and clicked ones (people's
// first open and click). ConversionRate is Converted / Entered and
// Interval its 95% Wilson score interval over n = Entered (0 and [0, 0]
// with none entered).
type BranchStats struct {
	Branch                           string
	Entered, Converted               int64
	Sent, Delivered, Opened, Clicked int64
	ConversionRate                   float64
	Interval                         [2]float64
}

// Experiment is GET /api/sequences/{id}/experiment (ADDENDUM 20).
type Experiment struct {
	Goal *definition.Goal
	// Branches are the split's branches in the order of their names (the
	// default branch alone without a split), then any other branch
	// enrolments carry (drawn under an earlier version of the sequence).
	Branches []BranchStats
	// Holdout is the control group; nil when the sequence has no holdout
	// and never had a holdout enrolment.
	Holdout *BranchStats
	// Uplift is, per branch, its conversion rate minus the holdout's; nil
	// for a branch while the holdout has no enrolment to compare with.
	Uplift map[string]*float64
}

// Experiment counts a sequence's branches: two reads, the enrolments by
// branch and the messages by branch, neither of them of events (the
// conversions were counted where the goal events were recorded).
func (s *Store) Experiment(ctx context.Context, tenantID, sequenceID string) (Experiment, error) {
	var out Experiment
	seq, err := LoadSequence(ctx, s.DB.Queries, tenantID, sequenceID)
	if err != nil {
		return out, err
	}
	out.Goal = seq.Def.Goal
	enrolled, err := s.DB.SequenceExperimentEnrolments(ctx, queries.SequenceExperimentEnrolmentsParams{
		TenantID: tenantID, SequenceID: sequenceID})
	if err != nil {
		return out, err
	}
	sent, err := s.DB.SequenceExperimentSends(ctx, queries.SequenceExperimentSendsParams{
		TenantID: tenantID, SequenceID: sequenceID})
	if err != nil {
		return out, err
	}
	by := map[string]*BranchStats{}
	get := func(name string) *BranchStats {
		if b := by[name]; b != nil {
			return b
		}
		b := &BranchStats{Branch: name}
		by[name] = b
		return b
	}
	for _, r := range enrolled {
		b := get(r.Branch)
		b.Entered, b.Converted = r.Entered, r.Converted
	}
	for _, r := range sent {
		b := get(r.Branch)
		b.Sent, b.Delivered, b.Opened, b.Clicked = r.Sent, r.Delivered, r.Opened, r.Clicked
	}
	names := seq.Def.BranchNames()
	var extra []string
	for name := range by {
		if name != definition.BranchHoldout && !slices.Contains(names, name) {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	for _, name := range append(names, extra...) {
		out.Branches = append(out.Branches, rated(*get(name)))
	}
	if h, ok := by[definition.BranchHoldout]; ok || seq.Def.Holdout > 0 {
		if !ok {
			h = &BranchStats{Branch: definition.BranchHoldout}
		}
		hs := rated(*h)
		out.Holdout = &hs
	}
	out.Uplift = make(map[string]*float64, len(out.Branches))
	for _, b := range out.Branches {
		if out.Holdout == nil || out.Holdout.Entered == 0 {
			out.Uplift[b.Branch] = nil
			continue
		}
		u := b.ConversionRate - out.Holdout.ConversionRate
		out.Uplift[b.Branch] = &u
	}
	return out, nil
}

// rated fills in the conversion rate and its interval.
func rated(b BranchStats) BranchStats {
	if b.Entered > 0 {
		b.ConversionRate = float64(min(b.Converted, b.Entered)) / float64(b.Entered)
	}
	b.Interval[0], b.Interval[1] = experiments.Wilson(b.Converted, b.Entered)
	return b
}
