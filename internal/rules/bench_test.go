package rules

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkSegmentSQL times segment compute's query, count(*) of the contacts
// of one tenant that match a compiled rule, next to the bare count of the
// tenant's contacts, at 100,000 and 1,000,000 contacts. Run it with
//
//	go test -run '^$' -bench BenchmarkSegmentSQL -benchtime 5x ./rules/
//
// Metrics: ms/query for the rule, bare-ms for the bare count (median of 5),
// x-bare their ratio, matched the number of contacts the rule selects.
// Setting up a million contacts takes a while; it happens once per run.
func BenchmarkSegmentSQL(b *testing.B) {
	pool := needDB(b)
	segments := map[string]*Node{
		// One nested segment, itself two leaves.
		"seg_eu": mustParse(b, `{"operator":"or","conditions":[`+
			prop("country", "includesAny", `["NL","DE","BE"]`)+`,`+
			prop("tags", "includes", `"t3"`)+`]}`),
	}
	resolve := func(id string) (*Node, bool) { n, ok := segments[id]; return n, ok }
	six := []string{
		prop("plan", "equals", `"pro"`),
		prop("age", "greaterOrEqual", 25),
		prop("signupDate", "greaterThan", `"2021-01-01"`),
		derived("totalOpens", "greaterThan", 2),
		derived("inactiveDays", "lessThan", 30),
		seg("seg_eu", "memberOf"),
	}
	// The same leaf shapes with values no contact has: an or of them
	// evaluates every leaf (and both of seg_none's) for every row.
	segments["seg_none"] = mustParse(b, orGroup(prop("country", "includesAny", `["XX","YY"]`), prop("tags", "includes", `"t99"`)))
	none := []string{
		prop("plan", "equals", `"enterprise"`),
		prop("age", "greaterOrEqual", 1000),
		prop("seenAt", "greaterThan", `"2030-01-01T00:00:00Z"`), // the costlier timestamp path
		derived("totalOpens", "greaterThan", 100),
		derived("inactiveDays", "greaterThan", 10000),
		seg("seg_none", "memberOf"),
	}
	rules := []struct {
		name string
		rule string
	}{
		// The usual shape: a conjunction, which PostgreSQL stops evaluating
		// at the first false leaf.
		{"and", and(six...)},
		// The worst case: nothing short-circuits.
		{"or-nothing-matches", orGroup(none...)},
	}
	for _, size := range []int{100_000, 1_000_000} {
		tenant := fmt.Sprintf("ten_bench_%d", size)
		seeded := false
		for _, r := range rules {
			b.Run(fmt.Sprintf("contacts=%d/rule=%s", size, r.name), func(b *testing.B) {
				ctx := context.Background()
				if !seeded {
					seedBenchContacts(b, pool, tenant, size)
					seeded = true
				}
				pred, args, err := ToSQL(mustParse(b, r.rule), resolve, 2)
				if err != nil {
					b.Fatal(err)
				}
				query := "SELECT count(*) FROM contacts c WHERE c.tenant_id = $1 AND (" + pred + ")"
				args = append([]any{tenant}, args...)
				count := func(q string, args ...any) (int64, time.Duration) {
					start := time.Now()
					var n int64
					if err := pool.QueryRow(ctx, q, args...).Scan(&n); err != nil {
						b.Fatalf("%v\n%s", err, q)
					}
					return n, time.Since(start)
				}
				var bare []time.Duration
				for range 5 {
					_, d := count("SELECT count(*) FROM contacts c WHERE c.tenant_id = $1", tenant)
					bare = append(bare, d)
				}
				slices.Sort(bare)
				matched, _ := count(query, args...) // warm up, and what it selects
				if os.Getenv("RULES_BENCH_EXPLAIN") != "" {
					explain(b, pool, query, args)
				}

				for b.Loop() {
					count(query, args...)
				}
				perQuery := b.Elapsed() / time.Duration(b.N)
				b.ReportMetric(float64(perQuery.Microseconds())/1000, "ms/query")
				b.ReportMetric(float64(bare[2].Microseconds())/1000, "bare-ms")
				b.ReportMetric(float64(perQuery)/float64(bare[2]), "x-bare")
				b.ReportMetric(float64(matched), "matched")
			})
		}
	}
}

// explain prints the plan and timing of query, for whoever tunes indexes.
func explain(b *testing.B, pool *pgxpool.Pool, query string, args []any) {
	rows, err := pool.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS) "+query, args...)
	if err != nil {
		b.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	// Not b.Logf: benchmark logs are cut after a few lines.
	fmt.Fprintf(os.Stderr, "%s\n%s\n", query, strings.Join(lines, "\n"))
}

func orGroup(conds ...string) string {
	return `{"operator":"or","conditions":[` + strings.Join(conds, ",") + `]}`
}

// seedBenchContacts inserts size contacts of one tenant with varied
// properties, counters and activity, and refreshes the planner's statistics.
func seedBenchContacts(b *testing.B, pool *pgxpool.Pool, tenant string, size int) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	ensureTenant(b, pool, tenant)
	_, err := pool.Exec(ctx, `
		INSERT INTO contacts (tenant_id, id, email, properties, total_sends, total_opens, total_clicks, last_event_at, created_at)
		SELECT $1, 'cnt_' || g, 'c' || g || '@example.com',
			jsonb_build_object(
				'plan', (ARRAY['free', 'pro', 'team'])[1 + g % 3],
				'country', (ARRAY['NL', 'DE', 'US', 'FR', 'BE', 'GB'])[1 + g % 6],
				'age', 18 + g % 60,
				'signupDate', to_char(date '2020-01-01' + (g % 1500), 'YYYY-MM-DD'),
				'tags', jsonb_build_array('t' || (g % 10), 't' || (g % 7)),
				'firstName', 'Name' || g,
				'seenAt', to_char(timestamptz '2024-01-01' + g * interval '31 seconds', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
			|| CASE WHEN g % 11 = 0 THEN '{"vip": true}'::jsonb ELSE '{}'::jsonb END,
			g % 13, g % 7, g % 5,
			CASE WHEN g % 4 = 0 THEN NULL ELSE now() - (g % 90) * interval '1 day' END,
			now() - (g % 400) * interval '1 day'
		FROM generate_series(1, $2::int) g`, tenant, size)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE contacts"); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d contacts in %v", size, time.Since(start).Round(time.Millisecond))
}
