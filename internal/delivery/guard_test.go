package delivery

import (
	"fmt"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/sendgridevents"
	"tidings/internal/store"
	"tidings/internal/tenants"
)

// Outcomes applied past the guard's rates pause the tenant with the reason
// and the time, once; another tenant is untouched; after a resume the old
// outcomes no longer count.
func TestGuardPausesOnRates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bad    sendgridevents.Outcome
		n      int // bad outcomes among 600
		reason string
	}{
		{sendgridevents.Complained, 3, tenants.PausedComplaintRate}, // 0.5%
		{sendgridevents.BouncedHard, 40, tenants.PausedBounceRate},  // 6.7%
		{sendgridevents.BouncedSoft, 100, ""},                       // soft bounces do not count
		{sendgridevents.Complained, 1, ""},                          // 0.17%
	} {
		t.Run(fmt.Sprintf("%v x%d", tc.bad, tc.n), func(t *testing.T) {
			t.Parallel()
			b := setupOutcomes(t)
			b.outcomes.Guard = &tenants.Guard{MinSample: 500}
			b.exec(`UPDATE tenants SET sending_status = 'enabled'`)
			var in []Outcome
			for i := range 600 {
				c, s := fmt.Sprintf("cnt_%d", i), fmt.Sprintf("snd_%d", i)
				b.contact("ten_a", c)
				b.send("ten_a", s, c, "")
				kind := sendgridevents.Delivered
				if i < tc.n {
					kind = tc.bad
				}
				in = append(in, Outcome{TenantID: "ten_a", SendID: s, Kind: kind})
			}
			b.contact("ten_b", "cnt_b")
			b.send("ten_b", "snd_b", "cnt_b", "")
			in = append(in, Outcome{TenantID: "ten_b", SendID: "snd_b", Kind: sendgridevents.Complained})
			// In two batches: the delivered first, then the rest.
			for _, batch := range [][]Outcome{in[tc.n:], in[:tc.n]} {
				if err := b.db.InTx(b.ctx, func(q *store.Tx) error { _, err := b.outcomes.Apply(b.ctx, q, batch); return err }); err != nil {
					t.Fatal(err)
				}
			}
			var status, reason string
			var pausedAt bool
			if err := b.db.Pool.QueryRow(b.ctx, `SELECT sending_status, coalesce(paused_reason, ''), paused_at IS NOT NULL
				FROM tenants WHERE id = 'ten_a'`).Scan(&status, &reason, &pausedAt); err != nil {
				t.Fatal(err)
			}
			if reason != tc.reason || (tc.reason != "") != (status == "paused") || (tc.reason != "") != pausedAt {
				t.Fatalf("tenant %s, reason %q, pausedAt %v; want reason %q", status, reason, pausedAt, tc.reason)
			}
			// ten_b has one complaint of one outcome: below the sample.
			var other string
			_ = b.db.Pool.QueryRow(b.ctx, `SELECT sending_status FROM tenants WHERE id = 'ten_b'`).Scan(&other)
			if other == "paused" {
				t.Fatal("another tenant was paused")
			}
			if tc.reason == "" {
				return
			}
			// An API key may not resume a guard's pause; a session may, and
			// the window starts afresh.
			ts := &tenants.Store{DB: b.db}
			st := "sandbox"
			if _, err := ts.Update(b.ctx, "ten_a", tenants.Settings{SendingStatus: &st}); !apperr.IsCode(err, "FORBIDDEN") {
				t.Fatalf("resume by an API key: %v", err)
			}
			if _, err := ts.Update(b.ctx, "ten_a", tenants.Settings{SendingStatus: &st, BySession: true}); err != nil {
				t.Fatal(err)
			}
			r, err := tenants.RatesOf(b.ctx, b.db.Queries, "ten_a")
			if err != nil || r.Outcomes != 0 {
				t.Fatalf("window after the resume: %+v %v", r, err)
			}
		})
	}
}

// The guard judges whenever outcomes are applied, in whatever order they
// arrive (ADDENDUM 19): complaints applied first leave the window below
// its sample; the delivered batch after them completes it and pauses.
func TestGuardJudgesOutcomesInAnyOrder(t *testing.T) {
	t.Parallel()
	b := setupOutcomes(t)
	b.outcomes.Guard = &tenants.Guard{MinSample: 500}
	b.exec(`UPDATE tenants SET sending_status = 'enabled'`)
	var complaints, delivered []Outcome
	for i := range 600 {
		c, s := fmt.Sprintf("cnt_%d", i), fmt.Sprintf("snd_%d", i)
		b.contact("ten_a", c)
		b.send("ten_a", s, c, "")
		if i < 3 { // 0.5%
			complaints = append(complaints, Outcome{TenantID: "ten_a", SendID: s, Kind: sendgridevents.Complained})
		} else {
			delivered = append(delivered, Outcome{TenantID: "ten_a", SendID: s, Kind: sendgridevents.Delivered})
		}
	}
	status := func() (string, string) {
		var st, reason string
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT sending_status, coalesce(paused_reason, '') FROM tenants WHERE id = 'ten_a'`).Scan(&st, &reason); err != nil {
			t.Fatal(err)
		}
		return st, reason
	}
	for i, batch := range [][]Outcome{complaints, delivered} {
		if err := b.db.InTx(b.ctx, func(q *store.Tx) error { _, err := b.outcomes.Apply(b.ctx, q, batch); return err }); err != nil {
			t.Fatal(err)
		}
		if st, _ := status(); i == 0 && st == "paused" {
			t.Fatal("paused on 3 outcomes, below the sample")
		}
	}
	if st, reason := status(); st != "paused" || reason != tenants.PausedComplaintRate {
		t.Fatalf("after the delivered batch: %s %q, want paused for complaint_rate", st, reason)
	}
}
