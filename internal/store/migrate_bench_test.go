package store_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tidings/internal/store"
	"tidings/internal/testenv"
)

// BenchmarkMigrateEventsToPartitions upgrades an install holding
// MIGRATE_BENCH_N (default 1,000,000) events to the partitioned table
// (schemas 0018, 0019) while a client inserts events one at a time, and
// reports each step's time and the longest insert during each (what "no
// long lock" means to the api).
//
//	go test -run '^$' -bench MigrateEventsToPartitions -benchtime 1x -timeout 30m ./internal/store/
func BenchmarkMigrateEventsToPartitions(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("MIGRATE_BENCH_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	_, url := testenv.NewDatabase(b)
	ctx := context.Background()
	db, err := store.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	exec := func(sql string, args ...any) {
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	exec(`DROP SCHEMA public CASCADE; CREATE SCHEMA public`)
	if err := db.MigrateTo(ctx, quiet, 17); err != nil {
		b.Fatal(err)
	}
	exec(`INSERT INTO tenants (id, name) VALUES ('ten_m', 'M')`)
	exec(`INSERT INTO contacts (tenant_id, id, email) SELECT 'ten_m', 'cnt_' || g, 'c' || g || '@example.com' FROM generate_series(1, 1000) g`)
	exec(`INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
		SELECT 'ten_m', 'evt_' || g, 'cnt_' || (1 + g % 1000), 'e', '{"a":1}', now() - (g % 31536000) * interval '1 second'
		FROM generate_series(1, $1::int) g`, n)
	exec(`ANALYZE events`)

	var worst atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			if _, err := db.Pool.Exec(ctx, `INSERT INTO events (tenant_id, id, contact_id, name, occurred_at)
				VALUES ('ten_m', 'evt_live_' || $1::text, 'cnt_1', 'live', now())`, strconv.Itoa(i)); err != nil {
				b.Error(err)
				return
			}
			if d := int64(time.Since(t0)); d > worst.Load() {
				worst.Store(d)
			}
		}
	})
	b.ResetTimer()
	t0 := time.Now()
	if err := db.MigrateTo(ctx, quiet, 18); err != nil {
		b.Fatal(err)
	}
	step1, worst1 := time.Since(t0), time.Duration(worst.Swap(0))
	t1 := time.Now()
	if err := db.MigrateTo(ctx, quiet, 19); err != nil {
		b.Fatal(err)
	}
	step2, worst2 := time.Since(t1), time.Duration(worst.Swap(0))
	b.StopTimer()
	close(stop)
	wg.Wait()
	b.ReportMetric(step1.Seconds(), "step1-s")
	b.ReportMetric(float64(worst1.Milliseconds()), "step1-worst-insert-ms")
	b.ReportMetric(step2.Seconds()*1000, "step2-ms")
	b.ReportMetric(float64(worst2.Milliseconds()), "step2-worst-insert-ms")
}
