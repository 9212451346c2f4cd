package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/app"
)

// BenchmarkAuditWriteOverhead: the same write, PATCH /api/contacts/{id}
// through the whole app (authentication, the rate limit in Redis, the
// contact's transaction), by two apps on one database, pool and Redis:
// one as served, whose write records its audit entry in its transaction,
// and one without entries. Each iteration makes one write of each, one
// after the other, the order swapped every iteration (ABBA), and times
// each on its own, so a machine whose load changes, even within a
// millisecond, weighs on both alike, and neither always follows the
// other's write to the same row. Reported: the mean latency of each,
// their ratio (the budget's figure) and, for information, the ratio of
// the medians; the benchmark fails when the entry adds more than 5%
// to the mean (ADDENDUM 25's budget).
//
//	go test -run '^$' -bench AuditWriteOverhead -benchtime 2000x ./api/
func BenchmarkAuditWriteOverhead(b *testing.B) {
	bb := setup(b)
	key := bb.apiKey(bb.tenant("org_audit_bench"))
	id := bb.expect("POST", "/api/contacts", key, map[string]any{"email": "ann@example.com"}, 201).body["contactId"].(string)
	bare := newApp(b, app.Infra{Config: bb.cfg, DB: bb.db, Redis: bb.rdb, RedisPrefix: bb.prefix, Provider: bb.provider},
		Deps{noAudit: true})
	// Each write sets a value the row does not hold yet.
	n := 0
	write := func(a *fiber.App) time.Duration {
		n++
		req := httptest.NewRequest("PATCH", "/api/contacts/"+id, bytes.NewReader(fmt.Appendf(nil, `{"properties":{"n":%d}}`, n)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		start := time.Now()
		res, err := a.Test(req, -1)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		took := time.Since(start)
		if res.StatusCode != 200 {
			b.Fatalf("PATCH: %d", res.StatusCode)
		}
		return took
	}
	for range 200 { // warm both apps' pools, caches and plans
		write(bb.app)
		write(bare)
	}
	with, without := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			without = append(without, write(bare))
			with = append(with, write(bb.app))
		} else {
			with = append(with, write(bb.app))
			without = append(without, write(bare))
		}
	}
	b.StopTimer()
	mean, median := func(d []time.Duration) float64 {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return float64(sum.Microseconds()) / float64(len(d))
	}, func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	ratio := mean(with) / mean(without)
	b.ReportMetric(mean(without), "µs/write")
	b.ReportMetric(mean(with), "µs/audited-write")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(median(with)/median(without), "p50-ratio")
	b.Logf("b.N %d: mean %.0f / %.0f µs, p50 %.0f / %.0f µs, ratio %.3f", b.N, mean(with), mean(without),
		median(with), median(without), ratio)
	if b.N >= 1000 && ratio > 1.05 {
		b.Fatalf("the audit entry adds %.1f%% to a write, over the 5%% budget", (ratio-1)*100)
	}
}
