package broadcasts_test

import (
	"testing"
	"time"

	"tidings/internal/broadcasts"
	"tidings/internal/localtime"
)

// A local-time broadcast reaches each contact at the same wall-clock time
// in the contact's zone (its `timezone` property, else the tenant's): it
// starts at the earliest such instant, the later zones wait queued with
// their own scheduledFor, and it stays sending until the last.
func TestLocalTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{
		"tokyo@example.com": `{"plan":"pro","timezone":"Asia/Tokyo"}`,
		"ny@example.com":    `{"plan":"pro","timezone":"America/New_York"}`,
		"none@example.com":  `{"plan":"pro"}`,
		"bad@example.com":   `{"plan":"pro","timezone":"Mars/Base"}`,
	})
	f.exec(`UPDATE tenants SET timezone = 'Europe/Amsterdam' WHERE id = $1`, tenant)
	day := time.Now().AddDate(0, 0, 10).Format("2006-01-02")
	wall := day + "T09:00:00"
	b := f.create(broadcasts.Input{SendAt: &wall, SetSendAt: true, LocalTime: ptr(true)})
	if b.LocalSendAt == nil || *b.LocalSendAt != wall {
		t.Fatalf("stored sendAt %v", b.LocalSendAt)
	}
	w, _ := localtime.ParseWall(wall)
	at := func(zone string) time.Time { return localtime.At(w, localtime.Load(zone)) }

	b, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil)
	if err != nil || b.Status != broadcasts.Scheduled || !b.StartsAt.Equal(at("Asia/Tokyo")) {
		t.Fatalf("send: %s starts %v (want %v), %v", b.Status, b.StartsAt, at("Asia/Tokyo"), err)
	}
	// Its start comes (the clock moved on).
	f.exec(`UPDATE broadcasts SET starts_at = now() WHERE tenant_id = $1`, tenant)
	b = f.drain(b.ID)
	if b.Status != broadcasts.Sending || b.Recipients != 4 || f.sg.Count() != 0 {
		t.Fatalf("after start: %+v, %d sent", b, f.sg.Count())
	}
	want := map[string]time.Time{"tokyo@example.com": at("Asia/Tokyo"), "ny@example.com": at("America/New_York"),
		"none@example.com": at("Europe/Amsterdam"), "bad@example.com": at("Europe/Amsterdam")}
	for email, r := range f.recipients(b.ID) {
		if r.Status != broadcasts.RecipientQueued || !r.ScheduledFor.Equal(want[email]) {
			t.Errorf("%s: %s at %v, want queued at %v", email, r.Status, r.ScheduledFor, want[email])
		}
	}
	if b.LastScheduledFor == nil || !b.LastScheduledFor.Equal(at("America/New_York")) {
		t.Fatalf("lastScheduledFor %v", b.LastScheduledFor)
	}
	// Tokyo's time comes: only Tokyo receives it.
	f.exec(`UPDATE broadcast_recipients SET scheduled_for = now() WHERE tenant_id = $1 AND email = 'tokyo@example.com'`, tenant)
	b = f.drain(b.ID)
	if b.Status != broadcasts.Sending || f.st(b).Sent != 1 || f.sg.Count() != 1 {
		t.Fatalf("after Tokyo: %+v", b)
	}
}

// Across both daylight-saving changes each recipient has exactly one
// instant: a wall-clock time the clocks skip or pass twice sends once.
func TestLocalTimeAcrossDST(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ams@example.com": `{"plan":"pro","timezone":"Europe/Amsterdam"}`})
	for _, wall := range []string{"2027-03-28T02:30:00", "2027-10-31T02:30:00"} {
		b := f.create(broadcasts.Input{SendAt: ptr(wall), SetSendAt: true, LocalTime: ptr(true)})
		if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
			t.Fatal(err)
		}
		f.exec(`UPDATE broadcasts SET starts_at = now() WHERE tenant_id = $1 AND id = $2`, tenant, b.ID)
		b = f.drain(b.ID)
		w, _ := localtime.ParseWall(wall)
		rs := f.recipients(b.ID)
		r := rs["ams@example.com"]
		if len(rs) != 1 || !r.ScheduledFor.Equal(localtime.At(w, localtime.Load("Europe/Amsterdam"))) {
			t.Fatalf("%s: %+v", wall, rs)
		}
		// Its time comes: one message, and no second one however often
		// the dispatch runs.
		f.exec(`UPDATE broadcast_recipients SET scheduled_for = now() WHERE tenant_id = $1 AND broadcast_id = $2`, tenant, b.ID)
		before := f.sg.Count()
		f.drain(b.ID)
		f.drain(b.ID)
		if f.sg.Count() != before+1 {
			t.Fatalf("%s: %d messages", wall, f.sg.Count()-before)
		}
	}
}
