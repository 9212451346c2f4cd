package api

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSendBatch: 100 messages to 100 contacts as 100 POST /api/send
// calls one after another, against one POST /api/send/batch of the same
// 100, on one tenant and the fake SendGrid. Reported: messages/s of each
// and their ratio (the bound: 3x).
//
//	go test -run '^$' -bench SendBatch -benchtime 1x ./api/
func BenchmarkSendBatch(b *testing.B) {
	f := newSendFixture(b, "org_batch_bench")
	f.exec(`INSERT INTO contacts (tenant_id, id, email) SELECT $1, 'cnt_b' || g, 'b' || g || '@example.com' FROM generate_series(1, 100) g`, f.org)
	f.exec(`UPDATE tenants SET sandbox_whitelist = sandbox_whitelist || ARRAY(SELECT 'b' || g || '@example.com' FROM generate_series(1, 100) g) WHERE id = $1`, f.org)
	msgs := make([]any, 100)
	for i := range msgs {
		msgs[i] = map[string]any{"to": fmt.Sprintf("b%d@example.com", i+1), "template": "welcome"}
	}
	var single, batch time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		for _, m := range msgs {
			f.b.expect("POST", "/api/send", f.key, m, 200)
		}
		single += time.Since(t0)
		t0 = time.Now()
		r := f.b.expect("POST", "/api/send/batch", f.key, map[string]any{"messages": msgs}, 200)
		batch += time.Since(t0)
		for _, it := range r.items() {
			if it.(map[string]any)["status"] != "sent" {
				b.Fatalf("%v", it)
			}
		}
	}
	n := float64(100 * b.N)
	b.ReportMetric(n/single.Seconds(), "single-msgs/s")
	b.ReportMetric(n/batch.Seconds(), "batch-msgs/s")
	b.ReportMetric(single.Seconds()/batch.Seconds(), "ratio")
}
