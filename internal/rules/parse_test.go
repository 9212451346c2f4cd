package rules

import (
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		raw  string
		want *Node
	}{
		{
			desc: "segment example",
			raw: `{"operator":"and","conditions":[
				{"type":"property","field":"country","operator":"equals","value":"NL"},
				{"operator":"or","conditions":[
					{"type":"derived","field":"totalOpens","operator":"greaterThan","value":0},
					{"type":"segment","segmentId":"seg_1","operator":"notMemberOf"},
					{"type":"event","name":"purchase.completed","operator":"occurred","within":"30d"}
				]}]}`,
			want: &Node{Operator: "and", Conditions: []*Node{
				{Type: TypeProperty, Field: "country", Operator: "equals", Value: "NL"},
				{Operator: "or", Conditions: []*Node{
					{Type: TypeDerived, Field: "totalOpens", Operator: "greaterThan", Value: json.Number("0")},
					{Type: TypeSegment, SegmentID: "seg_1", Operator: "notMemberOf"},
					{Type: TypeEvent, Name: "purchase.completed", Operator: "occurred", Within: 30 * Day},
				}},
			}},
		},
		{
			desc: "numbers keep their exact text",
			raw:  `{"operator":"or","conditions":[{"type":"property","field":"n","operator":"equals","value":12345678901234567891}]}`,
			want: &Node{Operator: "or", Conditions: []*Node{
				{Type: TypeProperty, Field: "n", Operator: "equals", Value: json.Number("12345678901234567891")},
			}},
		},
		{
			desc: "exists with null value, empty groups, arrays",
			raw: `{"operator":"not","conditions":[
				{"type":"property","field":"a","operator":"exists","value":null},
				{"operator":"and","conditions":[]},
				{"type":"property","field":"t","operator":"includesAny","value":["a",1,true]},
				{"type":"property","field":"d","operator":"lessThan","value":"2024-05-01T10:00:00.123+02:00"},
				{"type":"derived","field":"lastEventAt","operator":"greaterOrEqual","value":"2024-05-01"}]}`,
			want: &Node{Operator: "not", Conditions: []*Node{
				{Type: TypeProperty, Field: "a", Operator: "exists"},
				{Operator: "and", Conditions: []*Node{}},
				{Type: TypeProperty, Field: "t", Operator: "includesAny", Value: []any{"a", json.Number("1"), true}},
				{Type: TypeProperty, Field: "d", Operator: "lessThan", Value: "2024-05-01T10:00:00.123+02:00"},
				{Type: TypeDerived, Field: "lastEventAt", Operator: "greaterOrEqual", Value: "2024-05-01"},
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(json.RawMessage(tc.raw), Options{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				a, _ := json.Marshal(got)
				b, _ := json.Marshal(tc.want)
				t.Errorf("got  %s\nwant %s", a, b)
			}
		})
	}
}

func TestParseInputShapes(t *testing.T) {
	t.Parallel()
	const rule = `{"operator":"and","conditions":[{"type":"property","field":"n","operator":"greaterThan","value":1.5}]}`
	var decoded any
	if err := json.Unmarshal([]byte(rule), &decoded); err != nil {
		t.Fatal(err)
	}
	inputs := map[string]any{
		"json.RawMessage":  json.RawMessage(rule),
		"[]byte":           []byte(rule),
		"decoded map":      decoded,
		"map[any]any":      map[any]any{"operator": "and", "conditions": []any{map[any]any{"type": "property", "field": "n", "operator": "greaterThan", "value": 1.5}}},
		"yaml flow syntax": mustYAML(t, "{operator: and, conditions: [{type: property, field: n, operator: greaterThan, value: 1.5}]}"),
	}
	want := &Node{Operator: "and", Conditions: []*Node{{Type: TypeProperty, Field: "n", Operator: "greaterThan", Value: json.Number("1.5")}}}
	for name, in := range inputs {
		got, err := Parse(in, Options{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v", name, got.Conditions[0])
		}
	}
}

func mustYAML(t *testing.T, src string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestParseYAMLSequence parses rule nodes the way the sequence parser will:
// from a YAML document, with its own root names.
func TestParseYAMLSequence(t *testing.T) {
	t.Parallel()
	doc := mustYAML(t, `
gates:
  operator: and
  conditions:
    - {type: property, field: country, operator: equals, value: NL}
    - {type: property, field: signup, operator: lessThan, value: 2024-05-01}
    - {type: property, field: seen, operator: greaterThan, value: 2024-05-01T10:00:00+02:00}
exit:
  operator: or
  conditions:
    - {type: event, name: purchase.completed, operator: occurred}
    - {type: event, name: page_view, operator: notOccurred, within: 2w}
    - {type: derived, field: totalClicks, operator: greaterOrEqual, value: 18446744073709551615}
`).(map[string]any)
	gates, err := Parse(doc["gates"], Options{Root: "gates"})
	if err != nil {
		t.Fatal(err)
	}
	// yaml.v3 decodes unquoted timestamps into time.Time; they come back as
	// timestamp strings.
	if got := gates.Conditions[1].Value; got != "2024-05-01T00:00:00Z" {
		t.Errorf("date value = %#v", got)
	}
	if got := gates.Conditions[2].Value; got != "2024-05-01T10:00:00+02:00" {
		t.Errorf("timestamp value = %#v", got)
	}
	exit, err := Parse(doc["exit"], Options{Root: "exit"})
	if err != nil {
		t.Fatal(err)
	}
	if exit.Conditions[1].Within != 2*Week {
		t.Errorf("within = %v", exit.Conditions[1].Within)
	}
	if exit.Conditions[2].Value != json.Number("18446744073709551615") {
		t.Errorf("uint64 value = %#v", exit.Conditions[2].Value)
	}

	_, err = Parse(mustYAML(t, "{operator: and, conditions: [{type: event, name: x, operator: occurred, within: 1.5d}]}"), Options{Root: "exit"})
	wantFieldErrors(t, err, "exit.conditions[0].within")

	// A YAML scalar where a rule node belongs is a wrongly typed node.
	_, err = Parse(mustYAML(t, "gates: country is NL").(map[string]any)["gates"], Options{Root: "gates"})
	if f := wantFieldErrors(t, err, "gates"); len(f) == 1 && !strings.Contains(f[0].Message, "must be an object") {
		t.Errorf("message %q", f[0].Message)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc  string
		raw   string
		opts  Options
		paths []string // every problem's path, in order
		msg   string   // a substring of the first message
	}{
		{"not JSON", `{"operator":`, Options{}, []string{"rules"}, "invalid JSON"},
		{"trailing data", `{"operator":"and","conditions":[]} {}`, Options{}, []string{"rules"}, "after"},
		{"null", `null`, Options{}, []string{"rules"}, "required"},
		{"array root", `[]`, Options{}, []string{"rules"}, "must be an object"},
		{"root name", `[]`, Options{Root: "gates"}, []string{"gates"}, "must be an object"},
		{"JSON string", `"{}"`, Options{}, []string{"rules"}, "must be an object"},
		{"bad group operator", `{"operator":"xor","conditions":[]}`, Options{}, []string{"rules.operator"}, `unknown value "xor"`},
		{"missing group operator", `{"conditions":[]}`, Options{}, []string{"rules.operator"}, "required"},
		{"missing conditions", `{"operator":"and"}`, Options{}, []string{"rules.conditions"}, "required"},
		{"conditions not an array", `{"operator":"and","conditions":{}}`, Options{}, []string{"rules.conditions"}, "must be an array"},
		{"condition not an object", `{"operator":"and","conditions":[1]}`, Options{}, []string{"rules.conditions[0]"}, "must be an object"},
		{"unknown key on group", `{"operator":"and","conditions":[],"negate":true}`, Options{}, []string{"rules.negate"}, "unknown key"},
		{"unknown type", `{"operator":"and","conditions":[{"type":"tag"}]}`, Options{}, []string{"rules.conditions[0].type"}, "property, derived, segment, event"},
		{"leaf without type", `{"operator":"and","conditions":[{"field":"a","operator":"exists"}]}`, Options{}, []string{"rules.conditions[0].type"}, "required"},
		{"type not allowed here", `{"operator":"and","conditions":[{"type":"event","name":"x","operator":"occurred"}]}`,
			Options{Types: []Type{TypeProperty, TypeDerived}}, []string{"rules.conditions[0].type"}, "must be one of property, derived"},
		{"every problem, in order", `{"operator":"and","conditions":[
			{"type":"property","field":"a","operator":"equals","value":"x"},
			{"type":"property","field":"","operator":"equals","value":"x"},
			{"type":"property","field":"a","operator":"like","value":"x"},
			{"operator":"or","conditions":[{"type":"segment","operator":"memberOf"},{"type":"event","name":"e","operator":"happened"}]}]}`,
			Options{}, []string{"rules.conditions[1].field", "rules.conditions[2].operator", "rules.conditions[3].conditions[0].segmentId", "rules.conditions[3].conditions[1].operator"}, "must not be empty"},
		{"unknown key on leaf", `{"operator":"and","conditions":[{"type":"event","name":"x","operator":"occurred","withn":"1d"}]}`, Options{}, []string{"rules.conditions[0].withn"}, "unknown key"},
		{"segmentId on property", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"exists","segmentId":"s"}]}`, Options{}, []string{"rules.conditions[0].segmentId"}, "unknown key"},
		{"exists with value", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"exists","value":1}]}`, Options{}, []string{"rules.conditions[0].value"}, "takes no value"},
		{"equals without value", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"equals"}]}`, Options{}, []string{"rules.conditions[0].value"}, "required"},
		{"equals with null", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"equals","value":null}]}`, Options{}, []string{"rules.conditions[0].value"}, "required"},
		{"equals with array", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"equals","value":[1]}]}`, Options{}, []string{"rules.conditions[0].value"}, "string, number or boolean"},
		{"equals with object", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"equals","value":{}}]}`, Options{}, []string{"rules.conditions[0].value"}, "string, number or boolean"},
		{"includes with array", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"includes","value":["x"]}]}`, Options{}, []string{"rules.conditions[0].value"}, "string, number or boolean"},
		{"ordering with word", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"greaterThan","value":"abc"}]}`, Options{}, []string{"rules.conditions[0].value"}, "timestamp"},
		{"ordering with invalid date", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"lessThan","value":"2023-02-29"}]}`, Options{}, []string{"rules.conditions[0].value"}, "timestamp"},
		{"ordering with boolean", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"lessThan","value":true}]}`, Options{}, []string{"rules.conditions[0].value"}, "number or an ISO 8601"},
		{"contains with number", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"contains","value":1}]}`, Options{}, []string{"rules.conditions[0].value"}, "needs a string"},
		{"includesAll with scalar", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"includesAll","value":"x"}]}`, Options{}, []string{"rules.conditions[0].value"}, "array"},
		{"includesAny empty", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"includesAny","value":[]}]}`, Options{}, []string{"rules.conditions[0].value"}, "non-empty"},
		{"includesAll with nested array", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"includesAll","value":["x",["y"],null]}]}`, Options{}, []string{"rules.conditions[0].value[1]", "rules.conditions[0].value[2]"}, "string, number or boolean"},
		{"huge exponent", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"equals","value":1e999999999}]}`, Options{}, []string{"rules.conditions[0].value"}, "number"},
		{"number too long written out", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"greaterThan","value":1e100}]}`, Options{}, []string{"rules.conditions[0].value"}, "too many digits"},
		{"tiny number too long written out", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"lessThan","value":-1e-99}]}`, Options{}, []string{"rules.conditions[0].value"}, "too many digits"},
		{"NUL in value", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"equals","value":"a\u0000b"}]}`, Options{}, []string{"rules.conditions[0].value"}, "NUL"},
		{"NUL in field", `{"operator":"and","conditions":[{"type":"property","field":"a\u0000","operator":"exists"}]}`, Options{}, []string{"rules.conditions[0].field"}, "NUL"},
		{"field not a string", `{"operator":"and","conditions":[{"type":"property","field":5,"operator":"exists"}]}`, Options{}, []string{"rules.conditions[0].field"}, "must be a string"},
		{"unknown derived field", `{"operator":"and","conditions":[{"type":"derived","field":"totalBounces","operator":"exists"}]}`, Options{}, []string{"rules.conditions[0].field"}, "totalSends, totalOpens, totalClicks, lastEventAt, inactiveDays"},
		{"string operator on derived", `{"operator":"and","conditions":[{"type":"derived","field":"totalSends","operator":"contains","value":"1"}]}`, Options{}, []string{"rules.conditions[0].operator"}, "does not apply to derived field totalSends"},
		{"derived number with string", `{"operator":"and","conditions":[{"type":"derived","field":"totalSends","operator":"equals","value":"3"}]}`, Options{}, []string{"rules.conditions[0].value"}, "is a number"},
		{"lastEventAt with number", `{"operator":"and","conditions":[{"type":"derived","field":"lastEventAt","operator":"greaterThan","value":3}]}`, Options{}, []string{"rules.conditions[0].value"}, "is a timestamp"},
		{"segment operator", `{"operator":"and","conditions":[{"type":"segment","segmentId":"s","operator":"equals"}]}`, Options{}, []string{"rules.conditions[0].operator"}, "memberOf, notMemberOf"},
		{"event without name", `{"operator":"and","conditions":[{"type":"event","operator":"occurred"}]}`, Options{}, []string{"rules.conditions[0].name"}, "required"},
		{"event within", `{"operator":"and","conditions":[{"type":"event","name":"x","operator":"occurred","within":"1 day"}]}`, Options{}, []string{"rules.conditions[0].within"}, "whole number"},
		{"event within number", `{"operator":"and","conditions":[{"type":"event","name":"x","operator":"occurred","within":86400}]}`, Options{}, []string{"rules.conditions[0].within"}, "duration string"},
		{"too deep", `{"operator":"and","conditions":[{"operator":"and","conditions":[{"operator":"and","conditions":[]}]}]}`,
			Options{MaxDepth: 1}, []string{"rules.conditions[0].conditions[0]"}, "nested too deep"},
		{"too many", `{"operator":"and","conditions":[{"type":"property","field":"a","operator":"exists"},{"type":"property","field":"a","operator":"exists"},{"type":"property","field":"a","operator":"exists"}]}`,
			Options{MaxConditions: 2}, []string{"rules.conditions[2]"}, "too many conditions"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			n, err := Parse(json.RawMessage(tc.raw), tc.opts)
			if n != nil {
				t.Errorf("got a node along with the error")
			}
			fields := wantFieldErrors(t, err, tc.paths...)
			if len(fields) > 0 && !strings.Contains(fields[0].Message, tc.msg) {
				t.Errorf("message %q does not contain %q", fields[0].Message, tc.msg)
			}
		})
	}
}

