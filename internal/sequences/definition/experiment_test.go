package definition

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseExperiment: splits, branches, holdout and goal (ADDENDUM 20)
// parse into the definition, and its JSON form (what is stored) reads back
// equal.
func TestParseExperiment(t *testing.T) {
	t.Parallel()
	src := `name: Trial
trigger: {event: trial.started}
holdout: 10
goal: {event: purchase.completed, within: 14d}
exitOnGoal: true
steps:
  - split: {b: 30, a: 70}
  - send: tips-a
    branch: a
  - {delay: 2d, branch: b}
  - id: long
    action: email
    template: tips-b
    branch: b
  - action: delay
    duration: 1d
    branch: a
  - send: last
`
	d := mustParse(t, src, Options{RequireName: true})
	if d.Holdout != 10 || !d.ExitOnGoal || d.Goal == nil || d.Goal.Event != "purchase.completed" ||
		d.Goal.Within != 14*24*time.Hour || d.Goal.WithinSrc != "14d" {
		t.Fatalf("top level: holdout %d exitOnGoal %v goal %+v", d.Holdout, d.ExitOnGoal, d.Goal)
	}
	sp := d.Split()
	if sp == nil || sp.ID != "step-1" || !reflect.DeepEqual(sp.Branches, map[string]int{"a": 70, "b": 30}) {
		t.Fatalf("split: %+v", sp)
	}
	if got := d.BranchNames(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("BranchNames: %v", got)
	}
	want := []string{"", "a", "b", "b", "a", ""}
	for i, s := range d.Steps {
		if s.Branch != want[i] {
			t.Errorf("steps[%d].branch = %q, want %q", i, s.Branch, want[i])
		}
	}
	if !d.Steps[1].RunsFor("a") || d.Steps[1].RunsFor("b") || d.Steps[1].RunsFor(BranchHoldout) || !d.Steps[5].RunsFor("b") {
		t.Error("RunsFor")
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseJSON(raw)
	if err != nil {
		t.Fatalf("ParseJSON(%s): %v", raw, err)
	}
	back.Name, d.Warnings, back.Warnings = d.Name, nil, nil
	if !reflect.DeepEqual(back, d) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, d)
	}
	if none := mustParse(t, "trigger: {event: x}\nsteps: [{send: a}]\n", Options{}); none.Split() != nil ||
		!reflect.DeepEqual(none.BranchNames(), []string{BranchDefault}) || none.Goal != nil || none.Holdout != 0 {
		t.Errorf("no experiment: %+v", none)
	}
}

// TestParseExperimentInvalid: every bad split, branch, holdout and goal is
// a VALIDATION_ERROR at its path.
func TestParseExperimentInvalid(t *testing.T) {
	t.Parallel()
	const head = "trigger: {event: x}\n"
	for _, tc := range []struct {
		desc, src, path, msg string
	}{
		{"weights short of 100", "steps: [{split: {a: 50, b: 40}}, {send: t}]", "steps[0].split", "sum to 100"},
		{"one branch", "steps: [{split: {a: 100}}, {send: t}]", "steps[0].split", "2 to 5"},
		{"six branches", "steps: [{split: {a: 20, b: 20, c: 20, d: 20, e: 10, f: 10}}, {send: t}]", "steps[0].split", "2 to 5"},
		{"weight not a number", "steps: [{split: {a: half, b: 50}}, {send: t}]", "steps[0].split.a", "whole number"},
		{"weight a fraction", "steps: [{split: {a: 50.5, b: 49.5}}, {send: t}]", "steps[0].split.a", "whole number"},
		{"weight zero", "steps: [{split: {a: 0, b: 100}}, {send: t}]", "steps[0].split.a", "1 to 99"},
		{"reserved name", "steps: [{split: {holdout: 50, b: 50}}, {send: t}]", "steps[0].split.holdout", "reserved"},
		{"bad name", "steps: [{split: {'a b': 50, b: 50}}, {send: t}]", "steps[0].split.a b", "branch name"},
		{"split not a mapping", "steps: [{split: [a, b]}, {send: t}]", "steps[0].split", "mapping"},
		{"long form without branches", "steps: [{action: split}, {send: t}]", "steps[0].branches", "required"},
		{"split with send", "steps: [{split: {a: 50, b: 50}, send: t}]", "steps[0]", "more than one"},
		{"branch on a split", "steps: [{split: {a: 50, b: 50}, branch: a}, {send: t}]", "steps[0].branch", "does not belong"},
		{"second split", "steps: [{split: {a: 50, b: 50}}, {split: {c: 50, d: 50}}, {send: t}]", "steps[1]", "at most one"},
		{"branch without split", "steps: [{send: t, branch: a}]", "steps[0].branch", "none"},
		{"branch before its split", "steps: [{send: t, branch: a}, {split: {a: 50, b: 50}}]", "steps[0].branch", "none"},
		{"unknown branch", "steps: [{split: {a: 50, b: 50}}, {send: t, branch: c}]", "steps[1].branch", "a, b"},
		{"unknown branch, long form", "steps: [{split: {a: 50, b: 50}}, {action: delay, duration: 1d, branch: c}]", "steps[1].branch", "a, b"},
		{"holdout above 50", "holdout: 51\nsteps: [{send: t}]", "holdout", "0 to 50"},
		{"holdout negative", "holdout: -1\nsteps: [{send: t}]", "holdout", "0 to 50"},
		{"holdout a fraction", "holdout: 10.5\nsteps: [{send: t}]", "holdout", "whole number"},
		{"goal without event", "goal: {within: 7d}\nsteps: [{send: t}]", "goal.event", "required"},
		{"goal without within", "goal: {event: buy}\nsteps: [{send: t}]", "goal.within", "required"},
		{"goal bad within", "goal: {event: buy, within: 7 days}\nsteps: [{send: t}]", "goal.within", "unit"},
		{"goal system event", "goal: {event: email.clicked, within: 7d}\nsteps: [{send: t}]", "goal.event", "custom event"},
		{"goal unknown key", "goal: {event: buy, within: 7d, value: 3}\nsteps: [{send: t}]", "goal.value", "not a known key"},
		{"goal a string", "goal: buy\nsteps: [{send: t}]", "goal", "mapping"},
		{"exitOnGoal without goal", "exitOnGoal: true\nsteps: [{send: t}]", "exitOnGoal", "needs a goal"},
		{"exitOnGoal not a boolean", "goal: {event: buy, within: 7d}\nexitOnGoal: yes please\nsteps: [{send: t}]", "exitOnGoal", "true or false"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(head+tc.src+"\n"), Options{})
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			fields := fieldsOf(t, err)
			msgs, ok := fields[tc.path]
			if !ok {
				t.Fatalf("no problem at %s: %v", tc.path, fields)
			}
			if !strings.Contains(strings.Join(msgs, " "), tc.msg) {
				t.Errorf("%s: %v, want it to say %q", tc.path, msgs, tc.msg)
			}
		})
	}
}
