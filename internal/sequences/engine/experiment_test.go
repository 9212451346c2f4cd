package engine_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/events"
	"tidings/internal/experiments"
	"tidings/internal/sequences/definition"
	"tidings/internal/sequences/engine"
	"tidings/internal/sequences/engine/enginetest"
	"tidings/internal/store"
	"tidings/queries"
)

// Sequence experiments (ADDENDUM 20): splits, holdouts and goals, on the
// engine as the binaries run it. The branch is a hash of the sequence's
// and the contact's ids, so each test picks a sequence id that puts the
// fixture's contact where the test needs it (seqFor).

// seqFor stores src under the first id <trigger event>-N whose draw puts
// contactID in branch want, and returns that id (sequences of one test
// differ in their trigger events, so they get ids of their own).
func seqFor(f *enginetest.Fixture, src, contactID, want string) string {
	f.T.Helper()
	def, err := definition.Parse([]byte(src), definition.Options{})
	if err != nil {
		f.T.Fatal(err)
	}
	for i := range 1000 {
		id := fmt.Sprintf("%s-%d", def.Trigger.Event, i)
		if engine.BranchOf(engine.Sequence{ID: id, Def: def}, contactID) == want {
			f.PutSequence(id, src, true)
			return id
		}
	}
	f.T.Fatalf("no sequence id puts %s in %s", contactID, want)
	return ""
}

// convertedAt is the time e converted, nil when it has not.
func convertedAt(f *enginetest.Fixture, e *queries.Enrolment) *time.Time {
	f.T.Helper()
	c, err := f.Svc.DB.EnrolmentConversion(context.Background(), queries.EnrolmentConversionParams{
		TenantID: e.TenantID, EnrolmentID: e.ID})
	if store.IsNoRows(err) || apperr.IsKind(err, apperr.KindNotFound) {
		return nil
	}
	if err != nil {
		f.T.Fatal(err)
	}
	return &c.ConvertedAt
}

// eventAt records a custom event for email at ts, as POST /api/events
// does.
func eventAt(f *enginetest.Fixture, email, name string, ts time.Time) *events.Recorded {
	f.T.Helper()
	rec, err := f.Svc.Events.RecordCustom(context.Background(), events.Custom{TenantID: f.Tenant, Email: email,
		Name: name, Properties: []byte(`{"plan":"pro"}`), Timestamp: ts, UpdateContact: true})
	if err != nil {
		f.T.Fatal(err)
	}
	return rec
}

const splitSeq = `name: Split
trigger: {event: signed_up}
steps:
  - split: {a: 50, b: 50}
  - send: welcome
    branch: a
  - action: email
    template: tips
    branch: b
`

// TestExperimentSplitRunsOnlyItsBranch: an enrolment of branch a is sent
// a's step and passes b's; one of b the other way round; the enrolment
// shows its branch, and the dry run of the other branch's step says
// would_skip.
func TestExperimentSplitRunsOnlyItsBranch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ branch, sends, skips, subject string }{
		{"a", "step-2", "step-3", "Hi Ann"},
		{"b", "step-3", "step-2", "Tips for " + enginetest.Contact},
	} {
		t.Run(tc.branch, func(t *testing.T) {
			t.Parallel()
			f := enginetest.New(t, "org_exp_split_"+tc.branch)
			id := seqFor(f, splitSeq, f.ContactID, tc.branch)

			// The dry run before enrolment answers the branch it would get.
			res, _, err := dryRun(f, id, tc.skips)
			if err != nil || res.Branch != tc.branch || res.Outcome != engine.WouldSkip || res.Enrolment != nil {
				t.Fatalf("dry run of %s before enrolment: %+v, %v", tc.skips, res, err)
			}
			f.Event("signed_up", nil)
			if e := f.Enrolment(id); e == nil || e.Branch != tc.branch || e.Status != engine.Active {
				t.Fatalf("enrolment %+v", e)
			}
			open := f.Open()
			if len(open) != 1 || open[0].StepID != tc.sends {
				t.Fatalf("scheduled %+v, want only %s", open, tc.sends)
			}
			for step, want := range map[string]string{tc.sends: engine.WouldSend, tc.skips: engine.WouldSkip} {
				res, _, err := dryRun(f, id, step)
				if err != nil || res.Outcome != want || res.Branch != tc.branch {
					t.Fatalf("dry run of %s: %s (branch %s), %v; want %s", step, res.Outcome, res.Branch, err, want)
				}
			}
			wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
			if msgs := f.SG.Messages(); len(msgs) != 1 || msgs[0].Mail.Subject != tc.subject {
				t.Fatalf("messages %+v", msgs)
			}
			if e := f.Enrolment(id); e.Status != engine.Completed || e.Branch != tc.branch {
				t.Fatalf("enrolment %+v", e)
			}
		})
	}
}

