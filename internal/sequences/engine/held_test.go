package engine_test

import (
	"testing"
	"time"

	"tidings/internal/sequences/engine"
	"tidings/internal/sequences/engine/enginetest"
	"tidings/internal/testenv"
	"tidings/internal/throttle"
)

// A step whose destination's bucket is empty waits, untried, until the
// bucket will take it: its scheduledFor moves there, it carries heldBy,
// and nothing is recorded or sent; once sent, heldBy is cleared.
func TestSequenceStepHeldByItsDestination(t *testing.T) {
	t.Parallel()
	f := enginetest.New(t, "org_seq_held")
	z := testenv.DNS(t)
	z.Add(t, "example.com. 300 IN MX 10 mx.example.com.")
	rdb, prefix := testenv.Redis(t)
	f.Svc.Sender.Throttle = throttle.New(rdb, prefix, []throttle.Limit{{Suffix: "example.com", PerMinute: 30}},
		&throttle.MX{Server: z.Addr}) // a burst of 3, then one every 2 s
	f.PutSequence("four", "name: F\ntrigger: {event: go}\nsteps: [{send: welcome}, {send: tips}, {send: welcome}, {send: tips}]\n", true)
	// Three messages take the burst (another process's, as far as the
	// bucket knows), so the step finds it empty.
	if err := f.Svc.Sender.Throttle.TakeFree(t.Context(), []string{"a@example.com", "b@example.com", "c@example.com"}); err != nil {
		t.Fatal(err)
	}
	f.Event("go", nil)
	before := time.Now()
	wantOutcomes(t, f.RunDue(), engine.OutcomeHeld)
	open := f.Open()
	if f.SG.Count() != 0 || len(open) != 1 || open[0].Status != "pending" || open[0].Attempts != 0 {
		t.Fatalf("%d messages, open %+v", f.SG.Count(), open)
	}
	if open[0].HeldBy == nil || *open[0].HeldBy != "destination:example.com" {
		t.Fatalf("heldBy %v", open[0].HeldBy)
	}
	if wait := open[0].ScheduledFor.Sub(before); wait <= 0 || wait > 3*time.Second {
		t.Fatalf("the step waits %v, want about one token (2 s)", wait)
	}
	time.Sleep(time.Until(open[0].ScheduledFor) + 100*time.Millisecond)
	wantOutcomes(t, f.RunDue(), engine.OutcomeSent)
	if f.SG.Count() != 1 {
		t.Fatalf("%d messages after the hold", f.SG.Count())
	}
	for _, s := range f.Open() {
		if s.HeldBy != nil {
			t.Fatalf("the next step inherited heldBy: %+v", s)
		}
	}
}
