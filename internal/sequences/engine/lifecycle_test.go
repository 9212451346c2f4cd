package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/events"
	"tidings/internal/metrics"
	"tidings/internal/page"
	"tidings/internal/sequences/engine"
	"tidings/internal/sequences/engine/enginetest"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/queries"
)

// The life of an enrolment, from the event that starts it to its end:
// what the engine schedules, sends, holds and ends, and what its dry run
// predicts. Each test is one tenant of enginetest; sends are run by hand
// (RunDue) where the worker's task would run them.

var wantOutcomes = enginetest.WantOutcomes

// dripYAML is the two-step drip of enginetest.Onboarding.
const dripYAML = enginetest.Onboarding

// timeline is the contact's timeline, newest first, at most limit
// entries.
func timeline(f *enginetest.Fixture, limit int) []queries.TimelineRow {
	f.T.Helper()
	rows, _, err := f.Svc.Feed.Timeline(context.Background(), f.Tenant, f.ContactID, time.Time{}, page.Params{Limit: limit})
	if err != nil {
		f.T.Fatal(err)
	}
	return rows
}

// timelineType is an entry's type as the timeline shows it.
func timelineType(r queries.TimelineRow) string {
	if r.Kind == "event" {
		return events.TimelineType(r.Name)
	}
	return r.Name
}

// tenantMetrics are the tenant's counters of this month.
func tenantMetrics(f *enginetest.Fixture) metrics.Counters {
	f.T.Helper()
	r, err := f.Svc.Metrics.Tenant(context.Background(), f.Tenant, metrics.Query{})
	if err != nil {
		f.T.Fatal(err)
	}
	return r.Counters
}

func dryRun(f *enginetest.Fixture, seqID, stepID string) (engine.DryRunResult, *engine.Preview, error) {
	return f.Svc.Enrolments.DryRunWithPreview(context.Background(), f.Tenant, seqID, f.ContactID, stepID)
}

func TestSequenceEnrolOnEventSendsStepsThenCompletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_seq_drip")
	f.PutSequence("onboarding", dripYAML, true)
	rec := f.Event("signed_up", map[string]any{"plan": "pro"})
	if strings.Join(rec.ProcessedSequences, ",") != "onboarding" || strings.Join(rec.TriggeredSequences, ",") != "onboarding" {
		t.Fatalf("processed %v, triggered %v", rec.ProcessedSequences, rec.TriggeredSequences)
	}
	pending := f.Open()
	if len(pending) != 1 || pending[0].StepID != "step-1" || pending[0].Status != "pending" {
		t.Fatalf("%+v", pending)
	}
	// A leading send is due now.
	if at := pending[0].ScheduledFor; time.Since(at) < -time.Second || time.Since(at) > 10*time.Second {
		t.Fatalf("leading send scheduled for %v", at)
	}
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
	if f.SG.Count() != 1 || f.SG.Messages()[0].Mail.Subject != "Hi Ann" {
		t.Fatalf("provider got %d", f.SG.Count())
	}
	// The delay counts from the send: the next step is a day away.
	next := f.Open()
	if len(next) != 1 || next[0].StepID != "tips" {
		t.Fatalf("%+v", next)
	}
	if d := time.Until(next[0].ScheduledFor); d < 23*time.Hour || d > 25*time.Hour {
		t.Fatalf("second step due in %v", d)
	}
	if e := f.Enrolment("onboarding"); e.Status != "active" || e.CurrentStepIndex != 3 {
		t.Fatalf("%+v", e)
	}
	wantOutcomes(t, f.RunDue()) // not due yet
	f.MakeDue()
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
	msgs := f.SG.Messages()
	if len(msgs) != 2 || !strings.Contains(msgs[1].Mail.Content[0].Value, "Tip: pro") {
		t.Fatalf("second message: %+v", msgs)
	}
	if e := f.Enrolment("onboarding"); e.Status != "completed" {
		t.Fatalf("%+v", e)
	}
	st, err := f.Svc.Enrolments.Status(ctx, f.Tenant, "onboarding")
	if err != nil || st.Version != 1 || st.Completed != 1 {
		t.Fatalf("%+v, %v", st, err)
	}
	if sent := f.Scheduled("sent", ""); len(sent) != 2 || sent[0].SendID == nil {
		t.Fatalf("%+v", sent)
	}
	// The timeline tells the story.
	seen := map[string]bool{}
	for _, r := range timeline(f, 50) {
		seen[timelineType(r)] = true
	}
	for _, typ := range []string{"sequence_entered", "scheduled", "send", "sequence_completed"} {
		if !seen[typ] {
			t.Fatalf("timeline lacks %s: %v", typ, seen)
		}
	}
	// Without reenroll the contact never enters again.
	if rec := f.Event("signed_up", nil); len(rec.TriggeredSequences) != 0 || len(rec.ProcessedSequences) != 1 {
		t.Fatalf("processed %v, triggered %v", rec.ProcessedSequences, rec.TriggeredSequences)
	}
}

