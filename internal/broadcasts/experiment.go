package broadcasts

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/experiments"
	"tidings/internal/ids"
	"tidings/internal/rules"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/internal/templates"
	"tidings/queries"
)

// Experiment limits (ADDENDUM 20).
const (
	MinVariants         = 2
	MaxVariants         = 5
	MinTestFraction     = 0.05
	MaxTestFraction     = 0.5
	DefaultTestFraction = 0.2
	MinWaitFor          = 10 * time.Second
	MaxWaitFor          = 72 * time.Hour
	maxVariantName      = 50
	maxSubject          = 998
)

// Winner reasons.
const (
	WinnerAuto   = "auto"
	WinnerManual = "manual"
)

// Variant is one arm of an A/B broadcast: its own template, its own
// subject line over the template's, or both.
type Variant struct {
	ID         string  `json:"variantId"`
	Name       string  `json:"name"`
	TemplateID *string `json:"templateId"`
	Subject    *string `json:"subject"`
}

// Experiment is an A/B broadcast's settings, defaults filled in, as
// stored in broadcasts.experiment.
type Experiment struct {
	Variants     []Variant `json:"variants"`
	TestFraction float64   `json:"testFraction"`
	Metric       string    `json:"metric"`
	// WaitFor is as given ("4h"); WaitSeconds is its length.
	WaitFor     string `json:"waitFor"`
	WaitSeconds int64  `json:"waitForSeconds"`
	AutoWinner  bool   `json:"autoWinner"`
}

// VariantInput is one variant of a create or PATCH.
type VariantInput struct {
	Name, TemplateID, Subject *string
}

// ExperimentInput is the experiment of a create or PATCH: it replaces the
// stored one whole.
type ExperimentInput struct {
	Variants     []VariantInput
	TestFraction *float64
	Metric       *string
	WaitFor      *string
	AutoWinner   *bool
}

// ExperimentOf reads a broadcast's experiment; nil for a plain broadcast.
func ExperimentOf(b queries.Broadcast) *Experiment {
	if len(b.Experiment) == 0 || string(b.Experiment) == "null" {
		return nil
	}
	var e Experiment
	if json.Unmarshal(b.Experiment, &e) != nil {
		return nil
	}
	return &e
}

// VariantOf is the variant id's index in the experiment, -1 if none.
func (e *Experiment) VariantOf(id string) int {
	for i, v := range e.Variants {
		if v.ID == id {
			return i
		}
	}
	return -1
}

// build checks in and makes the experiment with new variant ids; the
// errors name each field wrong, under experiment.
func (in ExperimentInput) build(e *apperr.Fields) *Experiment {
	x := &Experiment{TestFraction: DefaultTestFraction, AutoWinner: true}
	if n := len(in.Variants); n < MinVariants || n > MaxVariants {
		e.Add("experiment.variants", fmt.Sprintf("must hold %d-%d variants", MinVariants, MaxVariants))
	}
	names := map[string]bool{}
	for i, v := range in.Variants {
		at := fmt.Sprintf("experiment.variants[%d]", i)
		out := Variant{ID: ids.New(ids.Variant)}
		name := ""
		if v.Name != nil {
			name = strings.TrimSpace(*v.Name)
		}
		switch {
		case name == "" || utf8.RuneCountInString(name) > maxVariantName:
			e.Add(at+".name", fmt.Sprintf("is required, 1-%d characters", maxVariantName))
		case names[name]:
			e.Add(at+".name", "must differ from the other variants' names")
		}
		names[name], out.Name = true, name
		if v.TemplateID != nil {
			e.Check(ids.Valid(*v.TemplateID), at+".templateId", "must be a template id")
			t := *v.TemplateID
			out.TemplateID = &t
		}
		if v.Subject != nil {
			s := strings.TrimSpace(*v.Subject)
			e.Check(s != "" && utf8.RuneCountInString(s) <= maxSubject && !strings.ContainsAny(s, "\r\n"),
				at+".subject", fmt.Sprintf("must be one line of 1-%d characters", maxSubject))
			out.Subject = &s
		}
		if v.TemplateID == nil && v.Subject == nil {
			e.Add(at, "must name a templateId, a subject, or both")
		}
		x.Variants = append(x.Variants, out)
	}
	if in.TestFraction != nil {
		f := *in.TestFraction
		e.Check(f >= MinTestFraction && f <= MaxTestFraction, "experiment.testFraction",
			fmt.Sprintf("must be between %g and %g", MinTestFraction, MaxTestFraction))
		x.TestFraction = f
	}
	switch {
	case in.Metric == nil:
		e.Add("experiment.metric", "is required: opened or clicked")
	case *in.Metric != experiments.MetricOpened && *in.Metric != experiments.MetricClicked:
		e.Add("experiment.metric", "must be opened or clicked")
	default:
		x.Metric = *in.Metric
	}
	if in.WaitFor == nil {
		e.Add("experiment.waitFor", "is required: a duration from 10s to 72h, e.g. 4h")
	} else if d, err := rules.ParseDuration(*in.WaitFor); err != nil || d < MinWaitFor || d > MaxWaitFor {
		e.Add("experiment.waitFor", "must be a duration from 10s to 72h (a whole number and s, m, h, d or w), e.g. 4h")
	} else {
		x.WaitFor, x.WaitSeconds = *in.WaitFor, int64(d/time.Second)
	}
	if in.AutoWinner != nil {
		x.AutoWinner = *in.AutoWinner
	}
	return x
}

