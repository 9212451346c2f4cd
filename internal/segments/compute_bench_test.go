package segments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"tidings/internal/page"
	"tidings/internal/segments"
	"tidings/internal/testenv"
)

// A six-leaf rule: properties, derived fields and one nested segment.
const nestedRules = `{"operator":"and","conditions":[{"type":"property","field":"plan","operator":"equals","value":"pro"}]}`

const sixLeafRules = `{"operator":"and","conditions":[
 {"type":"segment","segmentId":"%s","operator":"memberOf"},
 {"type":"property","field":"score","operator":"greaterOrEqual","value":20},
 {"operator":"or","conditions":[
   {"type":"property","field":"country","operator":"equals","value":"NL"},
   {"type":"property","field":"tags","operator":"includes","value":"vip"}]},
 {"type":"derived","field":"totalOpens","operator":"greaterThan","value":0},
 {"type":"derived","field":"inactiveDays","operator":"lessThan","value":30}]}`

// BenchmarkCompute measures, per size, a fresh compute (every member is
// written), a recompute that changes nothing, a bare count of the same
// contacts for the ratio, and a page of 1,000 members at the start and deep
// in the list. The tenant is filled once per size (the parent benchmark runs
// once); each sub-benchmark times only its own b.N operations.
//
//	go test -run '^$' -bench Compute -benchtime 3x ./segments/
func BenchmarkCompute(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("contacts=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db := testenv.DB(b)
			start := time.Now()
			for _, q := range []string{
				`INSERT INTO tenants (id, name, contact_count) VALUES ('t', 'T', ` + fmt.Sprint(n) + `)`,
				`INSERT INTO contacts (tenant_id, id, email, properties, total_opens, last_event_at, created_at)
				 SELECT 't', 'cnt_' || lpad(g::text, 8, '0'), 'c' || g || '@example.com',
				        jsonb_build_object('plan', CASE WHEN g % 2 = 0 THEN 'pro' ELSE 'free' END,
				                           'score', g % 100,
				                           'country', CASE WHEN g % 5 = 0 THEN 'NL' ELSE 'DE' END,
				                           'tags', CASE WHEN g % 7 = 0 THEN '["vip","x"]'::jsonb ELSE '["x"]'::jsonb END),
				        g % 3, now() - ((g % 60) || ' days')::interval, now() - interval '90 days'
				 FROM generate_series(1, ` + fmt.Sprint(n) + `) g`,
				`VACUUM ANALYZE contacts`,
			} {
				if _, err := db.Pool.Exec(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
			b.Logf("filled %d contacts in %v", n, time.Since(start).Round(time.Millisecond))
			st := &segments.Store{DB: db}
			inner, err := st.Create(ctx, "t", segments.Input{Name: ptr("pro"), Rules: json.RawMessage(nestedRules)})
			if err != nil {
				b.Fatal(err)
			}
			seg, err := st.Create(ctx, "t", segments.Input{Name: ptr("six"), Rules: json.RawMessage(fmt.Sprintf(sixLeafRules, inner.ID))})
			if err != nil {
				b.Fatal(err)
			}
			compute := func(b *testing.B, wantChanged bool) {
				res, err := st.Compute(ctx, "t", seg.ID)
				if err != nil {
					b.Fatal(err)
				}
				if (res.Changed > 0) != wantChanged || res.Segment.MemberCount == 0 {
					b.Fatalf("changed %d, members %d", res.Changed, res.Segment.MemberCount)
				}
				b.ReportMetric(float64(res.Segment.MemberCount), "members")
			}
			b.Run("fresh", func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					if _, err := db.Pool.Exec(ctx, `DELETE FROM segment_members WHERE segment_id = $1`, seg.ID); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					compute(b, true)
				}
			})
			b.Run("recompute", func(b *testing.B) {
				if _, err := st.Compute(ctx, "t", seg.ID); err != nil { // members current, whatever ran before
					b.Fatal(err)
				}
				for b.Loop() {
					compute(b, false)
				}
			})
			b.Run("bare-count", func(b *testing.B) {
				for b.Loop() {
					var count int64
					if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM contacts WHERE tenant_id = 't'`).Scan(&count); err != nil || count != int64(n) {
						b.Fatal(err, count)
					}
				}
			})

			// Members paging with every contact a member: a page deep in the
			// list costs what the first one does.
			all, err := st.Create(ctx, "t", segments.Input{Name: ptr("all"), Rules: json.RawMessage(`{"operator":"and","conditions":[]}`)})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := st.Compute(ctx, "t", all.ID); err != nil {
				b.Fatal(err)
			}
			for name, after := range map[string]*page.Cursor{"members-first-page": nil, "members-page-at-90%": {ID: fmt.Sprintf("cnt_%08d", n*9/10)}} {
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						if m, err := st.Members(ctx, "t", all.ID, page.Params{After: after, Limit: 1000}); err != nil || len(m.ContactIDs()) != 1000 {
							b.Fatal(err, len(m.ContactIDs()))
						}
					}
				})
			}
		})
	}
}

func ptr(s string) *string { return &s }
