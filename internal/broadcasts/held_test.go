package broadcasts_test

import (
	"fmt"
	"testing"
	"time"

	"tidings/internal/broadcasts"
	"tidings/internal/delivery"
	"tidings/internal/domains"
	"tidings/internal/testenv"
	"tidings/internal/throttle"
	"tidings/queries"
)

// withThrottle gives the fixture's sender DESTINATION_LIMITS over an
// in-test DNS zone where gmail.com's mail goes to Google.
func withThrottle(t *testing.T, f *fixture, limits string) {
	t.Helper()
	z := testenv.DNS(t)
	z.Add(t, "gmail.com. 300 IN MX 5 gmail-smtp-in.l.google.com.", "other.example. 300 IN MX 5 mx.other.example.")
	l, err := throttle.ParseLimits(limits)
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testenv.Redis(t)
	f.svc.Sender.Throttle = throttle.New(rdb, prefix, l, &throttle.MX{Server: z.Addr})
}

// A destination over its limit holds its recipients (queued, heldBy, due
// when its bucket will take them), and the other destinations of the same
// broadcast are not held up; while held, a dispatch claims none of them.
func TestDestinationThrottleHoldsOnlyItsGroup(t *testing.T) {
	t.Parallel()
	contacts := map[string]string{}
	for i := range 10 {
		contacts[fmt.Sprintf("g%d@gmail.com", i)] = `{"plan":"pro"}`
	}
	for i := range 5 {
		contacts[fmt.Sprintf("o%d@other.example", i)] = `{"plan":"pro"}`
	}
	f := newFixture(t, contacts)
	withThrottle(t, f, "google.com=60/m") // a burst of 6, then one a second
	b := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	f.drain(b.ID)
	sentG, held := 0, 0
	for email, r := range f.recipients(b.ID) {
		switch {
		case r.Status == broadcasts.RecipientSent:
			if email[0] == 'g' {
				sentG++
			}
		case r.Status == broadcasts.RecipientQueued && email[0] == 'g':
			held++
			if r.HeldBy == nil || *r.HeldBy != "destination:google.com" || !r.ScheduledFor.After(time.Now()) {
				t.Fatalf("%s queued with heldBy %v, due %v", email, r.HeldBy, r.ScheduledFor)
			}
			if r.Attempts != 0 {
				t.Fatalf("%s: a hold counted as an attempt (%d)", email, r.Attempts)
			}
		default:
			t.Fatalf("%s: %s (%v)", email, r.Status, r.LastError)
		}
	}
	if sentG != 6 || held != 4 || f.sg.Count() != 11 {
		t.Fatalf("gmail sent %d, held %d, provider took %d; want 6, 4, 11", sentG, held, f.sg.Count())
	}
	n, err := f.svc.BroadcastDispatcher.Dispatch(f.ctx, 100)
	if err != nil || n.Claimed != 0 {
		t.Fatalf("a dispatch while held claimed %d (%v)", n.Claimed, err)
	}
	// Once due, they go, one token at a time, and carry no hold once sent.
	time.Sleep(time.Until(latestDue(f, b.ID)) + 50*time.Millisecond)
	f.drain(b.ID)
	for email, r := range f.recipients(b.ID) {
		if r.Status != broadcasts.RecipientSent || r.HeldBy != nil {
			t.Fatalf("%s: %s heldBy %v after its hold", email, r.Status, r.HeldBy)
		}
	}
}

func latestDue(f *fixture, id string) time.Time {
	var last time.Time
	for _, r := range f.recipients(id) {
		if r.Status == broadcasts.RecipientQueued && r.ScheduledFor.After(last) {
			last = r.ScheduledFor
		}
	}
	return last
}

// A domain warming up sends its day's limit of broadcast messages and
// holds the rest until the tenant's next midnight; transactional messages
// are neither held nor counted.
func TestWarmupHoldsPastTheDaysLimit(t *testing.T) {
	t.Parallel()
	contacts := map[string]string{}
	for i := range 5 {
		contacts[fmt.Sprintf("c%d@example.com", i)] = `{"plan":"pro"}`
	}
	f := newFixture(t, contacts)
	f.exec(`UPDATE tenants SET timezone = 'Asia/Tokyo' WHERE id = $1`, tenant)
	on := true
	if _, err := f.svc.Domains.Update(f.ctx, tenant, "b.example", nil, &domains.WarmupPatch{Enabled: &on, Schedule: []int{3, 5}}); err != nil {
		t.Fatal(err)
	}
	b := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	f.drain(b.ID)
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	midnight := domains.NextMidnight(time.Now(), tokyo)
	sent, held := 0, 0
	for email, r := range f.recipients(b.ID) {
		switch r.Status {
		case broadcasts.RecipientSent:
			sent++
		case broadcasts.RecipientQueued:
			held++
			if r.HeldBy == nil || *r.HeldBy != "warmup:b.example" || !r.ScheduledFor.Equal(midnight) {
				t.Fatalf("%s held by %v until %v, want warmup:b.example until %v", email, r.HeldBy, r.ScheduledFor, midnight)
			}
		default:
			t.Fatalf("%s: %s", email, r.Status)
		}
	}
	if sent != 3 || held != 2 {
		t.Fatalf("sent %d, held %d; want 3, 2", sent, held)
	}
	if _, err := f.svc.Sender.Send(f.ctx, tenant, delivery.Request{To: "c0@example.com", TemplateID: "news"}); err != nil {
		t.Fatalf("a transactional send past the warm-up limit: %v", err)
	}
	d, err := f.svc.Domains.Get(f.ctx, tenant, "b.example")
	if err != nil {
		t.Fatal(err)
	}
	w, err := f.svc.Domains.WarmupOf(f.ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if w.Day == nil || *w.Day != 1 || w.DailyLimit == nil || *w.DailyLimit != 3 || w.SentToday != 3 {
		t.Fatalf("warm-up %+v (day %v, limit %v), want day 1, limit 3, 3 sent today", w, deref(w.Day), deref(w.DailyLimit))
	}
	// A page of domains reads the same in its one query, and a domain
	// not warming up beside it counts nothing.
	off := d
	off.Domain, off.WarmupEnabled = "off.example", false
	page, err := f.svc.Domains.WarmupsOf(f.ctx, tenant, []queries.Domain{off, d})
	if err != nil {
		t.Fatal(err)
	}
	if p := page[1]; deref(p.Day) != 1 || deref(p.DailyLimit) != 3 || p.SentToday != 3 || page[0].Enabled || page[0].SentToday != 0 {
		t.Fatalf("the page's warm-ups %+v", page)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
