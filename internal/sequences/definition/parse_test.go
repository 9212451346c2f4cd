package definition

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/rules"
)

func mustRule(t *testing.T, root, src string) *rules.Node {
	t.Helper()
	n, err := rules.Parse([]byte(src), rules.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustParse(t *testing.T, src string, opt Options) *Definition {
	t.Helper()
	d, err := Parse([]byte(src), opt)
	if err != nil {
		t.Fatalf("Parse: %v\nfields: %v", err, fieldsOf(t, err))
	}
	return d
}

// fieldsOf returns details.fields of a VALIDATION_ERROR.
func fieldsOf(t *testing.T, err error) map[string][]string {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != "VALIDATION_ERROR" {
		t.Fatalf("want a VALIDATION_ERROR, got %v", err)
	}
	out := map[string][]string{}
	for k, v := range e.Details["fields"].(map[string]any) {
		out[k] = v.([]string)
	}
	return out
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		src  string
		opt  Options
		want *Definition
	}{
		{
			desc: "the ADDENDUM example",
			src:  string(readTestdata(t, "valid/onboarding.yaml")),
			opt:  Options{RequireName: true},
			want: &Definition{
				Name:    "Onboarding",
				Trigger: Trigger{Event: "user.signed_up"},
				From:    "Acme <hello@acme.com>",
				Gates:   mustRule(t, "gates", `{"operator":"and","conditions":[{"type":"property","field":"country","operator":"equals","value":"NL"}]}`),
				Exit:    mustRule(t, "exit", `{"operator":"or","conditions":[{"type":"event","name":"purchase.completed","operator":"occurred"}]}`),
				Steps: []Step{
					{ID: "step-1", Kind: KindEmail, Template: "welcome"},
					{ID: "step-2", Kind: KindDelay, Delay: 24 * time.Hour, DelaySrc: "1d"},
					{ID: "tips", Kind: KindEmail, Template: "tips",
						Conditions: mustRule(t, "c", `{"operator":"and","conditions":[{"type":"derived","field":"totalOpens","operator":"greaterThan","value":0}]}`)},
					{ID: "step-4", Kind: KindDelay, Delay: 72 * time.Hour, DelaySrc: "3d"},
				},
				Warnings: []string{"steps[3]: a delay after the last email step only postpones the sequence's completion"},
			},
		},
		{
			desc: "update without a name",
			src:  "trigger: {event: trial.started}\nsteps: [{send: hello}]\n",
			want: &Definition{Trigger: Trigger{Event: "trial.started"}, Steps: []Step{{ID: "step-1", Kind: KindEmail, Template: "hello"}}},
		},
		{
			desc: "ids are read as text, reenroll true, null optional keys",
			src: `
name: 2024
trigger: {event: 42, reenroll: true}
from: hello@acme.com
gates:
exit: ~
steps:
  - {id: 7, send: 123}
  - {id: wait.1, delay: 90m}
  - {action: email, template: "1e3", conditions: null}
`,
			opt: Options{RequireName: true},
			want: &Definition{
				Name:    "2024",
				Trigger: Trigger{Event: "42", Reenroll: true},
				From:    "hello@acme.com",
				Steps: []Step{
					{ID: "7", Kind: KindEmail, Template: "123"},
					{ID: "wait.1", Kind: KindDelay, Delay: 90 * time.Minute, DelaySrc: "90m"},
					{ID: "step-3", Kind: KindEmail, Template: "1e3"},
				},
			},
		},
		{
			desc: "rule values keep their YAML text and exact numbers",
			src: `
trigger: {event: e}
gates:
  operator: and
  conditions:
    - {type: property, field: signup, operator: equals, value: 2024-05-01}
    - {type: property, field: price, operator: greaterThan, value: 1.50}
    - {type: property, field: big, operator: equals, value: 12345678901234567890123}
    - {type: property, field: hex, operator: equals, value: 0x1F}
    - {type: property, field: flag, operator: equals, value: true}
    - {type: property, field: tags, operator: includesAll, value: [a, 2, false]}
steps: [{send: t}]
`,
			want: &Definition{
				Trigger: Trigger{Event: "e"},
				Gates: mustRule(t, "gates", `{"operator":"and","conditions":[
					{"type":"property","field":"signup","operator":"equals","value":"2024-05-01"},
					{"type":"property","field":"price","operator":"greaterThan","value":1.5},
					{"type":"property","field":"big","operator":"equals","value":12345678901234567890123},
					{"type":"property","field":"hex","operator":"equals","value":31},
					{"type":"property","field":"flag","operator":"equals","value":true},
					{"type":"property","field":"tags","operator":"includesAll","value":["a",2,false]}]}`),
				Steps: []Step{{ID: "step-1", Kind: KindEmail, Template: "t"}},
			},
		},
		{
			desc: "a JSON document is YAML too",
			src:  `{"trigger":{"event":"e","reenroll":false},"steps":[{"id":"a","action":"delay","duration":"1w"},{"id":"b","action":"email","template":"t"}]}`,
			want: &Definition{
				Trigger: Trigger{Event: "e"},
				Steps: []Step{
					{ID: "a", Kind: KindDelay, Delay: 7 * 24 * time.Hour, DelaySrc: "1w"},
					{ID: "b", Kind: KindEmail, Template: "t"},
				},
			},
		},
		{
			desc: "document markers and a trailing empty document",
			src:  "---\ntrigger: {event: e}\nsteps: [{send: t}]\n...\n---\n# nothing more\n",
			want: &Definition{Trigger: Trigger{Event: "e"}, Steps: []Step{{ID: "step-1", Kind: KindEmail, Template: "t"}}},
		},
		{
			desc: "longest delay, most steps",
			src:  "trigger: {event: e}\nsteps:\n  - delay: 365d\n" + strings.Repeat("  - send: t\n", MaxSteps-1),
			want: func() *Definition {
				d := &Definition{Trigger: Trigger{Event: "e"}, Steps: []Step{{ID: "step-1", Kind: KindDelay, Delay: MaxDelay, DelaySrc: "365d"}}}
				for i := 2; i <= MaxSteps; i++ {
					d.Steps = append(d.Steps, Step{ID: "step-" + strconv.Itoa(i), Kind: KindEmail, Template: "t"})
				}
				return d
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := mustParse(t, tc.src, tc.opt)
			if !reflect.DeepEqual(got, tc.want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(tc.want)
				t.Errorf("got  %s %q\nwant %s %q", gj, got.Warnings, wj, tc.want.Warnings)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	const ok = "trigger: {event: e}\nsteps: [{send: t}]\n"
	tests := []struct {
		desc string
		src  string
		opt  Options
		// want maps every path reported to a substring of its first message.
		want map[string]string
	}{
		// The document.
		{desc: "syntax error", src: "trigger: [1\n", want: map[string]string{"content": "is not valid YAML: line 1: did not find expected"}},
		{desc: "tab indentation", src: "trigger:\n\tevent: e\n", want: map[string]string{"content": "is not valid YAML"}},
		{desc: "empty", src: "", want: map[string]string{"content": "is empty"}},
		{desc: "only a comment", src: "# nothing\n", want: map[string]string{"content": "is empty"}},
		{desc: "null document", src: "~\n", want: map[string]string{"content": "is empty"}},
		{desc: "scalar document", src: "hello\n", want: map[string]string{"content": "line 1: must be a YAML mapping"}},
		{desc: "list document", src: "- send: t\n", want: map[string]string{"content": "must be a YAML mapping"}},
		{desc: "too large", src: ok + "# " + strings.Repeat("x", MaxSourceBytes) + "\n", want: map[string]string{"content": "too large"}},
		{desc: "NUL", src: "name: a\x00b\n" + ok, want: map[string]string{"content": "without NUL"}},
		{desc: "invalid UTF-8", src: "name: \xff\n" + ok, want: map[string]string{"content": "valid UTF-8"}},
		{desc: "two documents", src: ok + "---\n" + ok, want: map[string]string{"content": "line 3: must hold one YAML document"}},
		{desc: "a second document after an empty one", src: ok + "---\n---\nname: x\n", want: map[string]string{"content": "line 4: must hold one YAML document"}},
		{desc: "broken second document", src: ok + "---\n[\n", want: map[string]string{"content": "after the first document"}},
		{desc: "anchor", src: "trigger: &t {event: e}\nsteps: [{send: t}]\n", want: map[string]string{"content": "line 1: uses the YAML anchor &t"}},
		{desc: "merge key", src: "trigger: {event: e}\nsteps:\n  - {<<: {send: t}}\n", want: map[string]string{"content": "line 3: uses the YAML tag !!merge"}},
		{desc: "custom tag", src: "trigger: {event: !env EVENT}\nsteps: [{send: t}]\n", want: map[string]string{"content": "line 1: uses the YAML tag !env"}},
		{desc: "binary tag", src: "trigger: {event: !!binary aGk=}\nsteps: [{send: t}]\n", want: map[string]string{"content": "tag !!binary"}},
		{desc: "nested too deep", src: ok + "gates: " + strings.Repeat("[", 70) + strings.Repeat("]", 70) + "\n", want: map[string]string{"content": "nested too deep"}},

		// Top level.
		{desc: "name required on create", src: ok, opt: Options{RequireName: true}, want: map[string]string{"name": "line 1: is required when the sequence is created"}},
		{desc: "null name on create", src: "name:\n" + ok, opt: Options{RequireName: true}, want: map[string]string{"name": "line 1: is required"}},
		{desc: "blank name", src: "name: '  '\n" + ok, want: map[string]string{"name": "line 1: must not be blank"}},
		{desc: "long name", src: "name: " + strings.Repeat("é", 257) + "\n" + ok, want: map[string]string{"name": "at most 256 characters"}},
		{desc: "name is a list", src: "name: [a]\n" + ok, want: map[string]string{"name": "must be a string, not a list"}},
		{desc: "unknown top-level key", src: ok + "description: x\n", want: map[string]string{"description": "line 3: is not a known key: a sequence has name, trigger, from, topic, window, gates, exit, steps"}},
		{desc: "top-level key a list", src: ok + "? [a]\n: x\n", want: map[string]string{"content": "line 3: has a key that is not a string"}},
		{desc: "empty top-level key", src: ok + "? \n: x\n", want: map[string]string{`""`: "line 3: is not a known key"}},
		{desc: "duplicate top-level key", src: ok + "trigger: {event: f}\n", want: map[string]string{"trigger": "line 3: is a duplicate key (first at line 1)"}},
		{desc: "from not an address", src: ok + "from: Acme\n", want: map[string]string{"from": "line 3: must be an email address"}},
		{desc: "from with a line break", src: ok + "from: \"a@b.example\\nBcc: x@y.example\"\n", want: map[string]string{"from": "line break"}},

		// Trigger.
		{desc: "no trigger", src: "steps: [{send: t}]\n", want: map[string]string{"trigger.event": "line 1: is required"}},
		{desc: "trigger is a string", src: "trigger: e\nsteps: [{send: t}]\n", want: map[string]string{"trigger": "line 1: must be a mapping"}},
		{desc: "trigger without event", src: "steps: [{send: t}]\ntrigger:\n  reenroll: true\n", want: map[string]string{"trigger.event": "line 2: is required"}},
		{desc: "null event", src: "trigger: {event: }\nsteps: [{send: t}]\n", want: map[string]string{"trigger.event": "line 1: is required"}},
		{desc: "system event", src: "trigger: {event: email.opened}\nsteps: [{send: t}]\n", want: map[string]string{"trigger.event": "must be a custom event"}},
		{desc: "blank event", src: "trigger: {event: ' '}\nsteps: [{send: t}]\n", want: map[string]string{"trigger.event": "must not be blank"}},
		{desc: "long event", src: "trigger: {event: " + strings.Repeat("e", 257) + "}\nsteps: [{send: t}]\n", want: map[string]string{"trigger.event": "at most 256"}},
		{desc: "reenroll yes", src: "trigger: {event: e, reenroll: yes}\nsteps: [{send: t}]\n", want: map[string]string{"trigger.reenroll": "must be true or false"}},
		{desc: "unknown trigger key", src: "trigger:\n  event: e\n  evnet: f\nsteps: [{send: t}]\n", want: map[string]string{"trigger.evnet": "line 3: is not a known key: trigger has event, reenroll"}},

		// Steps.
		{desc: "no steps", src: "trigger: {event: e}\n", want: map[string]string{"steps": "line 1: is required"}},
		{desc: "empty steps", src: "trigger: {event: e}\nsteps: []\n", want: map[string]string{"steps": "line 2: must list at least one step"}},
		{desc: "steps a mapping", src: "trigger: {event: e}\nsteps: {send: t}\n", want: map[string]string{"steps": "must be a list"}},
		{desc: "too many steps", src: "trigger: {event: e}\nsteps:\n" + strings.Repeat("  - send: t\n", MaxSteps+1), want: map[string]string{"steps": "has 101 steps: at most 100"}},
		{desc: "step a string", src: "trigger: {event: e}\nsteps:\n  - welcome\n", want: map[string]string{"steps[0]": "line 3: must be a mapping"}},
		{desc: "send and delay", src: "trigger: {event: e}\nsteps:\n  - {send: t, delay: 1d}\n", want: map[string]string{"steps[0]": "line 3: has more than one of send, delay and split"}},
		{desc: "send and action", src: "trigger: {event: e}\nsteps:\n  - send: t\n    action: email\n", want: map[string]string{"steps[0].action": "line 4: cannot be combined"}},
		{desc: "typo drops nothing", src: string(readTestdata(t, "invalid/typo.yaml")), want: map[string]string{
			"steps[1].delya":    "line 6: is not a known key: a step has id, send, delay",
			"steps[1]":          "line 6: needs send",
			"steps[2].template": "line 8: does not belong to a send step, which has id, send, conditions",
		}},
		{desc: "email without template", src: "trigger: {event: e}\nsteps:\n  - action: email\n", want: map[string]string{"steps[0].template": "line 3: is required"}},
		{desc: "delay without duration", src: "trigger: {event: e}\nsteps:\n  - action: delay\n    template: t\n", want: map[string]string{
			"steps[0].duration": "line 3: is required",
			"steps[0].template": "line 4: does not belong to an action: delay step, which has id, action, duration",
		}},
		{desc: "unknown action", src: "trigger: {event: e}\nsteps:\n  - action: sms\n", want: map[string]string{"steps[0].action": "must be email, delay or split"}},
		{desc: "email with duration", src: "trigger: {event: e}\nsteps:\n  - {action: email, template: t, duration: 1d}\n", want: map[string]string{"steps[0].duration": "does not belong to an action: email step"}},
		{desc: "conditions on a delay", src: "trigger: {event: e}\nsteps:\n  - send: t\n  - delay: 1d\n    conditions: {operator: and, conditions: []}\n", want: map[string]string{"steps[1].conditions": "line 5: apply to email steps only"}},
		{desc: "bad template id", src: "trigger: {event: e}\nsteps:\n  - send: 'wel come'\n  - {action: email, template: -x}\n", want: map[string]string{
			"steps[0].send":     "line 3: must be a template id",
			"steps[1].template": "line 4: must be a template id",
		}},
		{desc: "template a list", src: "trigger: {event: e}\nsteps:\n  - send: [a]\n", want: map[string]string{"steps[0].send": "must be a string, not a list"}},
		{desc: "bad step id", src: "trigger: {event: e}\nsteps:\n  - {id: 'a/b', send: t}\n  - {id: , send: t}\n", want: map[string]string{
			"steps[0].id": "line 3: must be 1-64 letters",
			"steps[1].id": "line 4: is required",
		}},
		{desc: "duplicate ids", src: "trigger: {event: e}\nsteps:\n  - {id: a, send: t}\n  - {id: a, send: t}\n", want: map[string]string{"steps[1].id": "line 4: duplicate step id \"a\": steps[0] has it too"}},
		{desc: "explicit id takes a default", src: "trigger: {event: e}\nsteps:\n  - send: t\n  - {id: step-1, send: t}\n", want: map[string]string{"steps[1].id": "duplicate step id \"step-1\""}},
		{desc: "default id taken", src: "trigger: {event: e}\nsteps:\n  - {id: step-2, send: t}\n  - send: t\n", want: map[string]string{"steps[1]": "line 4: duplicate step id \"step-2\""}},
		{desc: "duplicate step key", src: "trigger: {event: e}\nsteps:\n  - send: t\n    send: u\n", want: map[string]string{"steps[0].send": "line 4: is a duplicate key"}},

		// Durations.
		{desc: "fraction", src: "trigger: {event: e}\nsteps:\n  - delay: 1.5d\n", want: map[string]string{"steps[0].delay": "line 3: must be a positive whole number and a unit"}},
		{desc: "zero", src: "trigger: {event: e}\nsteps:\n  - delay: 0d\n", want: map[string]string{"steps[0].delay": "positive whole number"}},
		{desc: "no unit", src: "trigger: {event: e}\nsteps:\n  - delay: 30\n", want: map[string]string{"steps[0].delay": "positive whole number"}},
		{desc: "two units", src: "trigger: {event: e}\nsteps:\n  - delay: 1d2h\n", want: map[string]string{"steps[0].delay": "positive whole number"}},
		{desc: "upper-case unit", src: "trigger: {event: e}\nsteps:\n  - delay: 1D\n", want: map[string]string{"steps[0].delay": "positive whole number"}},
		{desc: "too long", src: "trigger: {event: e}\nsteps:\n  - action: delay\n    duration: 366d\n", want: map[string]string{"steps[0].duration": "line 4: must be at most 365d"}},
		{desc: "null delay", src: "trigger: {event: e}\nsteps:\n  - delay:\n", want: map[string]string{"steps[0].delay": "line 3: is required"}},

		// Rule nodes.
		{desc: "rule errors name their line", src: string(readTestdata(t, "invalid/rules.yaml")), want: map[string]string{
			"trigger.event":                "line 2: must be a custom event",
			"gates.operator":               "line 4: unknown value \"xor\"",
			"gates.conditions[0].operator": "line 6: unknown value \"equal\"",
			"gates.conditions[1].withn":    "line 7: unknown key",
			"steps[1].id":                  "line 11: duplicate step id \"a\"",
			"steps[1].delay":               "line 12: must be a positive whole number",
		}},
		{desc: "missing leaf key at the leaf's line", src: ok + "exit:\n  operator: or\n  conditions:\n    - type: event\n      operator: occurred\n", want: map[string]string{
			"exit.conditions[0].name": "line 6: required",
		}},
		{desc: "step condition path", src: "trigger: {event: e}\nsteps:\n  - send: t\n    conditions:\n      operator: and\n      conditions:\n        - {type: derived, field: totalOpen, operator: exists}\n", want: map[string]string{
			"steps[0].conditions.conditions[0].field": "line 7: unknown value \"totalOpen\"",
		}},
		{desc: "rule node a string", src: ok + "gates: country is NL\n", want: map[string]string{"gates": "line 3: must be an object"}},
		{desc: "duplicate key in a rule node", src: ok + "gates:\n  operator: and\n  operator: or\n  conditions: []\n", want: map[string]string{"gates.operator": "line 5: is a duplicate key"}},
		{desc: "rule array value element", src: ok + "gates:\n  operator: and\n  conditions:\n    - type: property\n      field: tags\n      operator: includesAny\n      value:\n        - a\n        - [b]\n", want: map[string]string{
			"gates.conditions[0].value[1]": "line 11: must be a string, number or boolean",
		}},
		{desc: "infinite number", src: ok + "gates: {operator: and, conditions: [{type: property, field: x, operator: equals, value: .inf}]}\n", want: map[string]string{
			"gates.conditions[0].value": "line 3: not a finite",
		}},
		{desc: "within not a duration", src: ok + "exit: {operator: or, conditions: [{type: event, name: x, operator: occurred, within: 1.5d}]}\n", want: map[string]string{
			"exit.conditions[0].within": "line 3: must be a whole number",
		}},

		{desc: "problems beyond the limit are counted", src: ok + func() string {
			var b strings.Builder
			for i := range maxProblems + 5 {
				b.WriteString("k" + strconv.Itoa(i) + ": 1\n")
			}
			return b.String()
		}(), want: func() map[string]string {
			m := map[string]string{"content": "has 5 more problems than the " + strconv.Itoa(maxProblems) + " listed"}
			for i := range maxProblems {
				m["k"+strconv.Itoa(i)] = "line " + strconv.Itoa(i+3) + ": is not a known key"
			}
			return m
		}()},

		// Several problems at once.
		{desc: "every problem is reported", src: "name: ''\ntrigger: {}\nsteps: [{send: 'a b'}, {delay: x}]\n", opt: Options{RequireName: true}, want: map[string]string{
			"name":           "line 1: must not be blank",
			"trigger.event":  "line 2: is required",
			"steps[0].send":  "line 3: must be a template id",
			"steps[1].delay": "line 3: must be a positive whole number",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			d, err := Parse([]byte(tc.src), tc.opt)
			if err == nil {
				b, _ := json.Marshal(d)
				t.Fatalf("no error; parsed %s", b)
			}
			got := fieldsOf(t, err)
			var gotPaths, wantPaths []string
			for p := range got {
				gotPaths = append(gotPaths, p)
			}
			for p := range tc.want {
				wantPaths = append(wantPaths, p)
			}
			sort.Strings(gotPaths)
			sort.Strings(wantPaths)
			if !reflect.DeepEqual(gotPaths, wantPaths) {
				t.Fatalf("paths %q, want %q\n%v", gotPaths, wantPaths, got)
			}
			for p, want := range tc.want {
				if !strings.Contains(got[p][0], want) {
					t.Errorf("%s: %q, want it to contain %q", p, got[p][0], want)
				}
			}
		})
	}
}

// A bad indentation names the line out of step as well as the line
// yaml.v3 reports (the start of the enclosing block).
func TestMisindentedLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want string
	}{
		{"name: x\ntrigger:\n  event: a\nsteps:\n  - send: welcome\n  - action: email\n  template: b\n", "line out of step is line 7"},
		{"name: x\ntrigger:\n  event: a\nsteps:\n  - send: welcome\n  - delay: 2m\n - send: tips\n", "line out of step is line 7"},
	} {
		_, err := Parse([]byte(tc.src), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
	}
}

// The send window: parsed, kept through the stored JSON, and refused with
// its path when it is not one.
func TestWindow(t *testing.T) {
	t.Parallel()
	d, err := Parse([]byte("name: x\ntrigger: {event: a}\nwindow: {days: [mon, fri], from: \"09:00\", to: \"17:30\"}\nsteps: [{send: w}]\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Window == nil || d.Window.From != "09:00" || d.Window.To != "17:30" || len(d.Window.Days) != 2 {
		t.Fatalf("%+v", d.Window)
	}
	j, _ := json.Marshal(d)
	var back Definition
	if err := json.Unmarshal(j, &back); err != nil || back.Window == nil || back.Window.To != "17:30" {
		t.Fatalf("round trip %s: %+v %v", j, back.Window, err)
	}
	for src, field := range map[string]string{
		`window: {from: "17:00", to: "09:00"}`:                 "window",
		`window: {from: "9am", to: "17:00"}`:                   "window.from",
		`window: {from: "09:00"}`:                              "window.to",
		`window: {days: [funday], from: "09:00", to: "17:00"}`: "window.days",
		`window: {days: mon, from: "09:00", to: "17:00"}`:      "window.days",
		`window: {from: "09:00", to: "17:00", tz: UTC}`:        "window.tz",
		`window: always`: "window",
	} {
		_, err := Parse([]byte("name: x\ntrigger: {event: a}\n"+src+"\nsteps: [{send: w}]\n"), Options{})
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v, want an error naming %s", src, err, field)
		}
	}
}
