package engine_test

import (
	"context"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/sequences/engine"
	"tidings/internal/sequences/engine/enginetest"
	"tidings/internal/store"
)

// Runs of scheduled sends: what cancels them, how they fail, are retried,
// die and are taken back, and how a run meets a row that is not due yet or
// is cancelled while its message is on its way.

func TestScheduledCancelledByOptOutDeleteAndSequenceDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_seq_cancel")
	subscribe := func(on bool) {
		t.Helper()
		if _, err := f.Svc.Contacts.Update(ctx, f.Tenant, f.ContactID, contacts.Change{Subscribed: &on}); err != nil {
			t.Fatal(err)
		}
	}
	f.PutSequence("s", "name: S\ntrigger: {event: go, reenroll: true}\nsteps: [{delay: 1h}, {send: welcome}]\n", true)
	f.PutSequence("d", "name: D\ntrigger: {event: go}\nsteps: [{delay: 1h}, {send: welcome}]\n", true)
	f.Event("go", nil)
	f.Tx(func(q *store.Tx) error { return engine.CancelSequence(ctx, q, f.Tenant, "d") })
	if c := f.Scheduled("cancelled", "sequence_deleted"); len(c) != 1 || c[0].SequenceID != "d" {
		t.Fatalf("%+v", c)
	}
	subscribe(false)
	if c := f.Scheduled("cancelled", "unsubscribed"); len(c) != 1 {
		t.Fatalf("%+v", c)
	}
	if e := f.Enrolment("s"); e.Status != "exited" || e.ExitReason == nil || *e.ExitReason != "unsubscribed" {
		t.Fatalf("%+v", e)
	}
	// Suppression, after the contact subscribes again and re-enters.
	subscribe(true)
	f.Event("go", nil)
	f.Tx(func(q *store.Tx) error {
		_, err := contacts.ApplyOptOut(ctx, q, contacts.OptOut{TenantID: f.Tenant, ContactID: f.ContactID, Suppress: true})
		return err
	})
	if c := f.Scheduled("cancelled", "suppressed"); len(c) != 1 {
		t.Fatalf("%+v", c)
	}
	// Manual exit; then the contact's deletion cancels its open send
	// (contact_deleted), which stays listed, and a worker holding the
	// send's task claims nothing.
	f.Exec(`UPDATE contacts SET suppressed = false WHERE tenant_id = $1`, f.Tenant)
	f.Event("go", nil)
	if err := f.Svc.Enrolments.Unenrol(ctx, f.Tenant, "s", f.ContactID); err != nil {
		t.Fatal(err)
	}
	if c := f.Scheduled("cancelled", "manual"); len(c) != 1 {
		t.Fatalf("%+v", c)
	}
	f.Event("go", nil)
	f.MakeDue()
	if err := f.Svc.Contacts.Delete(ctx, f.Tenant, f.ContactID); err != nil {
		t.Fatal(err)
	}
	c := f.Scheduled("cancelled", "contact_deleted")
	if len(c) != 1 || c[0].ContactID != f.ContactID {
		t.Fatalf("%+v", c)
	}
	if all := f.Scheduled("cancelled", ""); len(all) != 5 {
		t.Fatalf("%+v", all)
	}
	if res, err := f.Svc.Runner.Run(ctx, f.Tenant, c[0].ID); err != nil || res.Outcome != engine.OutcomeNone {
		t.Fatal(res, err)
	}
	if err := f.Svc.Contacts.MustExist(ctx, f.Tenant, f.ContactID); !apperr.IsCode(err, "CONTACT_NOT_FOUND") {
		t.Fatalf("the deleted contact: %v", err)
	}
}

