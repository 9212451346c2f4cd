package events_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidings/internal/events"
	"tidings/internal/page"
	"tidings/internal/testenv"
)

// BenchmarkFeedsAtScale: FEEDS_BENCH_N events (default 1,000,000; the
// retention issue's figure is 10,000,000) over the last 12 months, for 10
// tenants of 1,000 contacts each, in the partitioned table. Reported per
// read (the tenant feed, by name, by contact, by contact and name, the
// timeline; first pages of 50 for random tenants and contacts): p50 and
// p99 in µs. With -v it logs each query's plan.
//
//	go test -run '^$' -bench FeedsAtScale -benchtime 1x -timeout 60m -v ./internal/events/
func BenchmarkFeedsAtScale(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("FEEDS_BENCH_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	db := testenv.DB(b)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	exec(`INSERT INTO tenants (id, name) SELECT 'ten_' || t, 'T' FROM generate_series(0, 9) t`)
	exec(`INSERT INTO contacts (tenant_id, id, email) SELECT 'ten_' || t, 'cnt_' || c, 'c' || c || '@example.com'
		FROM generate_series(0, 9) t, generate_series(0, 999) c`)
	// Partitions for the past year (an install that has run a year).
	exec(`UPDATE event_partition_start SET starts_at = date_trunc('month', now(), 'UTC') - interval '12 months'`)
	exec(`ALTER TABLE events DETACH PARTITION events_before`)
	exec(`DO $$ BEGIN EXECUTE format('ALTER TABLE events ATTACH PARTITION events_before FOR VALUES FROM (MINVALUE) TO (%L)',
		(SELECT starts_at FROM event_partition_start)); END $$`)
	exec(`DO $$ DECLARE m timestamptz := date_trunc('month', now(), 'UTC') - interval '12 months'; BEGIN
		WHILE m < date_trunc('month', now(), 'UTC') + interval '2 months' LOOP
			IF to_regclass('events_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM')) IS NULL THEN
				EXECUTE format('CREATE TABLE %I (LIKE events INCLUDING DEFAULTS)', 'events_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM'));
				EXECUTE format('ALTER TABLE events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
					'events_' || to_char(m AT TIME ZONE 'UTC', 'YYYY_MM'), m, m + interval '1 month');
			END IF;
			m := m + interval '1 month';
		END LOOP; END $$`)
	for done := 0; done < n; done += 1_000_000 {
		exec(`INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
			SELECT 'ten_' || (g % 10), 'evt_' || g, 'cnt_' || ((g / 10) % 1000), 'e' || (g % 7), '{"a":1}',
				now() - ((g::bigint * 7919) % 31536000) * interval '1 second'
			FROM generate_series($1::int, $2::int - 1) g`, done, min(done+1_000_000, n))
	}
	exec(`INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
		SELECT 'ten_' || t, 'tle_' || t || '_' || c, 'cnt_' || c, 'scheduled', now() - c * interval '1 hour', '{}'
		FROM generate_series(0, 9) t, generate_series(0, 999) c`)
	exec(`VACUUM ANALYZE events`)
	exec(`ANALYZE timeline_entries`)

	feed := &events.Feed{DB: db}
	rng := rand.New(rand.NewPCG(1, 2))
	p := page.Params{Limit: 50}
	reads := []struct {
		name string
		run  func(tenant, contact string) error
	}{
		{"feed", func(t, _ string) error { _, _, err := feed.List(ctx, t, events.Filter{}, p); return err }},
		{"feed-name", func(t, _ string) error { _, _, err := feed.List(ctx, t, events.Filter{Name: "e3"}, p); return err }},
		{"contact", func(t, c string) error { _, _, err := feed.List(ctx, t, events.Filter{ContactID: c}, p); return err }},
		{"contact-name", func(t, c string) error {
			_, _, err := feed.List(ctx, t, events.Filter{ContactID: c, Name: "e3"}, p)
			return err
		}},
		{"timeline", func(t, c string) error { _, _, err := feed.Timeline(ctx, t, c, time.Time{}, p); return err }},
	}
	b.ResetTimer()
	for _, r := range reads {
		var took []time.Duration
		for range 300 {
			t, c := fmt.Sprintf("ten_%d", rng.IntN(10)), fmt.Sprintf("cnt_%d", rng.IntN(1000))
			t0 := time.Now()
			if err := r.run(t, c); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(t0))
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Microseconds()), r.name+"-p50-µs")
		b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), r.name+"-p99-µs")
	}
	b.StopTimer()
	if testing.Verbose() {
		for _, q := range []string{
			`SELECT * FROM events WHERE tenant_id = 'ten_3' AND (occurred_at, id) < ('infinity', '') ORDER BY occurred_at DESC, id DESC LIMIT 50`,
			`SELECT * FROM events WHERE tenant_id = 'ten_3' AND contact_id = 'cnt_7' AND (occurred_at, id) < ('infinity', '') ORDER BY occurred_at DESC, id DESC LIMIT 50`,
		} {
			rows, err := db.Pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY OFF) "+q)
			if err != nil {
				b.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var l string
				_ = rows.Scan(&l)
				plan = append(plan, l)
			}
			rows.Close()
			b.Logf("%s\n%s", q, strings.Join(plan, "\n"))
		}
	}
}
