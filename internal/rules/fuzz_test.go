package rules

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseRule feeds arbitrary JSON to Parse, with arbitrary contact
// properties. A refusal is a *ValidationError of bounded size whose paths
// start at the root; an accepted tree keeps the depth, leaf and node
// limits, marshals to JSON that parses back to an equal tree, evaluates
// without panicking on odd contacts (missing fields, arrays, objects,
// numbers where strings are expected) consistently with not and and
// around it, and compiles to SQL whose placeholders are exactly the
// arguments it returns.
//
//	go test -run '^$' -fuzz FuzzParseRule -fuzztime 5m ./internal/rules/
func FuzzParseRule(f *testing.F) {
	props := `{"n":1.5,"s":"x","a":["x",1,true],"o":{"k":1},"b":true,"z":null,"t":"2024-05-01T10:00:00Z","d":"2024-05-01"}`
	for _, raw := range []string{
		and(prop("s", "equals", `"x"`), prop("n", "greaterThan", 1), prop("a", "includes", `"x"`)),
		`{"operator":"or","conditions":[{"type":"property","field":"t","operator":"lessThan","value":"2024-05-01T10:00:00.123+02:00"},{"operator":"not","conditions":[]}]}`,
		`{"operator":"not","conditions":[{"type":"property","field":"a","operator":"includesAll","value":["x",1]},{"type":"property","field":"o","operator":"exists","value":null}]}`,
		and(derived("lastEventAt", "greaterOrEqual", `"2024-05-01"`), derived("inactiveDays", "greaterThan", 2.5), derived("totalSends", "equals", 0)),
		and(seg("s1", "memberOf"), seg("s2", "notMemberOf"), event("e", "occurred", "30d"), event("f", "notOccurred", "")),
		and(prop("s", "startsWith", `""`), prop("s", "notContains", `"%_"`), prop("n", "equals", "1e-20"), prop("z", "notExists", nil)),
		`{"operator":"and","conditions":[{"operator":"or","conditions":[{"operator":"and","conditions":[{"type":"property","field":"x","operator":"exists"}]}]}]}`,
		`{"operator":"and","conditions":[{"type":"property","field":"n","operator":"equals","value":1e999999999}]}`,
		`{"operator":"and","conditions":[{"type":"property","field":"\u0000","operator":"equals","value":"\ud800"}]}`,
		`{"operator":"xor","conditions":{},"extra":1}`,
		`[` + strings.Repeat(`{"operator":"and","conditions":[`, 20) + strings.Repeat(`]}`, 20) + `]`,
		`{"operator":"and","conditions":[` + strings.Repeat(`{"type":"event","name":"e","operator":"occurred","within":"99999999999999999999w"},`, 3) + `{}]}`,
	} {
		f.Add([]byte(raw), []byte(props))
	}
	f.Add([]byte(and(prop("a", "includesAny", `["x"]`))), []byte(`{"a":"x"}`))
	f.Add([]byte(and(prop("s", "contains", `"1"`))), []byte(`{"s":1}`))
	f.Add([]byte(and(prop("n", "lessOrEqual", `"2024-01-01"`))), []byte(`[1]`))
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	last := now.Add(-49 * time.Hour)
	// Any segment resolves, to a tree with a property and an event leaf.
	segment := mustParse(f, and(prop("s", "equals", `"x"`), event("e", "occurred", "1d")))
	resolve := func(string) (*Node, bool) { return segment, true }
	f.Fuzz(func(t *testing.T, raw, rawProps []byte) {
		n, err := Parse(raw, Options{})
		if err != nil {
			checkRuleRefusal(t, err)
			return
		}
		checkLimits(t, n)

		b, err := json.Marshal(n)
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		again, err := Parse(b, Options{})
		if err != nil {
			t.Fatalf("marshalled tree does not parse: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(n, again) {
			t.Fatalf("round trip changed the tree\n%s\n%s", raw, b)
		}

		fuzzed, err := DecodeProperties(rawProps)
		if err != nil {
			fuzzed = nil
		}
		subjects := []Subject{
			{},
			{Properties: fuzzed, TotalSends: 3, CreatedAt: now.Add(-10 * 24 * time.Hour)},
			{Properties: map[string]any{"s": []any{"x"}, "n": "1.5", "a": map[string]any{"x": true}, "t": json.Number("20240501")},
				TotalOpens: -1, LastEventAt: &last},
		}
		envs := []Env{
			{Now: now},
			{Now: now, Since: now.Add(-time.Hour), Segment: resolve,
				HasEvent: func(name string, after time.Time) bool { return name == "e" && !after.After(now.Add(-2*time.Hour)) }},
		}
		negated := &Node{Operator: OpNot, Conditions: []*Node{n}}
		twice := &Node{Operator: OpAnd, Conditions: []*Node{n, n}}
		for i, s := range subjects {
			for j, env := range envs {
				got := Eval(n, s, env)
				if Eval(negated, s, env) == got || Eval(twice, s, env) != got {
					t.Fatalf("subject %d env %d: not/and disagree with %v for %s", i, j, got, b)
				}
			}
		}

		pred, args, err := ToSQL(n, resolve, 2)
		if err != nil {
			if strings.Contains(err.Error(), "more than") {
				return // an expansion bound of segment inlining
			}
			t.Fatalf("ToSQL of an accepted tree: %v\n%s", err, b)
		}
		checkPlaceholders(t, pred, len(args), 2)
	})
}

// checkRuleRefusal: a refusal is a *ValidationError listing 1 to maxErrors
// problems, each at a path under the root with a message, all of it small.
func checkRuleRefusal(t *testing.T, err error) {
	t.Helper()
	verr, ok := err.(*ValidationError)
	if !ok {
		t.Fatalf("refused with %T %v, want *ValidationError", err, err)
	}
	if len(verr.Fields) == 0 || len(verr.Fields) > maxErrors {
		t.Fatalf("%d problems", len(verr.Fields))
	}
	size := 0
	for _, f := range verr.Fields {
		if !strings.HasPrefix(f.Path, "rules") || len(f.Path) > 512 || f.Message == "" {
			t.Fatalf("problem %.100q (%d bytes): %.100q", f.Path, len(f.Path), f.Message)
		}
		size += len(f.Path) + len(f.Message)
	}
	if size > 32<<10 {
		t.Fatalf("error of %d bytes", size)
	}
}

// checkLimits: an accepted tree is within DefaultMaxDepth, the leaf and
// the node limits, and every leaf has a type and an operator.
func checkLimits(t *testing.T, n *Node) {
	t.Helper()
	leaves, nodes := 0, 0
	var walk func(n *Node, depth int)
	walk = func(n *Node, depth int) {
		nodes++
		if n.IsLeaf() {
			leaves++
			if n.Operator == "" {
				t.Fatalf("leaf without operator: %+v", n)
			}
			return
		}
		if depth > DefaultMaxDepth {
			t.Fatalf("accepted a group %d levels deep", depth)
		}
		for _, c := range n.Conditions {
			if c == nil {
				t.Fatal("accepted a nil condition")
			}
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	if leaves > DefaultMaxConditions || nodes > MaxNodes {
		t.Fatalf("accepted %d leaves, %d nodes", leaves, nodes)
	}
}

var placeholder = regexp.MustCompile(`\$([0-9]+)::`)

// checkPlaceholders: the predicate uses $start..$start+nargs-1, each of
// them, and no other.
func checkPlaceholders(t *testing.T, pred string, nargs, start int) {
	t.Helper()
	used := map[int]bool{}
	for _, m := range placeholder.FindAllStringSubmatch(pred, -1) {
		i, _ := strconv.Atoi(m[1])
		if i < start || i >= start+nargs {
			t.Fatalf("placeholder $%d outside $%d..$%d in %s", i, start, start+nargs-1, pred)
		}
		used[i] = true
	}
	if len(used) != nargs {
		t.Fatalf("%d of %d arguments used in %s", len(used), nargs, pred)
	}
}
