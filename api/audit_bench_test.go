package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/app"
)

// BenchmarkAuditWriteOverhead: the same write, PATCH /api/contacts/{id}
// through the whole app (authentication, the rate limit in Redis, the
// contact's transaction), by two apps on one database and Redis: one as
// served, whose write records its audit entry, and one without entries.
// They run in alternating slices of b.N/10, so a machine whose load
// changes weighs on both alike. Reported: the mean latency of each and
// their ratio; the benchmark fails when the entry adds more than 5%
// (ADDENDUM 25's budget).
//
//	go test -run '^$' -bench AuditWriteOverhead -benchtime 3000x ./api/
func BenchmarkAuditWriteOverhead(b *testing.B) {
	bb := setup(b)
	key := bb.apiKey(bb.tenant("org_audit_bench"))
	id := bb.expect("POST", "/api/contacts", key, map[string]any{"email": "ann@example.com"}, 201).body["contactId"].(string)
	bare := newApp(b, app.Infra{Config: bb.cfg, DB: bb.db, Redis: bb.rdb, RedisPrefix: bb.prefix, Provider: bb.provider},
		Deps{noAudit: true})
	write := func(a *fiber.App, i int) {
		req := httptest.NewRequest("PATCH", "/api/contacts/"+id, bytes.NewReader(fmt.Appendf(nil, `{"properties":{"n":%d}}`, i)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := a.Test(req, -1)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatalf("PATCH: %d", res.StatusCode)
		}
	}
	for i := range 200 { // warm both apps' pools, caches and plans
		write(bb.app, i)
		write(bare, i)
	}
	var with, without time.Duration
	slice := max(b.N/10, 1)
	b.ResetTimer()
	for done := 0; done < b.N; done += slice {
		n := min(slice, b.N-done)
		start := time.Now()
		for i := range n {
			write(bare, i)
		}
		without += time.Since(start)
		start = time.Now()
		for i := range n {
			write(bb.app, i)
		}
		with += time.Since(start)
	}
	b.StopTimer()
	ratio := float64(with) / float64(without)
	b.ReportMetric(float64(without.Microseconds())/float64(b.N), "µs/write")
	b.ReportMetric(float64(with.Microseconds())/float64(b.N), "µs/audited-write")
	b.ReportMetric(ratio, "ratio")
	if b.N >= 1000 && ratio > 1.05 {
		b.Fatalf("the audit entry adds %.1f%% to a write, over the 5%% budget", (ratio-1)*100)
	}
}