func TestSequenceReenrolAfterEnd(t *testing.T) {
	t.Parallel()
	f := enginetest.New(t, "org_seq_reenrol")
	f.PutSequence("again", "name: A\ntrigger: {event: ping, reenroll: true}\nsteps: [{send: welcome}]\n", true)
	f.Event("ping", nil)
	// While enrolled, the contact is not enrolled twice.
	if rec := f.Event("ping", nil); len(rec.TriggeredSequences) != 0 {
		t.Fatalf("triggered %v", rec.TriggeredSequences)
	}
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
	if rec := f.Event("ping", nil); len(rec.TriggeredSequences) != 1 {
		t.Fatalf("triggered %v", rec.TriggeredSequences)
	}
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
	if f.SG.Count() != 2 {
		t.Fatalf("sent %d", f.SG.Count())
	}
}

func TestSequenceGateBlockedExitConditionAndSkip(t *testing.T) {
	t.Parallel()
	f := enginetest.New(t, "org_seq_gates")
	f.PutSequence("gated", `name: G
trigger: {event: go}
gates: {operator: and, conditions: [{type: property, field: country, operator: equals, value: NL}]}
steps: [{send: welcome}]
`, true)
	f.PutSequence("exits", `name: E
trigger: {event: go}
exit: {operator: or, conditions: [{type: event, name: purchase, operator: occurred}, {type: event, name: go, operator: occurred}]}
steps: [{delay: 1h}, {send: welcome}]
`, true)
	f.PutSequence("skips", `name: S
trigger: {event: go}
steps:
  - {id: a, action: email, template: welcome, conditions: {operator: and, conditions: [{type: derived, field: totalOpens, operator: greaterThan, value: 0}]}}
  - {send: tips}
`, true)
	f.Event("go", nil)
	// The enrolling event does not count toward the exit condition.
	if e := f.Enrolment("exits"); e.Status != "active" {
		t.Fatalf("%+v", e)
	}
	dr, _, err := dryRun(f, "gated", "")
	path, _ := json.Marshal(dr.DecisionPath)
	if err != nil || dr.Outcome != "blocked" || !strings.Contains(string(path), `country equals \"NL\" (contact has \"(not set)\")`) {
		t.Fatalf("%s %s, %v", dr.Outcome, path, err)
	}
	if dr, _, err := dryRun(f, "skips", ""); err != nil || dr.Outcome != "would_skip" {
		t.Fatalf("%s, %v", dr.Outcome, err)
	}
	out := f.RunDue() // gated: blocked; skips: a skipped
	if len(out) != 2 {
		t.Fatalf("%v", out)
	}
	if e := f.Enrolment("gated"); e.Status != "exited" || e.ExitReason == nil || *e.ExitReason != "gate_blocked" {
		t.Fatalf("%+v", e)
	}
	if c := f.Scheduled("cancelled", "gate_blocked"); len(c) != 1 || c[0].SequenceID != "gated" {
		t.Fatalf("%+v", c)
	}
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent) // skips: tips
	if ms := f.SG.Messages(); len(ms) != 1 || !strings.HasPrefix(ms[0].Mail.Subject, "Tips") {
		t.Fatalf("%d messages", len(ms))
	}
	if dr, preview, err := dryRun(f, "exits", ""); err != nil || dr.Outcome != "would_send" || preview == nil ||
		preview.Subject != "Hi Ann" || dr.Enrolment == nil {
		t.Fatalf("%+v, %+v, %v", dr, preview, err)
	}
	// A new event satisfies the exit condition.
	f.Event("purchase", nil)
	if e := f.Enrolment("exits"); e.Status != "exited" || e.ExitReason == nil || *e.ExitReason != "exit_condition" {
		t.Fatalf("%+v", e)
	}
	if c := f.Scheduled("cancelled", "exit_condition"); len(c) != 1 {
		t.Fatalf("%+v", c)
	}
	if _, _, err := dryRun(f, "skips", "nope"); !apperr.IsCode(err, "VALIDATION_ERROR") {
		t.Fatalf("dry run of a step that is not there: %v", err)
	}
}

