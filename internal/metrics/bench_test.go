package metrics_test

import (
	"context"
	"testing"
	"time"

	"tidings/internal/metrics"
	"tidings/internal/page"
	"tidings/internal/testenv"
)

// BenchmarkRead measures the metric reads on a tenant with a year of
// counts on every shard: 365 days × 16 shards of tenant rows, and 1,000
// sequences and 1,000 templates with 12 months × 16 shards each (390,000
// rows), beside a second tenant as large. Run:
//
//	go test -run '^$' -bench BenchmarkRead -benchtime 200x ./internal/metrics/
func BenchmarkRead(b *testing.B) {
	ctx := context.Background()
	db := testenv.DB(b)
	for _, sql := range []string{
		`INSERT INTO tenants (id, name) VALUES ('ten_a', 'A'), ('ten_b', 'B')`,
		`INSERT INTO metric_counts (tenant_id, scope, scope_id, period, shard, scheduled, sent, delivered, opened, clicked, updated_at)
		 SELECT t, 'tenant', '', d::date, s, 30, 25, 24, 10, 3, now()
		 FROM unnest(ARRAY['ten_a', 'ten_b']) t, generate_series(date '2026-01-01', date '2026-12-31', interval '1 day') d,
		      generate_series(0, 15) s`,
		`INSERT INTO metric_counts (tenant_id, scope, scope_id, period, shard, scheduled, sent, delivered, opened, clicked, updated_at)
		 SELECT t, sc, sc || i, m::date, s, 3, 2, 2, 1, 0, now()
		 FROM unnest(ARRAY['ten_a', 'ten_b']) t, unnest(ARRAY['sequence', 'template']) sc, generate_series(1, 1000) i,
		      generate_series(date '2026-01-01', date '2026-12-01', interval '1 month') m, generate_series(0, 15) s`,
		`INSERT INTO sequences (tenant_id, id, name, content, trigger_event, created_at)
		 SELECT 'ten_a', 'sequence' || i, 'S', '', 'x', now() - make_interval(secs => i) FROM generate_series(1, 1000) i`,
		`INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html, created_at)
		 SELECT 'ten_a', 'template' || i, 'T', 's', 'c', 'h', now() - make_interval(secs => i) FROM generate_series(1, 1000) i`,
		`ANALYZE`,
	} {
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	st := &metrics.Store{DB: db, Now: func() time.Time { return time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC) }}
	for _, bc := range []struct {
		name string
		run  func() error
	}{
		{"range-93-days", func() error {
			r, err := st.Tenant(ctx, "ten_a", metrics.Query{StartDate: "2026-08-01", EndDate: "2026-11-01"})
			if err == nil && (len(r.Days) != 93 || r.Days[0].Sent != 400) {
				b.Fatalf("%d days, sent %d", len(r.Days), r.Days[0].Sent)
			}
			return err
		}},
		{"month", func() error { _, err := st.Tenant(ctx, "ten_a", metrics.Query{YearMonth: "2026-10"}); return err }},
		{"sequence", func() error {
			_, _, err := st.ScopedOne(ctx, "ten_a", metrics.ScopeSequence, "sequence500", "2026-10")
			return err
		}},
		{"sequences-page-20", func() error {
			_, err := st.ScopedList(ctx, "ten_a", metrics.ScopeSequence, "2026-10", page.Params{Limit: 20})
			return err
		}},
		{"sequences-page-100", func() error {
			pg, err := st.ScopedList(ctx, "ten_a", metrics.ScopeSequence, "2026-10", page.Params{Limit: 100})
			if err == nil && (len(pg.Items) != 100 || pg.Items[0].Sent != 32) {
				b.Fatalf("%d items, sent %d", len(pg.Items), pg.Items[0].Sent)
			}
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
}
