package retention_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/events"
	"tidings/internal/retention"
)

// BenchmarkArchiveMonth archives one month of ARCHIVE_BENCH_N (default
// 1,000,000) events of one tenant, while 8 clients record events for
// another tenant through the same path as POST /api/events; the ingest
// rate is measured for 10 s before the run, without it.
// Reported: the archive's seconds and events/s, and ingest during / before
// (the bound: 0.8).
//
//	go test -run '^$' -bench ArchiveMonth -benchtime 1x -timeout 30m ./internal/retention/
func BenchmarkArchiveMonth(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("ARCHIVE_BENCH_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	cfg := apptest.Config(b)
	cfg.ArchiveDir = b.TempDir()
	svc := apptest.Services(b, app.Infra{Config: cfg})
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		if _, err := svc.DB.Pool.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	exec(`INSERT INTO tenants (id, name, event_retention_days) VALUES ('ten_old', 'Old', 30), ('ten_live', 'Live', 365)`)
	exec(`INSERT INTO contacts (tenant_id, id, email) SELECT 'ten_old', 'cnt_' || g, 'c' || g || '@example.com' FROM generate_series(1, 1000) g`)
	exec(`INSERT INTO contacts (tenant_id, id, email) SELECT 'ten_live', 'cnt_' || g, 'c' || g || '@example.com' FROM generate_series(1, 1000) g`)
	// One month, 60 days back: all of it past ten_old's 30 days.
	exec(`INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
		SELECT 'ten_old', 'evt_' || lpad(g::text, 8, '0'), 'cnt_' || (1 + g % 1000), 'page.viewed',
			jsonb_build_object('path', '/p/' || (g % 97), 'n', g),
			date_trunc('month', now() - interval '60 days', 'UTC') + (g % 2419200) * interval '1 second'
		FROM generate_series(1, $1::int) g`, n)
	exec(`ANALYZE events`)

	ingest := func(d time.Duration) float64 {
		var done atomic.Int64
		deadline := time.Now().Add(d)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := 0; time.Now().Before(deadline); i++ {
					_, err := svc.Events.RecordCustom(ctx, events.Custom{TenantID: "ten_live",
						Email: fmt.Sprintf("c%d@example.com", 1+(w*131+i)%1000), Name: "page.viewed",
						Properties: []byte(`{"path":"/"}`), Timestamp: time.Now(), UpdateContact: true})
					if err != nil {
						b.Error(err)
						return
					}
					done.Add(1)
				}
			})
		}
		wg.Wait()
		return float64(done.Load()) / d.Seconds()
	}

	before := ingest(10 * time.Second)
	b.ResetTimer()
	start := time.Now()
	var res retention.Result
	var runErr error
	var elapsed time.Duration
	archived := make(chan struct{})
	go func() {
		defer close(archived)
		res, runErr = svc.Archiver.Run(ctx)
		elapsed = time.Since(start)
	}()
	// Ingest while the archive runs, in slices, until it ends.
	var during []float64
	for {
		during = append(during, ingest(2*time.Second))
		select {
		case <-archived:
		default:
			continue
		}
		break
	}
	<-archived
	b.StopTimer()
	if runErr != nil || res.Events != int64(n) {
		b.Fatalf("archived %d of %d: %v", res.Events, n, runErr)
	}
	var sum float64
	for _, d := range during {
		sum += d
	}
	avg := sum / float64(len(during))
	b.Logf("ingest per 2 s slice during the run: %.0f", during)
	b.ReportMetric(elapsed.Seconds(), "archive-s")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "archived-events/s")
	b.ReportMetric(avg, "ingest-during/s")
	b.ReportMetric(before, "ingest-without/s")
	b.ReportMetric(avg/before, "ingest-ratio")
}
