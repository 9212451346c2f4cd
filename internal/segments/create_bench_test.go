package segments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"tidings/internal/segments"
	"tidings/internal/testenv"
)

// BenchmarkCreate measures POST /api/segments' store work with 10 and
// 1,000 other segments in the tenant, each holding a rule tree near the
// 64 KiB limit (incompressible values, as the fuzzer sent). The new
// segment references one of them, so the cycle check has an edge to read.
// Create reads only the edges its rules reach, so the figures should not
// grow with the other segments.
//
//	go test -run '^$' -bench Create -benchtime 200x ./internal/segments/
func BenchmarkCreate(b *testing.B) {
	for _, others := range []int{10, 1000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			ctx := context.Background()
			db := testenv.DB(b)
			for _, q := range []string{
				`INSERT INTO tenants (id, name) VALUES ('t', 'T')`,
				// 15 leaves of 4,000 hex characters: about 60 KB of rules each.
				`INSERT INTO segments (tenant_id, id, name, rules)
				 SELECT 't', 'seg_' || lpad(g::text, 5, '0'), 'S' || g,
				        jsonb_build_object('operator', 'or', 'conditions',
				          (SELECT jsonb_agg(jsonb_build_object('type', 'property', 'field', 'f' || l,
				                  'operator', 'equals', 'value',
				                  (SELECT string_agg(md5(random()::text || g || l || h), '') FROM generate_series(1, 125) h)))
				           FROM generate_series(1, 15) l))
				 FROM generate_series(1, ` + fmt.Sprint(others) + `) g`,
				`VACUUM ANALYZE segments`,
			} {
				if _, err := db.Pool.Exec(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
			st := &segments.Store{DB: db}
			rules := json.RawMessage(`{"operator":"and","conditions":[
				{"type":"segment","segmentId":"seg_00001","operator":"memberOf"},
				{"type":"property","field":"plan","operator":"equals","value":"pro"}]}`)
			b.ResetTimer()
			for b.Loop() {
				if _, err := st.Create(ctx, "t", segments.Input{Name: ptr("new"), Rules: rules}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