// wantFieldErrors checks that err is a *ValidationError with exactly these
// paths, in order, and returns its fields.
func wantFieldErrors(t *testing.T, err error, paths ...string) []FieldError {
	t.Helper()
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("want *ValidationError, got %v", err)
	}
	var got []string
	for _, f := range verr.Fields {
		got = append(got, f.Path)
	}
	if !reflect.DeepEqual(got, paths) {
		t.Errorf("paths = %q, want %q\n%v", got, paths, err)
	}
	return verr.Fields
}

func TestValidationErrorByPath(t *testing.T) {
	t.Parallel()
	_, err := Parse(json.RawMessage(`{"operator":"and","conditions":[{"type":"property","field":"a","operator":"exists","value":1,"x":1}]}`), Options{})
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatal(err)
	}
	want := map[string][]string{
		"rules.conditions[0].x":     {"unknown key; this node allows type, field, operator, value"},
		"rules.conditions[0].value": {"exists takes no value"},
	}
	if got := verr.ByPath(); !reflect.DeepEqual(got, want) {
		t.Errorf("ByPath = %v", got)
	}
	if !strings.HasPrefix(err.Error(), "invalid rules: rules.conditions[0].x: unknown key") {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	const raw = `{"operator":"and","conditions":[` +
		`{"type":"property","field":"a","operator":"exists"},` +
		`{"type":"property","field":"n","operator":"equals","value":1.50},` +
		`{"type":"property","field":"t","operator":"includesAll","value":["x",2,false]},` +
		`{"operator":"not","conditions":[]},` +
		`{"type":"derived","field":"lastEventAt","operator":"lessThan","value":"2024-01-01"},` +
		`{"type":"segment","segmentId":"seg_x","operator":"memberOf"},` +
		`{"type":"event","name":"e","operator":"occurred","within":"48h"},` +
		`{"type":"event","name":"e","operator":"notOccurred"}]}`
	n := mustParse(t, raw)
	out, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	// Durations and numbers come back in their canonical spelling.
	want := strings.NewReplacer(`"48h"`, `"2d"`, `1.50`, `1.5`).Replace(raw)
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	again := mustParse(t, string(out))
	if !reflect.DeepEqual(n, again) {
		t.Errorf("round trip changed the tree")
	}
}