func TestScheduledStepRemovedRetryDeadAndReclaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_seq_retry")
	runner := f.Svc.Runner
	runner.MaxAttempts = 2
	f.PutSequence("s", "name: S\ntrigger: {event: go, reenroll: true}\nsteps: [{send: welcome}, {id: b, action: email, template: tips}]\n", true)
	f.Event("go", nil)
	f.SG.FailNext(1, 503, 0)
	wantOutcomes(t, f.RunDue(), engine.OutcomeFailed)
	p := f.Scheduled("failed", "")
	if len(p) != 1 || p[0].Attempts != 1 || p[0].LastError == nil {
		t.Fatalf("%+v", p)
	}
	if d := time.Until(p[0].ScheduledFor); d < 5*time.Second || d > 11*time.Second {
		t.Fatalf("retry in %v, want about 10s", d)
	}
	f.MakeDue()
	f.SG.FailNext(1, 503, 0)
	wantOutcomes(t, f.RunDue(), engine.OutcomeDead)
	if e := f.Enrolment("s"); e.Status != "exited" || e.ExitReason == nil || *e.ExitReason != "send_failed" {
		t.Fatalf("%+v", e)
	}

	// A claim whose worker died is taken back by the sweep and sent once;
	// a duplicate task claims nothing.
	f.Event("go", nil) // re-enters: the dead send ended the last enrolment
	f.Exec(`UPDATE scheduled_sends SET status = 'claimed', claimed_at = now() - interval '10 minutes', attempts = 1
		WHERE tenant_id = $1 AND status = 'pending'`, f.Tenant)
	if _, err := f.Svc.Sweeper.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	p = f.Scheduled("failed", "")
	if len(p) != 1 {
		t.Fatalf("%+v", p)
	}
	id := p[0].ID
	before := f.SG.Count()
	res, err := runner.Run(ctx, f.Tenant, id)
	if err != nil || res.Outcome != engine.OutcomeSent {
		t.Fatal(res, err)
	}
	if res, _ := runner.Run(ctx, f.Tenant, id); res.Outcome != engine.OutcomeNone {
		t.Fatal(res)
	}
	// The worker that sent it died before marking it: the retry finds the
	// send record and does not send again.
	f.Exec(`UPDATE scheduled_sends SET status = 'failed', send_id = NULL WHERE id = $1`, id)
	if res, _ := runner.Run(ctx, f.Tenant, id); res.Outcome != engine.OutcomeSent {
		t.Fatal(res)
	}
	if f.SG.Count() != before+1 {
		t.Fatalf("sent %d times", f.SG.Count()-before)
	}
	// The next step was scheduled once; remove it from the sequence.
	f.PutSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	wantOutcomes(t, f.RunDue(), engine.OutcomeCancelled)
	if c := f.Scheduled("cancelled", "step_removed"); len(c) != 1 {
		t.Fatalf("%+v", c)
	}
}

// A task that arrives before its row is due (asynq keeps process times in
// whole seconds and releases a task up to a second early) waits for the
// row instead of claiming nothing and leaving it to the sweep.
func TestScheduledEarlyTaskWaitsForItsRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_seq_early")
	f.PutSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.Event("go", nil)
	f.Exec(`UPDATE scheduled_sends SET scheduled_for = date_trunc('milliseconds', now() + interval '700 milliseconds')
		WHERE tenant_id = $1`, f.Tenant)
	id := f.Scheduled("pending", "")[0].ID
	res, err := f.Svc.Runner.Run(ctx, f.Tenant, id)
	if err != nil || res.Outcome != engine.OutcomeSent {
		t.Fatal(res, err)
	}
	// Due later than the wait: left to its own task or the sweep.
	f.Event("go", nil) // no reenroll: enrols nobody
	f.PutSequence("later", "name: L\ntrigger: {event: go2}\nsteps: [{send: welcome}]\n", true)
	f.Event("go2", nil)
	f.Exec(`UPDATE scheduled_sends SET scheduled_for = now() + interval '1 hour' WHERE tenant_id = $1 AND status = 'pending'`, f.Tenant)
	id = f.Scheduled("pending", "")[0].ID
	if res, err := f.Svc.Runner.Run(ctx, f.Tenant, id); err != nil || res.Outcome != engine.OutcomeNone {
		t.Fatal(res, err)
	}
	if f.SG.Count() != 1 {
		t.Fatalf("sent %d", f.SG.Count())
	}
}

// An unsubscribe while a send's message is already on its way (its record
// written) leaves that send to its worker: the row is never cancelled, it
// ends sent, the contact's enrolment ended, and the metrics count it sent,
// not cancelled (ADDENDUM 19: the cancel tells the truth).
func TestScheduledCancelledInFlightEndsSentAndUncounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "org_seq_inflight")
	f.PutSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.Event("go", nil)
	id := f.Scheduled("pending", "")[0].ID
	// The provider holds its answer long enough for the unsubscribe below
	// to land while the message is on its way, however loaded the machine.
	f.SG.SetLatency(3 * time.Second)
	done := make(chan engine.Outcome)
	go func() {
		res, err := f.Svc.Runner.Run(ctx, f.Tenant, id)
		if err != nil {
			t.Error(err)
		}
		done <- res.Outcome
	}()
	// On its way means at the provider: a send only claimed has no record
	// yet, and an unsubscribe then rightly cancels it.
	for deadline := time.Now().Add(30 * time.Second); f.SG.Requests() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the message did not reach the provider within 30s")
		}
	}
	off := false
	if _, err := f.Svc.Contacts.Update(ctx, f.Tenant, f.ContactID, contacts.Change{Subscribed: &off}); err != nil {
		t.Fatal(err)
	}
	if c := f.Scheduled("cancelled", "unsubscribed"); len(c) != 0 {
		t.Errorf("a send whose message is with the provider was cancelled: %+v", c)
	}
	if out := <-done; out != engine.OutcomeSent {
		t.Fatalf("outcome %s", out)
	}
	if s := f.Scheduled("sent", ""); len(s) != 1 {
		t.Fatalf("%+v", s)
	}
	if m := tenantMetrics(f); m.Sent != 1 || m.Cancelled != 0 || m.Scheduled != 1 {
		t.Fatalf("metrics %+v", m)
	}
}
