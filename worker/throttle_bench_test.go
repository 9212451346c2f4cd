package worker

import (
	"context"
	"testing"
	"time"

	"tidings/internal/testenv"
	"tidings/internal/throttle"
)

// BenchmarkBroadcastThrottled: one broadcast to THROTTLE_N (default
// 20,000) contacts, 30% of them at gmail.com, drained by the worker's own
// asynq server, twice in one run: with no destination limit, then with
// google.com limited to THROTTLE_RATE a second (default 100). Reported: the
// other 70%'s rate in each run and their ratio (the limited group must not
// slow them: ≥ 0.9), and the limited group's steady rate (the second half
// of its messages after the bucket's burst) against its limit (±2%). It
// fails when either is missed.
//
//	THROTTLE_N=20000 go test -run '^$' -bench BroadcastThrottled -benchtime 1x -timeout 60m ./worker/
func BenchmarkBroadcastThrottled(b *testing.B) {
	n := envInt(b, "THROTTLE_N", 20000)
	rate := envInt(b, "THROTTLE_RATE", 100)
	free, _, _ := throttledDrain(b, n, nil)
	limit := throttle.Limit{Suffix: "google.com", PerMinute: rate * 60}
	withLimit, group, groupN := throttledDrain(b, n, []throttle.Limit{limit})
	ratio := withLimit / free
	b.ReportMetric(free, "others-free-sends/s")
	b.ReportMetric(withLimit, "others-throttled-sends/s")
	b.ReportMetric(ratio, "others-ratio")
	b.ReportMetric(group, "group-sends/s")
	b.Logf("others: %.0f/s free, %.0f/s beside the limited group (ratio %.3f); limited group: %d messages at %.2f/s (limit %d/s)",
		free, withLimit, ratio, groupN, group, rate)
	if ratio < 0.9 {
		b.Errorf("the other destinations went at %.3f of their unthrottled rate, want ≥ 0.9", ratio)
	}
	if group < float64(rate)*0.98 || group > float64(rate)*1.02 {
		b.Errorf("the limited group went at %.2f/s, want %d/s ± 2%%", group, rate)
	}
}

// throttledDrain sends one broadcast to n contacts (30% at gmail.com) with
// limits, and returns the rate of the others (messages over T0 to their
// last), the limited group's steady rate (past its burst) and its count.
func throttledDrain(b *testing.B, n int, limits []throttle.Limit) (others, group float64, groupN int) {
	ctx := context.Background()
	s := newSeqBench(b, n)
	s.exec(`UPDATE contacts SET created_at = now() - interval '1 hour',
		email = CASE WHEN substr(id, 5)::int % 10 < 3 THEN 'g' || substr(id, 5) || '@gmail.com' ELSE email END
		WHERE tenant_id = $1`, benchTenant)
	s.exec(`INSERT INTO segments (tenant_id, id, name, rules) VALUES ($1, 'seg_all', 'All', '{"operator":"and","conditions":[]}')`, benchTenant)
	s.exec(`ANALYZE contacts`)
	z := testenv.DNS(b)
	z.Add(b, "gmail.com. 3600 IN MX 5 gmail-smtp-in.l.google.com.", "example.com. 3600 IN MX 10 mx.example.com.")
	rdb, prefix := testenv.Redis(b)
	s.svc.Sender.Throttle = throttle.New(rdb, prefix, limits, &throttle.MX{Server: z.Addr})
	t0 := drainBroadcast(b, s, "brd_thr", max(benchConcurrency, 1), time.Duration(n)*20*time.Millisecond+2*time.Minute).t0
	var otherN int
	var otherLast, gFirst, gLast float64
	burst := 0
	if len(limits) > 0 {
		burst = limits[0].Burst()
	}
	if err := s.db.Pool.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE to_address NOT LIKE '%@gmail.com'),
			coalesce(extract(epoch FROM max(sent_at) FILTER (WHERE to_address NOT LIKE '%@gmail.com') - $2::timestamptz), 0),
			count(*) FILTER (WHERE to_address LIKE '%@gmail.com')
		FROM sends WHERE tenant_id = $1 AND broadcast_id = 'brd_thr'`, benchTenant, t0).Scan(&otherN, &otherLast, &groupN); err != nil {
		b.Fatal(err)
	}
	// The group's steady rate: over the second half of what followed its
	// burst. The burst's end is too early a start: the bucket refilled
	// while the burst went out (over the first seconds, among the other
	// recipients), and those tokens went at once after it, which read as
	// 102.3/s against a limit of 100/s (session 15).
	from := burst + (groupN-burst)/2
	if err := s.db.Pool.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM min(sent_at)), 0), coalesce(extract(epoch FROM max(sent_at)), 0)
		FROM (SELECT sent_at, row_number() OVER (ORDER BY sent_at) AS k FROM sends
		      WHERE tenant_id = $1 AND broadcast_id = 'brd_thr' AND to_address LIKE '%@gmail.com') g WHERE k > $2`,
		benchTenant, from).Scan(&gFirst, &gLast); err != nil {
		b.Fatal(err)
	}
	if otherN+groupN != n || s.sg.Count() != n {
		b.Fatalf("%d + %d messages recorded, provider %d, want %d", otherN, groupN, s.sg.Count(), n)
	}
	others = float64(otherN) / otherLast
	if gLast > gFirst {
		group = float64(groupN-from-1) / (gLast - gFirst)
	}
	b.Logf("limits %v: others %d in %.1f s; group %d", limits, otherN, otherLast, groupN)
	return others, group, groupN
}