func TestSegmentRefsAndWalk(t *testing.T) {
	t.Parallel()
	n := mustParse(t, `{"operator":"or","conditions":[
		{"type":"segment","segmentId":"b","operator":"memberOf"},
		{"operator":"not","conditions":[{"type":"segment","segmentId":"a","operator":"memberOf"}]},
		{"type":"segment","segmentId":"b","operator":"notMemberOf"},
		{"type":"property","field":"x","operator":"exists"}]}`)
	if got := n.SegmentRefs(); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Errorf("SegmentRefs = %q", got)
	}
	if got := mustParse(t, `{"operator":"and","conditions":[]}`).SegmentRefs(); got != nil {
		t.Errorf("SegmentRefs of no refs = %q", got)
	}
	ev := mustParse(t, `{"operator":"or","conditions":[`+event("b", "occurred", "")+`,`+
		`{"operator":"not","conditions":[`+event("a", "occurred", "1d")+`]},`+event("b", "notOccurred", "")+`]}`)
	if got := ev.EventNames(); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Errorf("EventNames = %q", got)
	}
	if got := n.EventNames(); got != nil {
		t.Errorf("EventNames of no event leaves = %q", got)
	}
	var paths []string
	n.Walk("exit", func(path string, m *Node) {
		if m.Type == TypeSegment {
			paths = append(paths, path)
		}
	})
	want := []string{"exit.conditions[0]", "exit.conditions[1].conditions[0]", "exit.conditions[2]"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("Walk paths = %q", paths)
	}
}