const holdoutSeq = `name: Held
trigger: {event: signed_up}
holdout: 50
steps:
  - send: welcome
  - delay: 2d
  - send: tips
  - delay: 9d
`

// TestExperimentHoldoutGetsNothingAndCompletes: a held-out enrolment is
// active in branch holdout, has no scheduled send and gets no message,
// and the sweep completes it once the sequence would have reached its
// last email step (2 days; the trailing delay does not count), with its
// timeline entry.
func TestExperimentHoldoutGetsNothingAndCompletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_exp_holdout")
	id := seqFor(f, holdoutSeq, f.ContactID, definition.BranchHoldout)
	res, _, err := dryRun(f, id, "")
	if err != nil || res.Branch != definition.BranchHoldout || res.Outcome != engine.WouldSkip {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	rec := f.Event("signed_up", nil)
	if len(rec.TriggeredSequences) != 1 {
		t.Fatalf("triggered %v", rec.TriggeredSequences)
	}
	e := f.Enrolment(id)
	if e == nil || e.Status != engine.Active || e.Branch != definition.BranchHoldout || e.HoldoutUntil == nil {
		t.Fatalf("enrolment %+v", e)
	}
	if d := e.HoldoutUntil.Sub(e.EnrolledAt); d < 48*time.Hour-time.Second || d > 48*time.Hour+time.Second {
		t.Fatalf("completes %v after enrolment, want 2d", d)
	}
	if open := f.Open(); len(open) != 0 {
		t.Fatalf("scheduled for the holdout: %+v", open)
	}
	wantOutcomes(t, f.RunDue())
	if n, err := engine.CompleteHoldouts(ctx, f.Svc.DB, time.Now()); err != nil || n != 0 {
		t.Fatalf("completed %d before its time, %v", n, err)
	}
	if n, err := engine.CompleteHoldouts(ctx, f.Svc.DB, time.Now().Add(49*time.Hour)); err != nil || n != 1 {
		t.Fatalf("completed %d, %v", n, err)
	}
	e = f.Enrolment(id)
	if e.Status != engine.Completed || e.CurrentStepIndex != 4 || e.EndedAt == nil {
		t.Fatalf("enrolment %+v", e)
	}
	if f.SG.Count() != 0 {
		t.Fatalf("the holdout was sent %d messages", f.SG.Count())
	}
	seen := map[string]bool{}
	for _, r := range timeline(f, 50) {
		seen[timelineType(r)] = true
	}
	if !seen["sequence_completed"] || seen["scheduled"] || seen["send"] {
		t.Fatalf("timeline %v", seen)
	}

	// A held-out enrolment in a sequence of one send has nothing to wait
	// for: it completes at once, as the treated one would once sent.
	id2 := seqFor(f, "trigger: {event: other}\nholdout: 50\nsteps: [{send: welcome}]\n", f.ContactID, definition.BranchHoldout)
	f.Event("other", nil)
	if e := f.Enrolment(id2); e.Status != engine.Completed || e.Branch != definition.BranchHoldout {
		t.Fatalf("enrolment %+v", e)
	}
	if f.SG.Count() != 0 {
		t.Fatalf("sent %d", f.SG.Count())
	}

	// Held out of a sequence that starts with its split: the dry run of the
	// enrolment (which stays at that split) shows the first email step,
	// skipped.
	id3 := seqFor(f, "trigger: {event: third}\nholdout: 50\nsteps: [{split: {a: 50, b: 50}}, {delay: 1d}, {send: welcome, branch: a}]\n",
		f.ContactID, definition.BranchHoldout)
	f.Event("third", nil)
	if res, _, err := dryRun(f, id3, ""); err != nil || res.Outcome != engine.WouldSkip || res.Step.ID != "step-3" ||
		res.Branch != definition.BranchHoldout || res.Enrolment == nil {
		t.Fatalf("dry run of the held-out enrolment: %+v, %v", res, err)
	}
}

const goalSeq = `name: Goal
trigger: {event: signed_up}
goal: {event: purchased, within: 1h}
steps:
  - send: welcome
`

