package segments_test

import (
	"fmt"
	"testing"
	"time"

	"tidings/internal/events"
)

// BenchmarkLiveIngest records batches of custom events (as the group
// commit of POST /api/events does) for a tenant with 10 live segments that
// read the event, and for one with none, in the same run: the ratio of the
// two is the cost of queueing for live segments (target: live >= 0.7 of
// none). The drain is the segments role's work, not the write's.
//
//	go test ./internal/segments -run '^$' -bench BenchmarkLiveIngest -benchtime 20x -count 1
func BenchmarkLiveIngest(b *testing.B) {
	bb := setup(b)
	const contacts, batch = 200, 100
	for _, tenant := range []string{tenantA, tenantB} {
		for i := range contacts {
			bb.contact(b, tenant, fmt.Sprintf("c%d@x.test", i), map[string]any{"plan": "pro"})
		}
	}
	for i := range 10 {
		bb.createLive(b, tenantA, fmt.Sprintf("l%d", i), mustJSON(map[string]any{"operator": "and", "conditions": []any{
			map[string]any{"type": "event", "name": "buy", "operator": "occurred"},
			map[string]any{"type": "property", "field": "plan", "operator": "equals", "value": fmt.Sprint(i)}}}))
	}
	rec := &events.Recorder{DB: bb.db}
	for _, tc := range []struct{ name, tenant string }{{"none", tenantB}, {"live10", tenantA}} {
		b.Run(tc.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				ins := make([]events.Custom, batch)
				for j := range ins {
					ins[j] = events.Custom{TenantID: tc.tenant, Email: fmt.Sprintf("c%d@x.test", (n+j)%contacts), Name: "buy",
						Properties: []byte("{}"), Timestamp: time.Now(), UpdateContact: true}
				}
				n += batch
				if _, errs := rec.RecordCustomMany(bb.ctx, ins); errs[0] != nil {
					b.Fatal(errs[0])
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
