package rules

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The shared table (shared_test.go) checks Eval against SQL. These cases
// cover what only the Go side has: Since, Go-typed property values, unknown
// and cyclic segments, hand-built nodes.

var evalNow = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

func TestEvalSince(t *testing.T) {
	t.Parallel()
	enrolled := evalNow.Add(-2 * Day)
	events := map[string]time.Time{"purchase": evalNow.Add(-3 * Day), "click": evalNow.Add(-Day)}
	env := Env{Now: evalNow, Since: enrolled, HasEvent: func(name string, after time.Time) bool {
		at, ok := events[name]
		return ok && !at.Before(after)
	}}
	tests := []struct {
		desc string
		rule string
		env  Env
		want bool
	}{
		{"event before enrolment does not count", and(event("purchase", "occurred", "")), env, false},
		{"event after enrolment counts", and(event("click", "occurred", "")), env, true},
		{"within narrower than since", and(event("click", "occurred", "1h")), env, false},
		{"within wider than since", and(event("purchase", "occurred", "1w")), env, false},
		{"no since: old event counts", and(event("purchase", "occurred", "")), Env{Now: evalNow, HasEvent: env.HasEvent}, true},
		{"notOccurred before enrolment", and(event("purchase", "notOccurred", "")), env, true},
		{"no HasEvent: no events", and(event("click", "occurred", "")), Env{Now: evalNow}, false},
		{"since does not reach into a referenced segment", and(seg("buyers", "memberOf")), env, true},
		{"notMemberOf a segment whose event predates enrolment", and(seg("buyers", "notMemberOf")), env, false},
		{"segment and own leaf in one tree", and(seg("buyers", "memberOf"), event("purchase", "occurred", "")), env, false},
	}
	segments := map[string]*Node{"buyers": mustParse(t, and(event("purchase", "occurred", "")))}
	for i := range tests {
		tests[i].env.Segment = func(id string) (*Node, bool) { n, ok := segments[id]; return n, ok }
	}
	for _, tc := range tests {
		if got := Eval(mustParse(t, tc.rule), Subject{}, tc.env); got != tc.want {
			t.Errorf("%s: got %v", tc.desc, got)
		}
	}
}

func TestEvalEventAfter(t *testing.T) {
	t.Parallel()
	var gotAfter time.Time
	env := Env{Now: evalNow, HasEvent: func(name string, after time.Time) bool { gotAfter = after; return true }}
	Eval(mustParse(t, and(event("x", "occurred", ""))), Subject{}, env)
	if !gotAfter.IsZero() {
		t.Errorf("without within or since, after = %v, want zero", gotAfter)
	}
	Eval(mustParse(t, and(event("x", "occurred", "90m"))), Subject{}, env)
	if want := evalNow.Add(-90 * time.Minute); !gotAfter.Equal(want) {
		t.Errorf("after = %v, want %v", gotAfter, want)
	}
}

func TestEvalGoValues(t *testing.T) {
	t.Parallel()
	props := map[string]any{
		"f64":     float64(0.1),
		"i":       int(3),
		"u64":     uint64(math.MaxUint64),
		"strs":    []string{"a", "b"},
		"ints":    []int{1, 2},
		"nilarr":  []any(nil),
		"nan":     math.NaN(),
		"nested":  map[string]any{"a": 1},
		"jnum":    json.Number("12345678901234567891"),
		"time":    evalNow, // no JSON counterpart: only exists matches
		"nilptr":  (*string)(nil),
		"strsnil": []string(nil),
	}
	tests := []struct {
		field, op string
		value     string
		want      bool
	}{
		{"f64", "equals", `0.1`, true},
		{"f64", "lessThan", `0.10000000000000001`, true}, // shortest form of the float is 0.1
		{"i", "equals", `3.0`, true},
		{"u64", "equals", `18446744073709551615`, true},
		{"strs", "includes", `"b"`, true},
		{"strs", "includesAll", `["a","b"]`, true},
		{"ints", "includesAny", `[2.0]`, true},
		{"nilarr", "exists", ``, false},
		{"strsnil", "notExists", ``, true},
		{"nilptr", "exists", ``, false},
		{"nan", "greaterThan", `0`, false},
		{"nan", "lessThan", `0`, false},
		{"nan", "exists", ``, true},
		{"nested", "equals", `1`, false},
		{"nested", "notEquals", `1`, true},
		{"jnum", "greaterThan", `12345678901234567890`, true},
		{"time", "exists", ``, true},
		{"time", "greaterThan", `"2000-01-01"`, false},
		{"time", "equals", `"2024-06-01T12:00:00Z"`, false},
	}
	for _, tc := range tests {
		var v any
		if tc.value != "" {
			v = tc.value
		}
		rule := mustParse(t, and(prop(tc.field, tc.op, v)))
		if got := Eval(rule, Subject{Properties: props}, Env{Now: evalNow}); got != tc.want {
			t.Errorf("%s %s %s: got %v", tc.field, tc.op, tc.value, got)
		}
	}
	// No properties at all.
	if !Eval(mustParse(t, and(prop("x", "notExists", nil))), Subject{}, Env{Now: evalNow}) {
		t.Errorf("nil Properties: x should not exist")
	}
}