// TestExperimentGoalConverts: the goal event converts an enrolment within
// its window, by the event's time: an open one, a completed one, a
// held-out one; not before enrolment, not after the window, not by the
// event that enrolled it, and only once.
func TestExperimentGoalConverts(t *testing.T) {
	t.Parallel()
	t.Run("open, then once only", func(t *testing.T) {
		t.Parallel()
		f := enginetest.New(t, "org_exp_goal_open")
		f.PutSequence("goal", goalSeq, true)
		f.Event("signed_up", nil)
		if e := f.Enrolment("goal"); convertedAt(f, e) != nil {
			t.Fatalf("converted by its trigger: %+v", e)
		}
		f.Event("page_view", nil) // not the goal
		if e := f.Enrolment("goal"); convertedAt(f, e) != nil {
			t.Fatalf("converted by another event: %+v", e)
		}
		at := time.Now().Add(-time.Millisecond).Truncate(time.Microsecond)
		eventAt(f, enginetest.Contact, "purchased", time.Now())
		e := f.Enrolment("goal")
		if convertedAt(f, e) == nil || convertedAt(f, e).Before(at) || e.Status != engine.Active {
			t.Fatalf("enrolment %+v", e)
		}
		first := *convertedAt(f, e)
		eventAt(f, enginetest.Contact, "purchased", time.Now())
		if e := f.Enrolment("goal"); !convertedAt(f, e).Equal(first) {
			t.Fatalf("converted again: %v, first %v", convertedAt(f, e), first)
		}
	})
	t.Run("completed, within the window", func(t *testing.T) {
		t.Parallel()
		f := enginetest.New(t, "org_exp_goal_done")
		f.PutSequence("goal", goalSeq, true)
		f.Event("signed_up", nil)
		wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
		if e := f.Enrolment("goal"); e.Status != engine.Completed {
			t.Fatalf("%+v", e)
		}
		eventAt(f, enginetest.Contact, "purchased", time.Now())
		if e := f.Enrolment("goal"); convertedAt(f, e) == nil || e.Status != engine.Completed {
			t.Fatalf("completed enrolment not converted: %+v", e)
		}
	})
	t.Run("holdout", func(t *testing.T) {
		t.Parallel()
		f := enginetest.New(t, "org_exp_goal_holdout")
		id := seqFor(f, "trigger: {event: signed_up}\nholdout: 50\ngoal: {event: purchased, within: 1h}\nsteps: [{send: welcome}, {delay: 1d}, {send: tips}]\n",
			f.ContactID, definition.BranchHoldout)
		f.Event("signed_up", nil)
		eventAt(f, enginetest.Contact, "purchased", time.Now())
		if e := f.Enrolment(id); convertedAt(f, e) == nil || e.Branch != definition.BranchHoldout {
			t.Fatalf("holdout not converted: %+v", e)
		}
	})
	t.Run("outside the window", func(t *testing.T) {
		t.Parallel()
		f := enginetest.New(t, "org_exp_goal_late")
		f.PutSequence("goal", goalSeq, true)
		f.Event("signed_up", nil)
		// An event timed before the enrolment does not count.
		eventAt(f, enginetest.Contact, "purchased", time.Now().Add(-time.Minute))
		if e := f.Enrolment("goal"); convertedAt(f, e) != nil {
			t.Fatalf("converted by an event before enrolment: %+v", e)
		}
		// Nor one more than goal.within after it.
		// (The sequence is moved back too: enrolments from before its
		// creation belong to an earlier sequence of the same id.)
		f.Exec(`UPDATE sequences SET created_at = now() - interval '2 hours' WHERE tenant_id = $1`, f.Tenant)
		f.Exec(`UPDATE enrolments SET enrolled_at = now() - interval '61 minutes' WHERE tenant_id = $1`, f.Tenant)
		eventAt(f, enginetest.Contact, "purchased", time.Now())
		if e := f.Enrolment("goal"); convertedAt(f, e) != nil {
			t.Fatalf("converted after the window: %+v", e)
		}
		// Inside it by the event's time, recorded late: it counts.
		eventAt(f, enginetest.Contact, "purchased", time.Now().Add(-2*time.Minute))
		if e := f.Enrolment("goal"); convertedAt(f, e) == nil {
			t.Fatalf("not converted by an event inside the window: %+v", e)
		}
	})
}

// TestExperimentExitOnGoal: with exitOnGoal the converted enrolment exits
// converted and its pending send is cancelled converted.
func TestExperimentExitOnGoal(t *testing.T) {
	t.Parallel()
	f := enginetest.New(t, "org_exp_exit_goal")
	f.PutSequence("trial", `name: Trial
trigger: {event: signed_up}
goal: {event: purchased, within: 7d}
exitOnGoal: true
steps:
  - send: welcome
  - delay: 1d
  - send: tips
`, true)
	f.Event("signed_up", nil)
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
	if open := f.Open(); len(open) != 1 || open[0].StepID != "step-3" {
		t.Fatalf("%+v", open)
	}
	eventAt(f, enginetest.Contact, "purchased", time.Now())
	e := f.Enrolment("trial")
	if e.Status != engine.Exited || e.ExitReason == nil || *e.ExitReason != engine.ReasonConverted || convertedAt(f, e) == nil {
		t.Fatalf("enrolment %+v", e)
	}
	if c := f.Scheduled("cancelled", engine.ReasonConverted); len(c) != 1 || c[0].StepID != "step-3" {
		t.Fatalf("cancelled converted: %+v", c)
	}
	f.MakeDue()
	wantOutcomes(t, f.RunDue())
	if f.SG.Count() != 1 {
		t.Fatalf("sent %d", f.SG.Count())
	}
}

