package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestRandomGoMatchesSQL evaluates randomly generated rule trees over randomly
// generated contacts, in Go and in PostgreSQL, and requires the same answer
// for every pair. Values are drawn from pools full of near-misses (1 vs 1.0
// vs "1", timestamps that are not quite timestamps, day boundaries). Set
// RULES_RANDOM_SEED to replay a failure.
func TestRandomGoMatchesSQL(t *testing.T) {
	pool := needDB(t)
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RULES_RANDOM_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("RULES_RANDOM_SEED=%d", seed)
	g := &ruleGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}

	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var now time.Time
	if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
		t.Fatal(err)
	}

	const tenant, contacts, rulesPerRun = "ten_random", 250, 400
	for i := 0; i < contacts; i++ {
		g.insertContact(t, tx, tenant, fmt.Sprintf("cnt_%03d", i), now)
	}
	subjects := map[string]Subject{}
	envs := map[string]Env{}
	for i := 0; i < contacts; i++ {
		id := fmt.Sprintf("cnt_%03d", i)
		subjects[id], envs[id] = loadSubject(t, tx, tenant, id, now)
	}

	segments := map[string]*Node{}
	resolve := func(id string) (*Node, bool) { n, ok := segments[id]; return n, ok }
	segments["s1"] = g.parse(t, g.group(0))
	segments["s2"] = g.parse(t, g.group(0, "s1"))

	mismatches, trues, total := 0, 0, 0
	for i := 0; i < rulesPerRun && mismatches < 5; i++ {
		raw := g.group(0, "s1", "s2")
		rule := g.parse(t, raw)
		pred, args, err := ToSQL(rule, resolve, 2)
		if err != nil {
			t.Fatalf("ToSQL(%s): %v", raw, err)
		}
		rows, err := tx.Query(ctx, "SELECT c.id, ("+pred+") FROM contacts c WHERE c.tenant_id = $1", append([]any{tenant}, args...)...)
		if err != nil {
			t.Fatalf("query: %v\nrule %s\nSQL %s\nargs %v", err, raw, pred, args)
		}
		type row struct {
			id  string
			got *bool
		}
		results, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			return x, r.Scan(&x.id, &x.got)
		})
		if err != nil {
			t.Fatalf("query: %v\nrule %s\nSQL %s\nargs %v", err, raw, pred, args)
		}
		for _, res := range results {
			env := envs[res.id]
			env.Segment = resolve
			goGot := Eval(rule, subjects[res.id], env)
			total++
			if goGot {
				trues++
			}
			if res.got == nil || *res.got != goGot {
				mismatches++
				sqlGot := "NULL"
				if res.got != nil {
					sqlGot = strconv.FormatBool(*res.got)
				}
				s := subjects[res.id]
				t.Errorf("contact %s: Go %v, SQL %s\nrule %s\nsegments s1 %s s2 %s\nproperties %v sends %d opens %d clicks %d lastEventAt %v createdAt %v\nSQL %s\nargs %v",
					res.id, goGot, sqlGot, raw, mustJSON(segments["s1"]), mustJSON(segments["s2"]),
					s.Properties, s.TotalSends, s.TotalOpens, s.TotalClicks, s.LastEventAt, s.CreatedAt, pred, args)
				break
			}
		}
	}
	// A generator that made nearly every answer the same would prove little.
	t.Logf("%d of %d answers true", trues, total)
	if trues < total/10 || trues > total*9/10 {
		t.Errorf("unbalanced generator: %d of %d answers true", trues, total)
	}
}

func mustJSON(n *Node) string {
	b, err := n.MarshalJSON()
	if err != nil {
		return err.Error()
	}
	return string(b)
}

type ruleGen struct{ r *rand.Rand }

