package delivery

import (
	"testing"
	"time"

	"tidings/internal/sendgridevents"
	"tidings/internal/store"
)

// The classifier, case by case, with why each case is decided so.
func TestMachine(t *testing.T) {
	t.Parallel()
	sent := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	later := sent.Add(10 * time.Minute)
	first := later.Add(-300 * time.Millisecond)
	long := later.Add(-time.Hour)
	const apple = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)"
	const gmail = "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)"
	for _, tc := range []struct {
		name string
		hit  Hit
		want string
	}{
		{"a person's open in Apple Mail", Hit{Method: "GET", UserAgent: apple, At: later, SentAt: sent}, ""},
		{"Gmail's proxy fetches when the person opens", Hit{Method: "GET", UserAgent: gmail, At: later, SentAt: sent}, ""},
		{"a HEAD checks the URL, shows nothing", Hit{Method: "HEAD", UserAgent: apple, At: later, SentAt: sent}, MachineHEAD},
		{"no user agent", Hit{Method: "GET", At: later, SentAt: sent}, MachineNoAgent},
		{"a mail security scanner", Hit{Method: "GET", UserAgent: "Mozilla/5.0 (compatible; Barracuda Sentinel)", At: later, SentAt: sent}, MachineScanner},
		{"an HTTP library", Hit{Method: "GET", UserAgent: "python-requests/2.31", At: later, SentAt: sent}, MachineScanner},
		{"Yahoo's prefetching proxy", Hit{Method: "GET", UserAgent: "YahooMailProxy; https://help.yahoo.com", At: later, SentAt: sent}, MachineScanner},
		{"a fetch within 2 s of sending (a proxy on arrival)", Hit{Method: "GET", UserAgent: apple, At: sent.Add(1500 * time.Millisecond), SentAt: sent}, MachineTooSoon},
		{"2 s after sending is a person's", Hit{Method: "GET", UserAgent: apple, At: sent.Add(2 * time.Second), SentAt: sent}, ""},
		{"a click 300 ms after the first: a scanner's burst", Hit{Click: true, Method: "GET", UserAgent: apple, At: later, SentAt: sent, FirstClickAt: &first}, MachineClickRush},
		{"a click an hour after the first", Hit{Click: true, Method: "GET", UserAgent: apple, At: later, SentAt: sent, FirstClickAt: &long}, ""},
		{"an open right after a click is not a burst", Hit{Method: "GET", UserAgent: apple, At: later, SentAt: sent, FirstClickAt: &first}, ""},
	} {
		if got := Machine(tc.hit); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A machine's open or click is recorded with machine: true and counts as
// machineOpened/machineClicked only: no first-open time, no open count, no
// derived field, no opened metric. The provider's flag decides for its
// events.
func TestMachineHitsCountApart(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.contact("ten_a", "cnt_1")
	b.send("ten_a", "snd_1", "cnt_1", "")
	in := []Outcome{
		{TenantID: "ten_a", SendID: "snd_1", Kind: sendgridevents.Opened, Method: "HEAD", UserAgent: "x"},
		{TenantID: "ten_a", SendID: "snd_1", Kind: sendgridevents.Clicked, Method: "GET", URL: "https://a.test/"},
		{TenantID: "ten_a", SendID: "snd_1", Kind: sendgridevents.Opened, Machine: true},
	}
	if err := b.db.InTx(b.ctx, func(q *store.Tx) error { _, err := b.outcomes.Apply(b.ctx, q, in); return err }); err != nil {
		t.Fatal(err)
	}
	s := b.getSend("ten_a", "snd_1")
	c := b.getContact("ten_a", "cnt_1")
	if s.OpenedAt != nil || s.ClickedAt != nil || s.OpenCount != 0 || s.ClickCount != 0 || c.TotalOpens != 0 || c.LastEventAt != nil {
		t.Fatalf("a machine moved the send %+v or the contact %+v", s, c)
	}
	var machine, opened, mOpened, mClicked int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT
		(SELECT count(*) FROM events WHERE tenant_id = 'ten_a' AND properties @> '{"machine": true}'),
		(SELECT coalesce(sum(opened), 0) FROM metric_counts WHERE tenant_id = 'ten_a' AND scope = 'tenant'),
		(SELECT coalesce(sum(machine_opened), 0) FROM metric_counts WHERE tenant_id = 'ten_a' AND scope = 'tenant'),
		(SELECT coalesce(sum(machine_clicked), 0) FROM metric_counts WHERE tenant_id = 'ten_a' AND scope = 'tenant')`).
		Scan(&machine, &opened, &mOpened, &mClicked); err != nil {
		t.Fatal(err)
	}
	if machine != 3 || opened != 0 || mOpened != 2 || mClicked != 1 {
		t.Fatalf("%d machine events, opened %d, machineOpened %d, machineClicked %d", machine, opened, mOpened, mClicked)
	}
	// A person's open afterwards is the first open.
	person := []Outcome{{TenantID: "ten_a", SendID: "snd_1", Kind: sendgridevents.Opened, Method: "GET",
		UserAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko)"}}
	if err := b.db.InTx(b.ctx, func(q *store.Tx) error { _, err := b.outcomes.Apply(b.ctx, q, person); return err }); err != nil {
		t.Fatal(err)
	}
	if s := b.getSend("ten_a", "snd_1"); s.OpenedAt == nil || s.OpenCount != 1 {
		t.Fatalf("a person's open: %+v", s)
	}
}