// checkVariants answers TEMPLATE_NOT_FOUND for a variant's template that
// does not exist.
func (s *Store) checkVariants(ctx context.Context, tenantID string, x *Experiment) error {
	for _, v := range x.Variants {
		if v.TemplateID == nil {
			continue
		}
		ok, err := s.DB.TemplateExists(ctx, queries.TemplateExistsParams{TenantID: tenantID, ID: *v.TemplateID})
		if err != nil {
			return err
		}
		if !ok {
			return templates.NotFound()
		}
	}
	return nil
}

// marshal is the stored form of x (nil: a plain broadcast).
func (x *Experiment) marshal() []byte {
	if x == nil {
		return nil
	}
	b, _ := json.Marshal(x)
	return b
}

// VariantStats are one variant's figures (ADDENDUM 20): rate is the
// metric's count over delivered, Interval its 95% Wilson score interval.
type VariantStats struct {
	Variant
	Recipients, Sent int64
	experiments.Counts
	Rate     float64
	Interval [2]float64
}

// VariantStatsOf reads the per-variant figures of an A/B broadcast, in
// the experiment's variant order (nil for a plain broadcast).
func (s *Store) VariantStatsOf(ctx context.Context, b queries.Broadcast) ([]VariantStats, error) {
	return variantStats(ctx, s.DB.Queries, b)
}

// variantStats is VariantStatsOf in q (the pick's transaction).
func variantStats(ctx context.Context, q *queries.Queries, b queries.Broadcast) ([]VariantStats, error) {
	x := ExperimentOf(b)
	if x == nil {
		return nil, nil
	}
	out := make([]VariantStats, len(x.Variants))
	for i, v := range x.Variants {
		out[i].Variant = v
	}
	if b.Snapshotted {
		rows, err := q.BroadcastVariantStats(ctx, queries.BroadcastVariantStatsParams{TenantID: b.TenantID, BroadcastID: b.ID,
			Winner: b.WinnerVariantID})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if i := x.VariantOf(r.VariantID); i >= 0 {
				out[i].Recipients, out[i].Sent = r.Recipients, r.Sent
				out[i].Delivered, out[i].Opened, out[i].Clicked = r.Delivered, r.Opened, r.Clicked
			}
		}
	}
	for i := range out {
		v := &out[i]
		v.Rate = v.Counts.Rate(x.Metric)
		v.Interval[0], v.Interval[1] = experiments.Wilson(v.Counts.Successes(x.Metric), v.Delivered)
	}
	return out, nil
}