func (g *ruleGen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

var (
	genKeys    = []string{"a", "b", "c", "tags", "d"}
	genStrings = []string{`""`, `"a"`, `"abc"`, `"ABC"`, `"b"`, `"bc"`, `"5"`, `"1"`, `"true"`, `"%"`, `"a_c"`, `"ümlaut"`, `"ü"`}
	genTimes   = []string{`"2024-05-01"`, `"2024-05-01T10:00:00Z"`, `"2024-05-01T12:00:00+02:00"`, `"2024-05-01T10:00:00.000001Z"`,
		`"2024-04-30T23:59:59.999999-00:00"`, `"2024-02-29T23:59Z"`, `"0099-12-31"`, `"9999-12-31T23:59:59-14:00"`, `"2000-02-29"`}
	genNotTimes = []string{`"2023-02-29"`, `"2024-05-01T10:00:00.1234567Z"`, `"yesterday"`, `"2024-13-01"`, `"2024-05-01T10:00:00"`,
		`"1900-02-29"`, `"2024-04-31"`, `"2024-05-01 10:00:00Z"`, `"epoch"`, `"2024-05-01T10:00:00+15:00"`}
	genNumbers = []string{`0`, `1`, `1.0`, `-1`, `0.1`, `0.10`, `2.5`, `1e3`, `1000`, `12345678901234567890`, `12345678901234567891`, `1e-7`, `-0`, `5`, `-2.5`}
	genBools   = []string{`true`, `false`}
	genOps     = []string{"equals", "notEquals", "greaterThan", "lessThan", "greaterOrEqual", "lessOrEqual", "contains", "notContains",
		"startsWith", "endsWith", "includes", "notIncludes", "includesAll", "includesAny", "exists", "notExists"}
	genEvents  = []string{"e1", "e2", "E1"}
	genWithin  = []string{"", "30s", "1h", "1d", "30d"}
	genEventAt = []time.Duration{30 * time.Second, 59 * time.Minute, time.Hour, 23 * time.Hour, Day, Day + time.Microsecond, 2 * Day, 31 * Day, -2 * time.Minute}
)

func (g *ruleGen) scalar() string {
	switch g.r.IntN(4) {
	case 0:
		return g.pick(genStrings)
	case 1:
		if g.r.IntN(2) == 0 {
			return g.pick(genTimes)
		}
		return g.pick(genNotTimes)
	case 2:
		return g.pick(genNumbers)
	}
	return g.pick(genBools)
}

func (g *ruleGen) array(min int) string {
	n := min + g.r.IntN(4)
	xs := make([]string, n)
	for i := range xs {
		xs[i] = g.scalar()
	}
	return "[" + strings.Join(xs, ",") + "]"
}

// propertyValue is a property as stored: any scalar, an array, null, or now
// and then an object (which the API forbids but the rules must survive).
func (g *ruleGen) propertyValue() string {
	switch g.r.IntN(10) {
	case 0, 1:
		return g.array(0)
	case 2:
		return "null"
	case 3:
		if g.r.IntN(4) == 0 {
			return `{"x":1}`
		}
	}
	return g.scalar()
}

func (g *ruleGen) leaf(segments []string) string {
	switch n := g.r.IntN(20); {
	case n < 12:
		op := g.pick(genOps)
		var value string
		switch op {
		case "equals", "notEquals", "includes", "notIncludes":
			value = g.scalar()
		case "greaterThan", "lessThan", "greaterOrEqual", "lessOrEqual":
			if g.r.IntN(2) == 0 {
				value = g.pick(genNumbers)
			} else {
				value = g.pick(genTimes)
			}
		case "contains", "notContains", "startsWith", "endsWith":
			value = g.pick(genStrings)
		case "includesAll", "includesAny":
			value = g.array(1)
		}
		if value == "" {
			return prop(g.pick(genKeys), op, nil)
		}
		return prop(g.pick(genKeys), op, value)
	case n < 16:
		field := g.pick([]string{"totalSends", "totalOpens", "totalClicks", "lastEventAt", "inactiveDays"})
		op := g.pick(derivedOps)
		if op == "exists" || op == "notExists" {
			return derived(field, op, nil)
		}
		if field == "lastEventAt" {
			return derived(field, op, g.pick(genTimes))
		}
		return derived(field, op, g.pick([]string{"0", "1", "2", "2.5", "3", "-1", "10", "29.5", "30", "1e30"}))
	case n < 18 && len(segments) > 0:
		return seg(g.pick(segments), g.pick([]string{"memberOf", "notMemberOf"}))
	}
	return event(g.pick(genEvents), g.pick([]string{"occurred", "notOccurred"}), g.pick(genWithin))
}

// group returns a random rule group whose leaves may refer to segments.
func (g *ruleGen) group(depth int, segments ...string) string {
	n := g.r.IntN(4)
	if depth == 0 {
		n++
	}
	conds := make([]string, n)
	for i := range conds {
		if depth < 2 && g.r.IntN(4) == 0 {
			conds[i] = g.group(depth+1, segments...)
		} else {
			conds[i] = g.leaf(segments)
		}
	}
	return `{"operator":"` + g.pick([]string{"and", "or", "not"}) + `","conditions":[` + strings.Join(conds, ",") + `]}`
}

func (g *ruleGen) parse(t *testing.T, raw string) *Node {
	t.Helper()
	n, err := Parse(json.RawMessage(raw), Options{})
	if err != nil {
		t.Fatalf("generated an invalid rule: %v\n%s", err, raw)
	}
	return n
}

func (g *ruleGen) insertContact(t *testing.T, tx pgx.Tx, tenant, id string, now time.Time) {
	t.Helper()
	var props []string
	for _, k := range genKeys {
		if g.r.IntN(5) > 0 {
			props = append(props, strconv.Quote(k)+":"+g.propertyValue())
		}
	}
	// Whole days, and one microsecond either side, to probe inactiveDays.
	created := now.Add(-time.Duration(g.r.IntN(40))*Day + time.Duration(g.r.IntN(3)-1)*time.Microsecond)
	var lastEventAt *time.Time
	switch g.r.IntN(4) {
	case 0:
	case 1:
		ts, _ := parseTimestamp(strings.Trim(g.pick(genTimes), `"`))
		lastEventAt = &ts
	default:
		ts := now.Add(-time.Duration(g.r.IntN(35))*Day + time.Duration(g.r.IntN(3)-1)*time.Microsecond)
		lastEventAt = &ts
	}
	ctx := context.Background()
	ensureTenant(t, tx, tenant)
	_, err := tx.Exec(ctx, `INSERT INTO contacts (tenant_id, id, email, properties, total_sends, total_opens, total_clicks, last_event_at, created_at)
		VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9)`,
		tenant, id, id+"@example.com", "{"+strings.Join(props, ",")+"}",
		g.r.IntN(5), g.r.IntN(4), g.r.IntN(3), lastEventAt, created)
	if err != nil {
		t.Fatal(err)
	}
	for i := range g.r.IntN(4) {
		_, err := tx.Exec(ctx, `INSERT INTO events (tenant_id, id, contact_id, name, occurred_at) VALUES ($1, $2, $3, $4, $5)`,
			tenant, fmt.Sprintf("evt_%s_%d", id, i), id, g.pick(genEvents), now.Add(-genEventAt[g.r.IntN(len(genEventAt))]))
		if err != nil {
			t.Fatal(err)
		}
	}
}
