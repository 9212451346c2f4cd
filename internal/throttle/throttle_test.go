package throttle

import (
	"context"
	"slices"
	"testing"
	"time"

	"tidings/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestParseLimits(t *testing.T) {
	t.Parallel()
	got, err := ParseLimits(" google.com=600/m, Outlook.com.=5/s,yahoodns.net=120/h ,")
	if err != nil {
		t.Fatal(err)
	}
	want := []Limit{{"google.com", 600}, {"outlook.com", 300}, {"yahoodns.net", 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got[0].Burst() != 60 || got[2].Burst() != 1 || (Limit{Suffix: "x", PerMinute: 9}).Burst() != 1 {
		t.Fatalf("bursts %d %d", got[0].Burst(), got[2].Burst())
	}
	if l, err := ParseLimits(""); err != nil || l != nil {
		t.Fatalf("empty: %v %v", l, err)
	}
	for _, bad := range []string{"google.com", "google.com=0/m", "google.com=-1/m", "google.com=10/d",
		"google.com=10", "=10/m", "goo gle.com=1/m", "-x.com=1/m", "a..b=1/m", "x.com=1/m,X.com=2/m", "x.com=ten/m"} {
		if _, err := ParseLimits(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestGroupOnALabelBoundary(t *testing.T) {
	t.Parallel()
	limits := []Limit{{"google.com", 600}, {"l.google.com", 60}, {"outlook.com", 300}}
	for host, want := range map[string]string{
		"gmail-smtp-in.l.google.com.":   "l.google.com", // the longest suffix
		"aspmx.GOOGLE.com":              "google.com",
		"google.com":                    "google.com",
		"notgoogle.com":                 "", // not on a label boundary
		"google.com.evil.example":       "",
		"x.mail.protection.outlook.com": "outlook.com",
	} {
		if got := groupOf(limits, host); got != want {
			t.Errorf("%s: got %q, want %q", host, got, want)
		}
	}
}

// The group comes from the most preferred MX host; answers are cached for
// their TTL; a failed lookup is no group and is asked again later.
func TestMXGroupCachedAndFailingSafe(t *testing.T) {
	t.Parallel()
	z := testenv.DNS(t)
	z.Add(t,
		"gmail.com. 300 IN MX 5 gmail-smtp-in.l.google.com.",
		"gmail.com. 300 IN MX 10 alt1.gmail-smtp-in.l.google.com.",
		"acme.example. 3600 IN MX 20 backup.outlook.com.",
		"acme.example. 3600 IN MX 10 aspmx.l.google.com.", // a Workspace domain
		"self.example. 60 IN A 192.0.2.1",
	)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	m := &MX{Server: z.Addr, Limits: []Limit{{"google.com", 600}, {"outlook.com", 300}, {"self.example", 1}},
		Now: func() time.Time { return now }}
	ctx := context.Background()
	for domain, want := range map[string]string{"gmail.com": "google.com", "ACME.example": "google.com",
		"self.example": "self.example", "nowhere.example": ""} {
		if got := m.Group(ctx, domain); got != want {
			t.Errorf("%s: got %q, want %q", domain, got, want)
		}
	}
	n := m.Lookups()
	m.Group(ctx, "gmail.com")
	if m.Lookups() != n {
		t.Fatal("a cached domain was looked up again")
	}
	now = now.Add(6 * time.Minute) // past gmail.com's 300 s
	m.Group(ctx, "gmail.com")
	if m.Lookups() != n+1 {
		t.Fatalf("lookups %d after the TTL, want %d", m.Lookups(), n+1)
	}

	// A resolver that fails: no group, asked again after failTTL.
	down := &MX{Server: "127.0.0.1:1", Limits: m.Limits, Now: func() time.Time { return now }}
	if g := down.Group(ctx, "gmail.com"); g != "" {
		t.Fatalf("failed lookup gave group %q", g)
	}
	down.Group(ctx, "gmail.com")
	if down.Lookups() != 1 {
		t.Fatalf("a failed lookup was not cached: %d lookups", down.Lookups())
	}
	now = now.Add(failTTL + time.Second)
	down.Group(ctx, "gmail.com")
	if down.Lookups() != 2 {
		t.Fatal("a failed lookup was not asked again")
	}

	// The cache is bounded.
	small := &MX{Server: z.Addr, Limits: m.Limits, Size: 2, Now: func() time.Time { return now }}
	for _, d := range []string{"a.example", "b.example", "c.example", "d.example"} {
		small.Group(ctx, d)
	}
	if len(small.entries) > 2 {
		t.Fatalf("cache of %d entries, bound 2", len(small.entries))
	}
}

func newTestThrottle(t *testing.T, limits []Limit) (*Throttle, *time.Time) {
	t.Helper()
	z := testenv.DNS(t)
	z.Add(t, "gmail.com. 300 IN MX 5 gmail-smtp-in.l.google.com.",
		"hotmail.com. 300 IN MX 5 hotmail-com.olc.protection.outlook.com.")
	rdb, prefix := testenv.Redis(t)
	now := time.Now()
	th := New(rdb, prefix, limits, &MX{Server: z.Addr})
	th.Now = func() time.Time { return now }
	return th, &now
}

// A group's burst goes at once; the rest are held one interval apart from
// the bucket's next token; other groups and ungrouped domains are not held.
func TestAdmitHoldsOnlyTheLimitedGroup(t *testing.T) {
	t.Parallel()
	th, now := newTestThrottle(t, []Limit{{"google.com", 60}}) // burst 6, one a second
	var to []string
	for range 10 {
		to = append(to, "a@gmail.com")
	}
	to = append(to, "b@hotmail.com", "c@example.org")
	holds, err := th.Admit(context.Background(), to)
	if err != nil {
		t.Fatal(err)
	}
	var held []*Hold
	for i, h := range holds {
		if i >= 10 && h != nil {
			t.Fatalf("%s held: %+v", to[i], h)
		}
		if h != nil {
			held = append(held, h)
		}
	}
	if len(held) != 4 {
		t.Fatalf("%d held of 10 to gmail.com with a burst of 6, want 4", len(held))
	}
	for j, h := range held {
		if h.By != "destination:google.com" {
			t.Fatalf("heldBy %q", h.By)
		}
		lo, hi := now.Add(time.Duration(j)*time.Second), now.Add(time.Duration(j+1)*time.Second+10*time.Millisecond)
		if h.Until.Before(lo) || h.Until.After(hi) {
			t.Fatalf("hold %d until %v, want within [%v, %v]", j, h.Until.Sub(*now), lo.Sub(*now), hi.Sub(*now))
		}
	}
}

// A transactional message is never held and never puts the bucket in
// debt: with the bucket empty, background mail is held no longer than
// the bucket's own refill.
func TestTakeFreeNeverHoldsNorDebts(t *testing.T) {
	t.Parallel()
	th, _ := newTestThrottle(t, []Limit{{"google.com", 60}})
	ctx := context.Background()
	var to []string
	for range 50 {
		to = append(to, "x@gmail.com")
	}
	if err := th.TakeFree(ctx, to); err != nil { // takes the 6 there, no more
		t.Fatal(err)
	}
	holds, err := th.Admit(ctx, []string{"y@gmail.com"})
	if err != nil {
		t.Fatal(err)
	}
	if holds[0] == nil || time.Until(holds[0].Until) > 1100*time.Millisecond {
		t.Fatalf("after 50 transactional messages the next background one waits %+v; want at most one interval", holds[0])
	}
}

func TestNilThrottleHoldsNothing(t *testing.T) {
	t.Parallel()
	var th *Throttle
	holds, err := th.Admit(context.Background(), []string{"a@gmail.com"})
	if err != nil || holds[0] != nil {
		t.Fatal(holds, err)
	}
	if New(nil, "", []Limit{{"x.com", 1}}, &MX{}) != nil || New(nil, "", nil, &MX{}) != nil {
		t.Fatal("a throttle without limits or Redis")
	}
}

// Takes that find a fraction of a token past the whole ones keep it: a
// group asked for more than it has every 150 ms (1.5 intervals) gets every
// token its rate made over the time, not one a call. redis_rate's
// AllowAtMost, used before, spent the fraction and answered the whole
// tokens: this got 20 of 30.
func TestAdmitKeepsFractionalTokens(t *testing.T) {
	t.Parallel()
	th, _ := newTestThrottle(t, []Limit{{"google.com", 600}}) // burst 60, one per 100 ms
	th.Now = nil
	ctx := context.Background()
	ask := func(n int) int {
		to := make([]string, n)
		for i := range to {
			to[i] = "a@gmail.com"
		}
		holds, err := th.Admit(ctx, to)
		if err != nil {
			t.Fatal(err)
		}
		ok := 0
		for _, h := range holds {
			if h == nil {
				ok++
			}
		}
		return ok
	}
	if got := ask(60); got != 60 {
		t.Fatalf("the burst let %d go, want 60", got)
	}
	t0 := time.Now()
	got := 0
	for range 20 {
		time.Sleep(150 * time.Millisecond)
		got += ask(100)
	}
	want := int(time.Since(t0) / (100 * time.Millisecond))
	if got < want-1 || got > want+1 {
		t.Fatalf("%d messages let go over %v at 10/s, want %d ± 1", got, time.Since(t0), want)
	}
}

// Holds given by two workers at once do not share times: the second
// batch's holds begin where the first's end.
func TestAdmitHoldsQueueAfterEarlierHolds(t *testing.T) {
	t.Parallel()
	th, now := newTestThrottle(t, []Limit{{"google.com", 60}}) // burst 6, one a second
	ctx := context.Background()
	batch := func() []*Hold {
		holds, err := th.Admit(ctx, []string{"a@gmail.com", "b@gmail.com", "c@gmail.com", "d@gmail.com", "e@gmail.com", "f@gmail.com", "g@gmail.com", "h@gmail.com"})
		if err != nil {
			t.Fatal(err)
		}
		return holds
	}
	first, second := batch(), batch()
	last := first[7].Until
	for i, h := range second {
		if h == nil || !h.Until.After(last) {
			t.Fatalf("second batch's %d: %+v, want held after the first batch's last hold (%v)", i, h, last.Sub(*now))
		}
		last = h.Until
	}
}

// Holds queued behind messages that never came back (their broadcast was
// cancelled) do not delay new ones: once the bucket has filled with no
// taker, the queue starts again at the bucket's next token.
func TestAdmitQueueStartsAgainOnAFullBucket(t *testing.T) {
	t.Parallel()
	th, _ := newTestThrottle(t, []Limit{{"google.com", 600}}) // burst 60, one per 100 ms, full again in 6 s
	th.Now = nil
	ctx := context.Background()
	ask := func(n int) []*Hold {
		to := make([]string, n)
		for i := range to {
			to[i] = "a@gmail.com"
		}
		holds, err := th.Admit(ctx, to)
		if err != nil {
			t.Fatal(err)
		}
		return holds
	}
	ask(160) // 60 go, 100 held over the next 10 s, and never come back
	time.Sleep(6100 * time.Millisecond)
	holds := ask(70)
	if holds[59] != nil || holds[60] == nil {
		t.Fatalf("a full bucket let %v and %v", holds[59], holds[60])
	}
	if wait := time.Until(holds[60].Until); wait > 500*time.Millisecond {
		t.Fatalf("the first new hold waits %v behind holds that never came back", wait)
	}
}
