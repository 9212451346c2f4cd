package segments_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkLiveTick: one tenant per size in LIVE_TICK_N (default
// "100000,1000000"), each with that many contacts (and one login event
// each) and 10 live time-rule segments: inactiveDays greaterThan 7, 14,
// 30, 60, 90 and login occurred within 1d, 3d, 7d, 14d, 30d. Every contact
// is 12 hours away from any whole-day bound, except LIVE_TICK_FLIPS
// (default 100) per segment placed 30 seconds past the bound that the
// last minute crossed. Each round (LIVE_TICK_ROUNDS, default 5) puts them
// back, marks the tenant's segments as judged a minute ago and times one
// TickLive. The tick's work must follow the flips, not the tenant: it
// fails when a tick at the largest size takes more than 2x one at the
// smallest, or judges any contact but the flips. The bulk load runs with
// triggers off (session_replication_role = replica) from generate_series;
// the segments are created after it, so their first compute is real.
//
//	go test ./internal/segments -run '^$' -bench BenchmarkLiveTick -benchtime 1x -timeout 60m
//	make bench-live
func BenchmarkLiveTick(b *testing.B) {
	sizes := []int{100_000, 1_000_000}
	if v := os.Getenv("LIVE_TICK_N"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("LIVE_TICK_N=%q: want positive integers separated by commas", v)
			}
			sizes = append(sizes, n)
		}
	}
	flips := envN(b, "LIVE_TICK_FLIPS", 100)
	rounds := envN(b, "LIVE_TICK_ROUNDS", 5)
	bb := setup(b)
	ctx := bb.ctx
	// The loader's own connection: triggers (the live queue, webhooks) and
	// foreign keys off for the bulk rows and each round's reset.
	raw, err := pgx.ConnectConfig(ctx, bb.db.Pool.Config().ConnConfig.Copy())
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close(context.Background())
	exec := func(sql string, args ...any) {
		b.Helper()
		if _, err := raw.Exec(ctx, sql, args...); err != nil {
			b.Fatalf("%v\n%s", err, sql)
		}
	}
	exec(`SET session_replication_role = replica`)
	inactive := []int{7, 14, 30, 60, 90}
	within := []int{1, 3, 7, 14, 30}
	type size struct {
		n      int
		tenant string
		ids    map[string]string // flip prefix (fi7, fe1, ...) -> its segment
		took   []time.Duration
		// Rows the ticks read from contacts, events and segment_members:
		// through their indexes, and by sequential scans.
		idxRows, seqRows int64
	}
	// The statistics views count what every backend read; a backend sends
	// its counts within a second of going idle, hence the waits (outside
	// the timer).
	tableStats := func() (idx, seq int64) {
		b.Helper()
		time.Sleep(1500 * time.Millisecond)
		exec(`SELECT pg_stat_clear_snapshot()`)
		if err := raw.QueryRow(ctx, `SELECT
				(SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relname IN ('contacts', 'segment_members') OR relname LIKE 'events\_%'),
				(SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables WHERE relname IN ('contacts', 'segment_members') OR relname LIKE 'events\_%')`,
		).Scan(&idx, &seq); err != nil {
			b.Fatal(err)
		}
		return idx, seq
	}
	b.StopTimer()
	var all []*size
	for k, n := range sizes {
		sz := &size{n: n, tenant: fmt.Sprintf("ten_tick%d", k), ids: map[string]string{}}
		all = append(all, sz)
		tenant := sz.tenant
		start := time.Now()
		exec(`INSERT INTO tenants (id, name, plan) VALUES ($1, 'tick', 'pro')`, tenant)
		exec(`INSERT INTO contacts (tenant_id, id, email, created_at, last_event_at)
			SELECT $1, 'c' || i, 'c' || i || '@x.test', now() - interval '400 days',
				now() - interval '12 hours' - (i % 120) * interval '1 day'
			FROM generate_series(1, $2::int) i`, tenant, n)
		exec(`INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
			SELECT $1, 'evt_c' || i, 'c' || i, 'login', '{}', now() - interval '12 hours' - (i % 90) * interval '1 day'
			FROM generate_series(1, $2::int) i`, tenant, n)
		// The flips: fi<m>_<j> crosses inactiveDays m+1 (entering "> m"),
		// fe<d>_<j>'s login leaves "within d days" (leaving it).
		for _, m := range inactive {
			exec(`INSERT INTO contacts (tenant_id, id, email, created_at)
				SELECT $1, c, c || '@x.test', now() - interval '400 days' FROM unnest($2::text[]) c`, tenant, flipIDs("fi", m, flips))
		}
		for _, d := range within {
			exec(`INSERT INTO contacts (tenant_id, id, email, created_at, last_event_at)
				SELECT $1, c, c || '@x.test', now() - interval '400 days', now() - interval '12 hours'
				FROM unnest($2::text[]) c`, tenant, flipIDs("fe", d, flips))
		}
		exec(`ANALYZE contacts`)
		exec(`ANALYZE events`)
		loaded := time.Since(start)
		for _, m := range inactive {
			s := bb.createLive(b, tenant, fmt.Sprintf("inactive %d", m), mustJSON(map[string]any{"operator": "and", "conditions": []any{
				map[string]any{"type": "derived", "field": "inactiveDays", "operator": "greaterThan", "value": m}}}))
			sz.ids[fmt.Sprintf("fi%d", m)] = s.ID
		}
		for _, d := range within {
			s := bb.createLive(b, tenant, fmt.Sprintf("login %dd", d), mustJSON(map[string]any{"operator": "and", "conditions": []any{
				map[string]any{"type": "event", "name": "login", "operator": "occurred", "within": fmt.Sprintf("%dd", d)}}}))
			sz.ids[fmt.Sprintf("fe%d", d)] = s.ID
		}
		b.Logf("%d contacts: loaded in %v, 10 live segments created (computed) in %v", n, loaded.Round(time.Millisecond),
			(time.Since(start) - loaded).Round(time.Millisecond))
	}
	exec(`ANALYZE segment_members`)
	// Rounds go through the sizes in turn, so a slow spell of the shared
	// machine falls on every size alike.
	for r := range rounds {
		for _, sz := range all {
			tenant := sz.tenant
			// Put the flips back 30 s past the bound the last minute
			// crossed, as they were before the previous round's tick.
			for _, m := range inactive {
				who := flipIDs("fi", m, flips)
				exec(`UPDATE contacts SET last_event_at = now() - ($3::int + 1) * interval '1 day' - interval '30 seconds'
					WHERE tenant_id = $1 AND id = ANY ($2)`, tenant, who, m)
				exec(`DELETE FROM segment_members WHERE tenant_id = $1 AND segment_id = $2 AND contact_id = ANY ($3)`,
					tenant, sz.ids[fmt.Sprintf("fi%d", m)], who)
			}
			for _, d := range within {
				who := flipIDs("fe", d, flips)
				exec(`DELETE FROM events WHERE tenant_id = $1 AND contact_id = ANY ($2)`, tenant, who)
				exec(`INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
					SELECT $1, 'evt_' || c || '_' || $4::int, c, 'login', '{}', now() - $3::int * interval '1 day' - interval '30 seconds'
					FROM unnest($2::text[]) c`, tenant, who, d, r)
				exec(`INSERT INTO segment_members (tenant_id, segment_id, contact_id)
					SELECT $1, $2, c FROM unnest($3::text[]) c ON CONFLICT DO NOTHING`, tenant, sz.ids[fmt.Sprintf("fe%d", d)], who)
			}
			// Only this tenant's segments are due.
			exec(`UPDATE segments SET live_judged_at = CASE WHEN tenant_id = $1 THEN now() - interval '1 minute'
				ELSE now() + interval '1 day' END WHERE live`, tenant)
			idx0, seq0 := tableStats()
			b.StartTimer()
			t0 := time.Now()
			res, err := bb.segs.TickLive(ctx, 30*time.Second, 100)
			took := time.Since(t0)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			idx1, seq1 := tableStats()
			sz.idxRows += idx1 - idx0
			sz.seqRows += seq1 - seq0
			if res.Segments != 10 || res.Judged != 10*flips || res.Changed != 10*flips {
				b.Fatalf("%d contacts, round %d: tick %+v, want 10 segments, %d judged and changed (the flips only)",
					sz.n, r, res, 10*flips)
			}
			sz.took = append(sz.took, took)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	median := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, sz := range all {
		each := make([]string, len(sz.took))
		for i, d := range sz.took {
			each[i] = fmt.Sprintf("%.1f", ms(d))
		}
		b.ReportMetric(ms(median(sz.took)), fmt.Sprintf("ms/tick@%d", sz.n))
		b.ReportMetric(float64(sz.idxRows)/float64(rounds), fmt.Sprintf("index-rows/tick@%d", sz.n))
		b.Logf("%d contacts: median %.1f ms per tick (%s ms), %d contacts judged and %d memberships changed per tick; "+
			"rows read per tick from contacts, events and members: %d through indexes, %d by sequential scans",
			sz.n, ms(median(sz.took)), strings.Join(each, ", "), 10*flips, 10*flips,
			sz.idxRows/int64(rounds), sz.seqRows/int64(rounds))
	}
	if len(all) > 1 {
		lo, hi := all[0], all[len(all)-1]
		ratio := float64(median(hi.took)) / float64(median(lo.took))
		b.ReportMetric(ratio, "tick-ratio")
		b.Logf("median tick at %d contacts / at %d: %.2f (the same flips; fails above 2)", hi.n, lo.n, ratio)
		if ratio > 2 {
			b.Errorf("a tick at %d contacts took %.2fx one at %d with the same flips, want ≤ 2", hi.n, ratio, lo.n)
		}
	}
}

// flipIDs are the contact ids of one segment's flips (as loaded above).
func flipIDs(prefix string, n, flips int) []string {
	out := make([]string, flips)
	for j := range out {
		out[j] = fmt.Sprintf("%s%d_%d", prefix, n, j+1)
	}
	return out
}

// envN is a positive integer from the environment, def when unset.
func envN(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