// PickWinner picks the winner by hand (ADDENDUM 20): before or after
// waitFor, once. The rest of the audience is released to it in the same
// transaction. A broadcast already sent still takes its pick: the hash
// can put a small audience wholly in the test, leaving no rest to wait,
// and the pick is then the experiment's answer, with nothing to release.
func (s *Store) PickWinner(ctx context.Context, tenantID, id, variantID string) (queries.Broadcast, error) {
	return s.move(ctx, tenantID, id, func(q *store.Tx, b queries.Broadcast) (queries.Broadcast, error) {
		x := ExperimentOf(b)
		if x == nil {
			return b, apperr.Invalid("variantId", "the broadcast has no experiment")
		}
		if b.WinnerVariantID != nil {
			return b, apperr.Invalid("variantId", "the broadcast's winner is picked already ("+*b.WinnerVariantID+")")
		}
		if x.VariantOf(variantID) < 0 {
			return b, apperr.Invalid("variantId", "must be a variant of this broadcast")
		}
		if !pickable(b.Status) || !b.Snapshotted {
			return b, apperr.Invalid("status", "a winner is picked once the test has started (the broadcast is "+b.Status+")")
		}
		return s.release(ctx, q, b, variantID, WinnerManual)
	})
}

// PickDue picks the automatic winner of one A/B broadcast whose waitFor
// has passed (the winner task, the sweep): by the metric's rate among
// the test group's deliveries (experiments.Winner). Anything else (no
// experiment, picked already, not due, cancelled) is left alone.
func (s *Store) PickDue(ctx context.Context, tenantID, id string) error {
	_, err := s.move(ctx, tenantID, id, func(q *store.Tx, b queries.Broadcast) (queries.Broadcast, error) {
		x := ExperimentOf(b)
		if x == nil || b.WinnerVariantID != nil || b.WinnerDueAt == nil || b.WinnerDueAt.After(s.now()) ||
			!pickable(b.Status) {
			return b, nil
		}
		stats, err := variantStats(ctx, q.Queries, b)
		if err != nil {
			return b, err
		}
		counts := make([]experiments.Counts, len(stats))
		for i, v := range stats {
			counts[i] = v.Counts
		}
		w := experiments.Winner(counts, x.Metric)
		if w < 0 {
			return b, nil
		}
		return s.release(ctx, q, b, x.Variants[w].ID, WinnerAuto)
	})
	return err
}

// pickable is whether a broadcast in status can take its winner: once
// its test has started, and not once cancelled (a sent broadcast whose
// whole audience was tested still gets its answer).
func pickable(status string) bool {
	return status == Sending || status == Paused || status == Sent
}

// DueWinners picks every automatic winner that is due (the sweep, for
// winner tasks lost with Redis); it returns how many it looked at.
func (s *Store) DueWinners(ctx context.Context, limit int32) (int, error) {
	rows, err := s.DB.BroadcastsWinnerDue(ctx, limit)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		if err := s.PickDue(ctx, r.TenantID, r.ID); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// release writes the winner in q (the broadcast locked), which releases
// the held rest of the audience: from the commit on, the dispatch claims
// them (BroadcastClaimRest) and gives each the winner's variant as it
// claims it, so each goes through the dispatch like any recipient (one
// record, one message). The pick writes one row however large the rest
// (an UPDATE of the whole rest took about 0.9 s at 80,000 and held the
// broadcast's lock throughout). The dispatch timers are set once q commits.
func (s *Store) release(ctx context.Context, q *store.Tx, b queries.Broadcast, variantID, reason string) (queries.Broadcast, error) {
	out, err := q.BroadcastSetWinner(ctx, queries.BroadcastSetWinnerParams{TenantID: b.TenantID, ID: b.ID,
		VariantID: &variantID, Reason: &reason})
	if err != nil {
		return b, err
	}
	if b.Status == Sent {
		return out, nil // no rest: the whole audience was in the test
	}
	now := s.now()
	due := []time.Time{now}
	if b.LocalTime {
		if due, err = q.BroadcastRecipientsDueAt(ctx, queries.BroadcastRecipientsDueAtParams{TenantID: b.TenantID, BroadcastID: b.ID}); err != nil {
			return b, err
		}
	}
	for _, at := range due {
		q.Schedule(tasks.Timer{TenantID: b.TenantID, ID: b.ID, At: at})
	}
	return out, nil
}

// scheduleWinner sets the automatic winner's timer once q commits.
func (s *Store) scheduleWinner(q *store.Tx, tenantID, id string, at time.Time) {
	q.AfterCommit(func(ctx context.Context) { s.DB.Tasks.BroadcastWinner(ctx, tenantID, id, at) })
}