func TestSequenceDisableHoldsEnableReleases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_seq_hold")
	f.PutSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.Event("go", nil)
	setEnabled := func(on bool) []tasks.Timer {
		var timers []tasks.Timer
		f.Tx(func(q *store.Tx) error {
			if _, err := f.Svc.DB.Pool.Exec(ctx, `UPDATE sequences SET enabled = $2 WHERE tenant_id = $1 AND id = 's'`, f.Tenant, on); err != nil {
				return err
			}
			err := engine.SetEnabled(ctx, q, f.Tenant, "s", on)
			timers = q.Scheduled()
			return err
		})
		return timers
	}
	setEnabled(false)
	if e := f.Enrolment("s"); e.Status != "paused" {
		t.Fatalf("%+v", e)
	}
	if _, _, err := f.Svc.Enrolments.Enrol(ctx, f.Tenant, "s", f.ContactID); !apperr.IsCode(err, "VALIDATION_ERROR") {
		t.Fatalf("enrolling in a disabled sequence: %v", err)
	}
	wantOutcomes(t, f.RunDue(), engine.OutcomeHeld)
	if p := f.Scheduled("pending", ""); len(p) != 1 || p[0].Attempts != 0 {
		t.Fatalf("%+v", p)
	}
	if timers := setEnabled(true); len(timers) != 1 {
		t.Fatalf("enable released %v", timers)
	}
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
}

// The dry run reports would_exit when the exit condition holds for the
// contact, both in the sequence (an event after the enrolment) and outside
// it (a property, evaluated as if enrolled now), and writes nothing.
func TestSequenceDryRunWouldExit(t *testing.T) {
	t.Parallel()
	f := enginetest.New(t, "org_seq_dryexit")
	f.PutSequence("byprop", `name: P
trigger: {event: go}
exit: {operator: and, conditions: [{type: property, field: firstName, operator: equals, value: Ann}]}
steps: [{send: welcome}]
`, true)
	f.PutSequence("byevent", `name: V
trigger: {event: start}
exit: {operator: or, conditions: [{type: event, name: purchase, operator: occurred}]}
steps: [{delay: 1h}, {send: welcome}]
`, true)
	dr, _, err := dryRun(f, "byprop", "")
	if err != nil || dr.Outcome != "would_exit" || dr.Enrolment != nil {
		t.Fatalf("%+v, %v", dr, err)
	}
	var exitStage map[string]any
	for _, s := range dr.DecisionPath {
		if s["stage"] == "exit_conditions" {
			exitStage = s
		}
	}
	if exitStage == nil || exitStage["passed"] != false {
		t.Fatalf("decision path: %v", dr.DecisionPath)
	}

	f.Event("start", nil)
	if dr, _, err := dryRun(f, "byevent", ""); err != nil || dr.Outcome != "would_send" || dr.Enrolment == nil {
		t.Fatalf("%+v, %v", dr, err)
	}
	// purchase exits the enrolment on its own; to see the dry run's view,
	// record it without the hook (as if before the exit check ran).
	f.Exec(`INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
		VALUES ($1, 'evt_dry_purchase', $2, 'purchase', '{}', now())`, f.Tenant, f.ContactID)
	if dr, _, err := dryRun(f, "byevent", ""); err != nil || dr.Outcome != "would_exit" || dr.Enrolment == nil {
		t.Fatalf("%+v, %v", dr, err)
	}
	// A dry run writes nothing: the enrolment is still active, its send pending.
	if e := f.Enrolment("byevent"); e.Status != "active" {
		t.Fatalf("%+v", e)
	}
	if p := f.Scheduled("pending", ""); len(p) != 1 {
		t.Fatalf("%+v", p)
	}
}