// TestExperimentCounts: Store.Experiment counts each branch's enrolments,
// messages and conversions (events recorded one by one and in a batch, as
// the group commit does), with the conversion rate, its Wilson interval
// and the uplift over the holdout.
func TestExperimentCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_exp_counts")
	const src = `name: Trial
trigger: {event: signed_up}
holdout: 20
goal: {event: purchased, within: 7d}
steps:
  - split: {a: 50, b: 50}
  - {send: welcome, branch: a}
  - {send: tips, branch: b}
`
	f.PutSequence("trial", src, true)
	def, err := definition.Parse([]byte(src), definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	emails := make([]string, n)
	var batch []events.Custom
	for i := range n {
		emails[i] = fmt.Sprintf("c%02d@example.com", i)
		if _, err := f.Svc.Contacts.Create(ctx, f.Tenant, contacts.Input{Email: emails[i]}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Svc.Tenants.AddToWhitelist(ctx, f.Tenant, emails[i]); err != nil {
			t.Fatal(err)
		}
		rec := eventAt(f, emails[i], "signed_up", time.Now())
		if len(rec.TriggeredSequences) != 1 {
			t.Fatalf("%s triggered %v", emails[i], rec.TriggeredSequences)
		}
		if i%3 == 0 {
			batch = append(batch, events.Custom{TenantID: f.Tenant, Email: emails[i], Name: "purchased",
				Properties: []byte(`{}`), Timestamp: time.Now(), UpdateContact: true})
		}
	}
	f.RunDue()
	// Half the conversions one by one, half in one batch.
	for _, c := range batch[:len(batch)/2] {
		eventAt(f, c.Email, "purchased", time.Now())
	}
	if _, errs := f.Svc.Events.RecordCustomMany(ctx, batch[len(batch)/2:]); errs[0] != nil {
		t.Fatal(errs[0])
	}
	type counts struct{ entered, sent, converted int64 }
	want := map[string]*counts{"a": {}, "b": {}, "holdout": {}}
	for i, email := range emails {
		var id string
		if err := f.Svc.DB.Pool.QueryRow(ctx, `SELECT id FROM contacts WHERE tenant_id = $1 AND email = $2`, f.Tenant, email).Scan(&id); err != nil {
			t.Fatal(err)
		}
		c := want[engine.BranchOf(engine.Sequence{ID: "trial", Def: def}, id)]
		c.entered++
		if c != want["holdout"] {
			c.sent++
		}
		if i%3 == 0 {
			c.converted++
		}
	}
	x, err := f.Svc.Enrolments.Experiment(ctx, f.Tenant, "trial")
	if err != nil {
		t.Fatal(err)
	}
	if x.Goal == nil || x.Goal.Event != "purchased" || len(x.Branches) != 2 || x.Holdout == nil {
		t.Fatalf("%+v", x)
	}
	for _, b := range append(x.Branches, *x.Holdout) {
		w := want[b.Branch]
		if w == nil || b.Entered != w.entered || b.Sent != w.sent || b.Converted != w.converted {
			t.Errorf("%s: entered %d sent %d converted %d, want %+v", b.Branch, b.Entered, b.Sent, b.Converted, w)
			continue
		}
		rate := 0.0
		if w.entered > 0 {
			rate = float64(w.converted) / float64(w.entered)
		}
		lo, hi := experiments.Wilson(w.converted, w.entered)
		if b.ConversionRate != rate || b.Interval != [2]float64{lo, hi} {
			t.Errorf("%s: rate %v interval %v, want %v [%v %v]", b.Branch, b.ConversionRate, b.Interval, rate, lo, hi)
		}
	}
	for _, b := range x.Branches {
		u := x.Uplift[b.Branch]
		if x.Holdout.Entered == 0 {
			if u != nil {
				t.Errorf("uplift of %s with an empty holdout: %v", b.Branch, *u)
			}
			continue
		}
		if u == nil || math.Abs(*u-(b.ConversionRate-x.Holdout.ConversionRate)) > 1e-12 {
			t.Errorf("uplift of %s: %v", b.Branch, u)
		}
	}
	if _, err := f.Svc.Enrolments.Experiment(ctx, f.Tenant, "nope"); err == nil {
		t.Fatal("experiment of a missing sequence")
	}
}