func TestParseTimestamp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // RFC 3339 in UTC; empty: not a timestamp
	}{
		{"2024-05-01", "2024-05-01T00:00:00Z"},
		{"2024-05-01T10:00Z", "2024-05-01T10:00:00Z"},
		{"2024-05-01T10:00:30.5+02:00", "2024-05-01T08:00:30.5Z"},
		{"2024-05-01T10:00:30.123456-14:59", "2024-05-02T00:59:30.123456Z"},
		{"0001-01-01T00:00:00+14:00", "0000-12-31T10:00:00Z"},
		{"9999-12-31T23:59:59Z", "9999-12-31T23:59:59Z"},
		{"2024-02-29", "2024-02-29T00:00:00Z"},
		{"0000-01-01", ""},
		{"2023-02-29", ""},
		{"2024-04-31", ""},
		{"2024-00-10", ""},
		{"2024-5-01", ""},
		{"24-05-01", ""},
		{"2024-05-01T24:00:00Z", ""},
		{"2024-05-01T10:00:60Z", ""},
		{"2024-05-01T10:00:00", ""},
		{"2024-05-01t10:00:00z", ""},
		{"2024-05-01 10:00:00Z", ""},
		{"2024-05-01T10:00:00.1234567Z", ""},
		{"2024-05-01T10:00:00+15:00", ""},
		{"2024-05-01T10:00:00+0200", ""},
		{"2024-05-01\n", ""},
		{" 2024-05-01", ""},
		{"", ""},
	}
	for _, tc := range tests {
		got, ok := parseTimestamp(tc.in)
		gotS := ""
		if ok {
			gotS = got.UTC().Format(time.RFC3339Nano)
		}
		if gotS != tc.want {
			t.Errorf("parseTimestamp(%q) = %q, want %q", tc.in, gotS, tc.want)
		}
	}
}