func TestEvalSegments(t *testing.T) {
	t.Parallel()
	segments := map[string]*Node{
		"nl":   mustParse(t, and(prop("country", "equals", `"NL"`))),
		"self": mustParse(t, `{"operator":"or","conditions":[`+seg("self", "memberOf")+`,`+prop("vip", "equals", "true")+`]}`),
		"ping": mustParse(t, and(seg("pong", "memberOf"))),
		"pong": mustParse(t, and(seg("ping", "memberOf"))),
	}
	calls := 0
	env := Env{Now: evalNow, Segment: func(id string) (*Node, bool) { calls++; n, ok := segments[id]; return n, ok }}
	nl := Subject{Properties: map[string]any{"country": "NL"}}
	tests := []struct {
		desc string
		rule string
		s    Subject
		want bool
	}{
		{"member", and(seg("nl", "memberOf")), nl, true},
		{"unknown segment has no members", and(seg("gone", "memberOf")), nl, false},
		{"unknown segment: notMemberOf", and(seg("gone", "notMemberOf")), nl, true},
		{"cycle through self stops as non-member", and(seg("self", "memberOf")), Subject{Properties: map[string]any{"vip": true}}, true},
		{"cycle through self, no other way in", and(seg("self", "memberOf")), nl, false},
		{"two-segment cycle terminates", and(seg("ping", "memberOf")), nl, false},
	}
	for _, tc := range tests {
		if got := Eval(mustParse(t, tc.rule), tc.s, env); got != tc.want {
			t.Errorf("%s: got %v", tc.desc, got)
		}
	}
	if Eval(mustParse(t, and(seg("nl", "memberOf"))), nl, Env{Now: evalNow}) {
		t.Errorf("nil resolver: should be no member")
	}

	// A segment referenced many times is resolved once per evaluation.
	calls = 0
	many := `{"operator":"or","conditions":[` + strings.TrimSuffix(strings.Repeat(seg("nl", "notMemberOf")+",", 50), ",") + `]}`
	Eval(mustParse(t, many), nl, env)
	if calls != 1 {
		t.Errorf("resolver called %d times, want 1", calls)
	}
}

func TestEvalHandBuiltNodes(t *testing.T) {
	t.Parallel()
	// Nodes that Parse would reject must not panic and evaluate false.
	nodes := []*Node{
		nil,
		{Operator: "xor"},
		{Operator: OpAnd, Conditions: []*Node{nil}},
		{Type: "tag", Operator: OpExists},
		{Type: TypeProperty, Field: "a", Operator: "like", Value: "x"},
		{Type: TypeProperty, Field: "a", Operator: OpGreaterThan, Value: "not a time"},
		{Type: TypeProperty, Field: "a", Operator: OpContains, Value: 5},
		{Type: TypeProperty, Field: "a", Operator: OpIncludesAll, Value: "x"},
		{Type: TypeDerived, Field: "nope", Operator: OpExists},
		{Type: TypeDerived, Field: DerivedLastEventAt, Operator: OpGreaterThan, Value: 5},
		{Type: TypeSegment, SegmentID: "x", Operator: OpExists},
		{Type: TypeEvent, Name: "x", Operator: OpExists},
	}
	s := Subject{Properties: map[string]any{"a": "x"}, LastEventAt: &evalNow}
	env := Env{Now: evalNow, HasEvent: func(string, time.Time) bool { return true }, Segment: func(string) (*Node, bool) { return &Node{Operator: OpAnd}, true }}
	for i, n := range nodes {
		if Eval(n, s, env) {
			t.Errorf("node %d evaluated true", i)
		}
	}
}

func TestInactiveDays(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ref  time.Time
		want int64
	}{
		{evalNow, 0},
		{evalNow.Add(time.Hour), 0},
		{evalNow.Add(-Day + time.Nanosecond), 0},
		{evalNow.Add(-Day), 1},
		{evalNow.Add(-Day - time.Nanosecond), 1},
		{evalNow.Add(-400 * Day), 400},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), 739037},
		{time.Date(-10000, 1, 1, 0, 0, 0, 0, time.UTC), maxInactiveDays},
	}
	for _, tc := range tests {
		if got := inactiveDays(evalNow, tc.ref); got != tc.want {
			t.Errorf("inactiveDays(%v) = %d, want %d", tc.ref, got, tc.want)
		}
	}
}

