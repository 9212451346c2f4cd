package segments_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"tidings/internal/contacts"
	"tidings/internal/events"
)

// liveRatioTarget is what a write must keep of its rate beside 10 live
// segments that read what it changes (issue 40).
const liveRatioTarget = 0.7

// interleave runs none and live alternately, b.N times each, the order
// swapped every iteration, and returns each arm's total time: on a shared
// machine a slow spell then falls on both arms alike, so their ratio is
// one run's, measured side by side.
func interleave(b *testing.B, none, live func(i int)) (tNone, tLive time.Duration) {
	b.Helper()
	i := 0
	for b.Loop() {
		arms := []struct {
			f func(int)
			t *time.Duration
		}{{none, &tNone}, {live, &tLive}}
		if i%2 == 1 {
			arms[0], arms[1] = arms[1], arms[0]
		}
		for _, a := range arms {
			start := time.Now()
			a.f(i)
			*a.t += time.Since(start)
		}
		i++
	}
	return tNone, tLive
}

// reportRatio reports both arms' rates and their ratio, and fails the
// benchmark below the target.
func reportRatio(b *testing.B, unit string, perIter int, tNone, tLive time.Duration) {
	b.Helper()
	n := float64(b.N * perIter)
	none, live := n/tNone.Seconds(), n/tLive.Seconds()
	ratio := live / none
	b.ReportMetric(none, "none-"+unit+"/s")
	b.ReportMetric(live, "live10-"+unit+"/s")
	b.ReportMetric(ratio, "ratio")
	b.Logf("%s/s: none %.0f, 10 live segments %.0f, ratio %.3f (target ≥ %.1f)", unit, none, live, ratio, liveRatioTarget)
	if ratio < liveRatioTarget {
		b.Errorf("with 10 live segments the write ran at %.3f of its rate without, want ≥ %.1f", ratio, liveRatioTarget)
	}
}

// BenchmarkLiveIngest records batches of custom events (as the group
// commit of POST /api/events does) for a tenant with 10 live segments that
// read the event, and for one with none, interleaved in one run: the ratio
// of the two is the cost of queueing for live segments (target: live ≥ 0.7
// of none; the benchmark fails below). The drain is the segments role's
// work, not the write's.
//
//	go test ./internal/segments -run '^$' -bench BenchmarkLiveIngest -benchtime 200x -count 1
func BenchmarkLiveIngest(b *testing.B) {
	bb := setup(b)
	const contactsN, batch = 200, 100
	for _, tenant := range []string{tenantA, tenantB} {
		for i := range contactsN {
			bb.contact(b, tenant, fmt.Sprintf("c%d@x.test", i), map[string]any{"plan": "pro"})
		}
	}
	for i := range 10 {
		bb.createLive(b, tenantA, fmt.Sprintf("l%d", i), mustJSON(map[string]any{"operator": "and", "conditions": []any{
			map[string]any{"type": "event", "name": "buy", "operator": "occurred"},
			map[string]any{"type": "property", "field": "plan", "operator": "equals", "value": fmt.Sprint(i)}}}))
	}
	rec := &events.Recorder{DB: bb.db}
	ingest := func(tenant string) func(int) {
		return func(i int) {
			ins := make([]events.Custom, batch)
			for j := range ins {
				ins[j] = events.Custom{TenantID: tenant, Email: fmt.Sprintf("c%d@x.test", (i*batch+j)%contactsN), Name: "buy",
					Properties: []byte("{}"), Timestamp: time.Now(), UpdateContact: true}
			}
			if _, errs := rec.RecordCustomMany(bb.ctx, ins); errs[0] != nil {
				b.Fatal(errs[0])
			}
		}
	}
	tNone, tLive := interleave(b, ingest(tenantB), ingest(tenantA))
	reportRatio(b, "events", batch, tNone, tLive)
}

// BenchmarkLiveUpdate updates one property of one contact (PATCH
// /api/contacts/{id}: contacts.Store.Update) for a tenant with 10 live
// segments that read that property, and for one with none, interleaved in
// one run (target: live ≥ 0.7 of none; the benchmark fails below). Every
// update changes the value, so every live one queues its contact.
//
//	go test ./internal/segments -run '^$' -bench BenchmarkLiveUpdate -benchtime 2000x -count 1
func BenchmarkLiveUpdate(b *testing.B) {
	bb := setup(b)
	const contactsN = 200
	ids := map[string][]string{}
	for _, tenant := range []string{tenantA, tenantB} {
		for i := range contactsN {
			ids[tenant] = append(ids[tenant], bb.contact(b, tenant, fmt.Sprintf("c%d@x.test", i), map[string]any{"score": 0}))
		}
	}
	for i := range 10 {
		bb.createLive(b, tenantA, fmt.Sprintf("l%d", i), mustJSON(map[string]any{"operator": "and", "conditions": []any{
			map[string]any{"type": "property", "field": "score", "operator": "greaterThan", "value": i * 10}}}))
	}
	update := func(tenant string) func(int) {
		return func(i int) {
			raw := map[string]json.RawMessage{"score": mustJSON(i/contactsN + 1)} // a new value each round
			if _, err := bb.contacts.Update(bb.ctx, tenant, ids[tenant][i%contactsN],
				contacts.Change{PropertiesSent: true, Properties: raw}); err != nil {
				b.Fatal(err)
			}
		}
	}
	tNone, tLive := interleave(b, update(tenantB), update(tenantA))
	reportRatio(b, "updates", 1, tNone, tLive)
}
