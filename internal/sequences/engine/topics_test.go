package engine_test

import (
	"strings"
	"testing"
	"time"

	"tidings/internal/sequences/engine"
	"tidings/internal/sequences/engine/enginetest"
	"tidings/internal/tracking"
)

// A sequence's topic is checked at send time, like unsubscribe: a step
// whose topic the contact is not subscribed to is cancelled topic_opt_out
// and the contact moves on; once the contact joins, the messages go out,
// and their unsubscribe link names the topic (its one-click leaves that
// topic only).
func TestSequenceTopicCheckedAtSendTime(t *testing.T) {
	t.Parallel()
	f := enginetest.New(t, "org_seq_topic")
	f.Exec(`INSERT INTO topics (tenant_id, id, name, default_mode) VALUES ($1, 'digest', 'Digest', 'opt_in')`, f.Tenant)
	f.PutSequence("weekly", "name: W\ntopic: digest\ntrigger: {event: joined, reenroll: true}\nsteps: [{send: welcome}, {send: tips}]\n", true)

	f.Event("joined", nil)
	wantOutcomes(t, f.RunDue(), engine.OutcomeSkipped)
	wantOutcomes(t, f.RunDue(), engine.OutcomeSkipped)
	if got := f.Scheduled("cancelled", engine.ReasonTopicOptOut); len(got) != 2 {
		t.Fatalf("%d sends cancelled topic_opt_out, want 2", len(got))
	}
	if e := f.Enrolment("weekly"); e.Status != "completed" {
		t.Fatalf("the contact did not move on: %+v", e)
	}
	if f.SG.Count() != 0 {
		t.Fatalf("%d messages to a contact outside the opt-in topic", f.SG.Count())
	}

	f.Exec(`UPDATE contacts SET topics = '{"digest": true}' WHERE tenant_id = $1`, f.Tenant)
	f.Event("joined", nil)
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
	if f.SG.Count() != 1 {
		t.Fatalf("%d messages after joining", f.SG.Count())
	}
	h := f.SG.Messages()[0].Mail.Headers["List-Unsubscribe"]
	i := strings.Index(h, tracking.UnsubscribePath)
	if i < 0 {
		t.Fatalf("List-Unsubscribe %q", h)
	}
	tok := strings.TrimSuffix(h[i+len(tracking.UnsubscribePath):], ">")
	cl, err := f.Svc.Tracking.Parse(tracking.KindUnsubscribe, tok)
	if err != nil || cl.Topic != "digest" {
		t.Fatalf("the link's token names topic %q (%v)", cl.Topic, err)
	}
	// Leaving the topic before the next step: that step is cancelled.
	f.Exec(`UPDATE contacts SET topics = '{"digest": false}' WHERE tenant_id = $1`, f.Tenant)
	wantOutcomes(t, f.RunDue(), engine.OutcomeSkipped)
	if f.SG.Count() != 1 {
		t.Fatalf("%d messages after leaving", f.SG.Count())
	}
}

// A tenant paused by the deliverability guard holds its due sequence sends
// (nothing cancelled, the enrolment as it was); once sending resumes they
// go out, each once.
func TestGuardPauseHoldsThenReleasesOnce(t *testing.T) {
	t.Parallel()
	f := enginetest.New(t, "org_seq_guard")
	f.PutSequence("onboarding", dripYAML, true)
	f.Exec(`UPDATE tenants SET sending_status = 'paused', paused_reason = 'complaint_rate', paused_at = now() WHERE id = $1`, f.Tenant)
	f.Event("signed_up", nil)
	wantOutcomes(t, f.RunDue(), engine.OutcomeHeld)
	if f.SG.Count() != 0 || len(f.Open()) != 1 || f.Enrolment("onboarding").Status != "active" {
		t.Fatalf("while paused: %d messages, %d open sends, enrolment %+v", f.SG.Count(), len(f.Open()), f.Enrolment("onboarding"))
	}
	f.Exec(`UPDATE tenants SET sending_status = 'sandbox', paused_reason = NULL, paused_at = NULL, guard_since = now() WHERE id = $1`, f.Tenant)
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
	wantOutcomes(t, f.RunDue())
	if f.SG.Count() != 1 {
		t.Fatalf("%d messages after the resume, want 1", f.SG.Count())
	}
}

// A sequence step over the tenant's frequency cap waits, untried, for the
// contact's next period: its scheduledFor moves to the next midnight in
// the contact's zone, and nothing is sent or recorded.
func TestSequenceStepOverTheCapWaits(t *testing.T) {
	t.Parallel()
	f := enginetest.New(t, "org_seq_cap")
	f.Exec(`UPDATE tenants SET frequency_cap_max = 1, frequency_cap_period = 'day', timezone = 'Europe/Amsterdam' WHERE id = $1`, f.Tenant)
	f.PutSequence("two", "name: T\ntrigger: {event: go}\nsteps: [{send: welcome}, {send: tips}]\n", true)
	f.Event("go", nil)
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
	wantOutcomes(t, f.RunDue(), engine.OutcomeHeld)
	if f.SG.Count() != 1 {
		t.Fatalf("%d messages under a cap of 1", f.SG.Count())
	}
	open := f.Open()
	if len(open) != 1 || open[0].Status != "pending" || open[0].Attempts != 0 {
		t.Fatalf("%+v", open)
	}
	ams, _ := time.LoadLocation("Europe/Amsterdam")
	now := time.Now().In(ams)
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, ams)
	if !open[0].ScheduledFor.Equal(midnight) {
		t.Fatalf("the step waits until %v, want %v", open[0].ScheduledFor, midnight)
	}
}

// The event's processedSequences are stored on its row (the update names
// the event's partition by its time).
func TestEventKeepsItsProcessedSequences(t *testing.T) {
	t.Parallel()
	f := enginetest.New(t, "org_seq_processed")
	f.PutSequence("one", "name: O\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	rec := f.Event("go", nil)
	var got []string
	if err := f.Svc.DB.Pool.QueryRow(t.Context(), `SELECT processed_sequences FROM events WHERE tenant_id = $1 AND id = $2`,
		f.Tenant, rec.EventID).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "one" {
		t.Fatalf("stored processed_sequences %v", got)
	}
}