// One event triggering several sequences enrols in each the policy lets
// in, all in one go: a leading send (due now), a send after a delay, a
// sequence without email steps (completed at once); a sequence the contact
// is already in, and one it was in without reenroll, are processed but not
// entered again.
func TestSequenceEventEnrolsInManyAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_seq_many")
	f.PutSequence("a-now", "name: A\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.PutSequence("b-later", "name: B\ntrigger: {event: go}\nsteps: [{delay: 1h}, {send: tips}]\n", true)
	f.PutSequence("c-none", "name: C\ntrigger: {event: go}\nsteps: [{delay: 1h}]\n", true)
	f.PutSequence("d-open", "name: D\ntrigger: {event: go, reenroll: true}\nsteps: [{delay: 1h}, {send: welcome}]\n", true)
	f.PutSequence("e-once", "name: E\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	for _, seq := range []string{"d-open", "e-once"} {
		if _, created, err := f.Svc.Enrolments.Enrol(ctx, f.Tenant, seq, f.ContactID); err != nil || !created {
			t.Fatalf("enrolling by hand in %s: created %v, %v", seq, created, err)
		}
	}
	if err := f.Svc.Enrolments.Unenrol(ctx, f.Tenant, "e-once", f.ContactID); err != nil {
		t.Fatal(err)
	}

	rec := f.Event("go", map[string]any{"plan": "pro"})
	if got := strings.Join(rec.TriggeredSequences, ","); got != "a-now,b-later,c-none" {
		t.Fatalf("triggered %s", got)
	}
	if got := strings.Join(rec.ProcessedSequences, ","); got != "a-now,b-later,c-none,d-open,e-once" {
		t.Fatalf("processed %s", got)
	}
	for seq, want := range map[string]string{"a-now": "active", "b-later": "active", "c-none": "completed", "d-open": "active"} {
		if e := f.Enrolment(seq); e == nil || e.Status != want {
			t.Errorf("%s: %+v, want %s", seq, e, want)
		}
	}
	pending := f.Scheduled("pending", "")
	bySeq := map[string]queries.ScheduledSend{}
	for _, p := range pending {
		bySeq[p.SequenceID] = p
	}
	if _, a := bySeq["a-now"]; len(pending) != 3 || !a {
		t.Fatalf("pending %+v", pending)
	}
	if _, d := bySeq["d-open"]; !d {
		t.Fatalf("pending %+v", pending)
	}
	b, ok := bySeq["b-later"]
	if !ok {
		t.Fatalf("pending %+v", pending)
	}
	if d := time.Until(b.ScheduledFor); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("b-later due in %v", d)
	}
	// Each scheduled send has its timeline entry naming its scheduledFor
	// as responses show times; each entered sequence its sequence_entered.
	scheduledFor, entered := map[string]string{}, 0
	for _, r := range timeline(f, 100) {
		switch timelineType(r) {
		case "scheduled":
			var data struct{ SequenceID, ScheduledFor string }
			if err := json.Unmarshal(r.Data, &data); err != nil {
				t.Fatal(err)
			}
			scheduledFor[data.SequenceID] = data.ScheduledFor
		case "sequence_entered":
			entered++
		}
	}
	for _, seq := range []string{"a-now", "b-later"} {
		if want := bySeq[seq].ScheduledFor.UTC().Format("2006-01-02T15:04:05.000Z"); scheduledFor[seq] != want {
			t.Errorf("timeline's scheduledFor of %s is %q, want %q", seq, scheduledFor[seq], want)
		}
	}
	if entered != 5 { // 3 now, d-open and e-once by hand
		t.Errorf("%d sequence_entered entries", entered)
	}
	if m := tenantMetrics(f); m.Scheduled != 4 { // d-open and e-once by hand, a-now and b-later by the event
		t.Errorf("scheduled %v", m.Scheduled)
	}
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
}
