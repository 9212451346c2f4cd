package outbound_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/outbound"
)

// BenchmarkDelivery: WEBHOOK_BENCH_N (default 10,000) facts for a tenant
// with 3 endpoints (a local receiver answering 200), delivered by two
// deliverers running side by side as two worker slots would. Reported:
// deliveries/s, and p50/p99 from the fact (the message's time) to its
// delivery.
//
//	go test -run '^$' -bench Delivery -benchtime 1x ./internal/outbound/
func BenchmarkDelivery(b *testing.B) {
	n := 10000
	if v := os.Getenv("WEBHOOK_BENCH_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got.Add(1)
		w.WriteHeader(200)
	}))
	defer srv.Close()
	cfg := apptest.Config(b)
	cfg.WebhookAllowPrivateTargets = true
	svc := apptest.Services(b, app.Infra{Config: cfg})
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		if _, err := svc.DB.Pool.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	exec(`INSERT INTO tenants (id, name) VALUES ('ten_b', 'B')`)
	for range 3 {
		if _, err := svc.Outbound.Create(ctx, "ten_b", outbound.Input{URL: &srv.URL}); err != nil {
			b.Fatal(err)
		}
	}
	exec(`INSERT INTO contacts (tenant_id, id, email) SELECT 'ten_b', 'cnt_' || g, 'c' || g || '@example.com' FROM generate_series(1, $1::int) g`, n)
	start := time.Now()
	done := make(chan struct{}, 2)
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			for got.Load() < int64(3*n) {
				if k, err := svc.Deliverer.Run(ctx); err != nil {
					b.Error(err)
					return
				} else if k == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	<-done
	<-done
	elapsed := time.Since(start)
	var p50, p99 float64
	if err := svc.DB.Pool.QueryRow(ctx, `SELECT
		percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.updated_at - m.created_at)),
		percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM d.updated_at - m.created_at))
		FROM webhook_deliveries d JOIN webhook_messages m ON m.tenant_id = d.tenant_id AND m.id = d.message_id
		WHERE d.status = 'succeeded'`).Scan(&p50, &p99); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(3*n)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(p50*1000, "p50-ms")
	b.ReportMetric(p99*1000, "p99-ms")
}