func TestToSQLErrors(t *testing.T) {
	t.Parallel()
	segments := map[string]*Node{
		"a": mustParse(t, and(seg("b", "memberOf"))),
		"b": mustParse(t, and(seg("a", "notMemberOf"))),
	}
	resolve := func(id string) (*Node, bool) { n, ok := segments[id]; return n, ok }

	_, _, err := ToSQL(mustParse(t, and(seg("a", "memberOf"))), resolve, 2)
	var cyc *CycleError
	if !errors.As(err, &cyc) || strings.Join(cyc.Cycle, ",") != "a,b,a" {
		t.Errorf("cycle: got %v", err)
	}
	_, _, err = ToSQL(mustParse(t, and(seg("zzz", "memberOf"))), resolve, 2)
	if !errors.Is(err, ErrUnknownSegment) {
		t.Errorf("unknown: got %v", err)
	}
	_, _, err = ToSQL(mustParse(t, and(seg("zzz", "memberOf"))), nil, 2)
	if !errors.Is(err, ErrUnknownSegment) {
		t.Errorf("nil resolver: got %v", err)
	}
	if _, _, err = ToSQL(mustParse(t, and()), nil, 0); err == nil {
		t.Errorf("argStart 0 accepted")
	}
	for i, n := range []*Node{
		nil,
		{Operator: "xor"},
		{Type: "tag"},
		{Type: TypeProperty, Field: "a", Operator: "like", Value: "x"},
		{Type: TypeProperty, Field: "", Operator: OpExists},
		{Type: TypeProperty, Field: "a", Operator: OpGreaterThan, Value: "soon"},
		{Type: TypeProperty, Field: "a", Operator: OpEquals, Value: []any{1}},
		{Type: TypeDerived, Field: DerivedTotalSends, Operator: OpContains, Value: "x"},
		{Type: TypeEvent, Name: "e", Operator: "happened"},
	} {
		if _, _, err := ToSQL(n, nil, 1); err == nil {
			t.Errorf("node %d compiled", i)
		}
	}

	// Exponential growth through repeated references is refused.
	chain := map[string]*Node{}
	for i := 0; i < 20; i++ {
		next := "s" + string(rune('a'+i+1))
		chain["s"+string(rune('a'+i))] = mustParse(t, `{"operator":"or","conditions":[`+seg(next, "memberOf")+`,`+seg(next, "notMemberOf")+`]}`)
	}
	chain["s"+string(rune('a'+20))] = mustParse(t, and(prop("x", "exists", nil)))
	_, _, err = ToSQL(mustParse(t, and(seg("sa", "memberOf"))), func(id string) (*Node, bool) { n, ok := chain[id]; return n, ok }, 1)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("exponential expansion: got %v", err)
	}
}

func TestToSQLPlaceholders(t *testing.T) {
	t.Parallel()
	rule := mustParse(t, and(
		prop("age", "greaterThan", 18),
		prop("age", "lessThan", 65),
		prop("name", "startsWith", `"age"`),
		prop("plan", "equals", `"pro"`),
		derived("totalSends", "greaterThan", 2.5),
		event("e", "occurred", "1d"),
	))
	pred, args, err := ToSQL(rule, nil, 5)
	if err != nil {
		t.Fatal(err)
	}
	// "age" as a field name and as a text value share one placeholder; each
	// value appears once.
	want := []any{"age", "18", "65", "name", `{"plan":"pro"}`, int64(2), "e", "86400 seconds"}
	if len(args) != len(want) {
		t.Fatalf("args = %#v\n%s", args, pred)
	}
	for i := range want {
		if args[i] != want[i] {
			t.Errorf("arg %d = %#v, want %#v", i, args[i], want[i])
		}
	}
	for i := 5; i < 5+len(args); i++ {
		if !strings.Contains(pred, "$"+strconv.Itoa(i)+"::") {
			t.Errorf("placeholder $%d unused in %s", i, pred)
		}
	}
	if strings.Contains(pred, "$4") || strings.Contains(pred, "$13") {
		t.Errorf("placeholder out of range in %s", pred)
	}
}

func TestToSQLOrdersCheapFirst(t *testing.T) {
	t.Parallel()
	rule := mustParse(t, `{"operator":"or","conditions":[`+
		event("e", "occurred", "")+`,`+
		prop("seen", "greaterThan", `"2024-01-01"`)+`,`+
		prop("plan", "equals", `"pro"`)+`,`+
		derived("totalSends", "greaterThan", 1)+`]}`)
	pred, _, err := ToSQL(rule, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	positions := []int{
		strings.Index(pred, "c.total_sends"),
		strings.Index(pred, "c.properties @>"),
		strings.Index(pred, "translate("),
		strings.Index(pred, "EXISTS"),
	}
	for i := 1; i < len(positions); i++ {
		if positions[i-1] < 0 || positions[i-1] > positions[i] {
			t.Fatalf("conditions not cheapest first: %v\n%s", positions, pred)
		}
	}
}

func TestInactiveDaysUsesLastEventElseCreated(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	created, last := now.Add(-10*24*time.Hour), now.Add(-49*time.Hour)
	soon := now.Add(time.Hour)
	for _, tc := range []struct {
		last *time.Time
		want int64
	}{{nil, 10}, {&last, 2}, {&soon, 0}} {
		if got := InactiveDays(now, created, tc.last); got != tc.want {
			t.Errorf("last %v: %d, want %d", tc.last, got, tc.want)
		}
	}
}