// Stored rules come back from jsonb with numbers written out in full; a
// number accepted at create must parse again from that form.
func TestLongestNumberParsesAgainWrittenOut(t *testing.T) {
	for _, v := range []string{"1e99", "-1e-97", "1.5e98"} {
		n, err := Parse(json.RawMessage(`{"operator":"and","conditions":[{"type":"property","field":"a","operator":"greaterThan","value":`+v+`}]}`), Options{})
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		r, ok := new(big.Rat).SetString(string(n.Conditions[0].Value.(json.Number)))
		if !ok {
			t.Fatalf("%s: not a number", v)
		}
		full := r.FloatString(100)
		full = strings.TrimRight(strings.TrimRight(full, "0"), ".")
		if _, err := Parse(json.RawMessage(`{"operator":"and","conditions":[{"type":"property","field":"a","operator":"greaterThan","value":`+full+`}]}`), Options{}); err != nil {
			t.Errorf("%s written out as %s (%d chars): %v", v, full, len(full), err)
		}
	}
}

func TestCanonicalNumber(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"100": "100", "1e2": "100", "1E2": "100", "1.0e1": "10", "5e-1": "0.5", "0.50": "0.5", "-0": "0",
		"-0.0e3": "0", "0": "0", "007": "7", "-12.340": "-12.34", "1.5e-3": "0.0015", "12e-1": "1.2", "1e+2": "100",
	} {
		if got := canonicalNumber(in); got != want {
			t.Errorf("canonicalNumber(%s) = %s, want %s", in, got, want)
		}
	}
}

// A tree's size is bounded by its nodes, groups included (empty groups were
// free), and a tree full of mistakes gets a bounded list of them.
func TestParseBoundsNodesAndErrors(t *testing.T) {
	t.Parallel()
	group := func(n int, cond string) string {
		return `{"operator":"and","conditions":[` + strings.TrimSuffix(strings.Repeat(cond+",", n), ",") + `]}`
	}
	empty := `{"operator":"and","conditions":[]}`
	if _, err := Parse([]byte(group(MaxNodes-1, empty)), Options{}); err != nil {
		t.Fatalf("%d nodes refused: %v", MaxNodes, err)
	}
	_, err := Parse([]byte(group(MaxNodes, empty)), Options{})
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Error(), "too many nodes") {
		t.Fatalf("%d nodes: %v", MaxNodes+1, err)
	}
	// The 150 KB body of 50,000 empty conditions.
	_, err = Parse([]byte(group(50_000, `{}`)), Options{})
	if !errors.As(err, &ve) || len(ve.Fields) > maxErrors {
		t.Fatalf("50,000 bad conditions: %d problems reported", len(ve.Fields))
	}
}
