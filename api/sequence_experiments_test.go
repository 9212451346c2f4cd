package api

import (
	"fmt"
	"testing"
)

// A sequence experiment over HTTP (ADDENDUM 20): bad splits, branches,
// holdouts and goals refused; the experiment's figures by branch with the
// holdout and the uplift; enrolments and the dry run show the branch;
// another tenant's sequence is not found.
func TestSequenceExperimentRoute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_seqx"))
	other := b.apiKey(b.tenant("org_seqx_other"))
	b.expect("PUT", "/api/templates/welcome", tok, map[string]any{"name": "W", "subject": "Hi", "content": "<p>Hello</p>"}, 201)
	b.expect("PUT", "/api/templates/tips", tok, map[string]any{"name": "T", "subject": "Tips", "content": "<p>Tips</p>"}, 201)

	for _, bad := range []struct{ desc, yaml, field string }{
		{"weights short of 100", "steps: [{split: {a: 50, b: 40}}, {send: welcome}]", "steps[0].split"},
		{"one branch", "steps: [{split: {a: 100}}, {send: welcome}]", "steps[0].split"},
		{"unknown branch", "steps: [{split: {a: 50, b: 50}}, {send: welcome, branch: c}]", "steps[1].branch"},
		{"branch without a split", "steps: [{send: welcome, branch: a}]", "steps[0].branch"},
		{"branch before the split", "steps: [{action: email, template: welcome, branch: a}, {split: {a: 50, b: 50}}]", "steps[0].branch"},
		{"holdout above 50", "holdout: 60\nsteps: [{send: welcome}]", "holdout"},
		{"goal without within", "goal: {event: purchased}\nsteps: [{send: welcome}]", "goal.within"},
		{"goal on a system event", "goal: {event: email.opened, within: 1d}\nsteps: [{send: welcome}]", "goal.event"},
		{"exitOnGoal without goal", "exitOnGoal: true\nsteps: [{send: welcome}]", "exitOnGoal"},
	} {
		r := b.expectError("PUT", "/api/sequences/bad", tok, map[string]any{
			"content": "name: Bad\ntrigger: {event: signed_up}\n" + bad.yaml + "\n"}, 400, "VALIDATION_ERROR")
		if _, ok := r.fields()[bad.field]; !ok {
			t.Errorf("%s: no problem at %s: %s", bad.desc, bad.field, r.raw)
		}
	}

	const trial = `name: Trial
trigger: {event: signed_up}
holdout: 30
goal: {event: purchased, within: 14d}
steps:
  - split: {a: 50, b: 50}
  - {send: welcome, branch: a}
  - {delay: 1d, branch: b}
  - {action: email, template: tips, branch: b}
`
	b.expect("PUT", "/api/sequences/trial", tok, map[string]any{"content": trial}, 201)
	b.expect("PUT", "/api/sequences/plain", tok, map[string]any{"content": "name: Plain\ntrigger: {event: signed_up}\nsteps: [{send: welcome}]\n"}, 201)
	const n = 12
	ids := make([]string, n)
	for i := range n {
		email := fmt.Sprintf("x%d@example.com", i)
		c := b.expect("PUT", "/api/contacts", tok, map[string]any{"email": email}, 201)
		ids[i] = c.body["contactId"].(string)
		b.expect("POST", "/api/events", tok, map[string]any{"email": email, "name": "signed_up"}, 201)
	}
	for i := 0; i < n; i += 2 {
		b.expect("POST", "/api/events", tok, map[string]any{"email": fmt.Sprintf("x%d@example.com", i), "name": "purchased"}, 201)
	}

	x := b.expect("GET", "/api/sequences/trial/experiment", tok, nil, 200)
	goal, _ := x.body["goal"].(map[string]any)
	if goal["event"] != "purchased" || goal["within"] != "14d" {
		t.Fatalf("goal: %s", x.raw)
	}
	branches, _ := x.body["branches"].([]any)
	holdout, _ := x.body["holdout"].(map[string]any)
	uplift, _ := x.body["uplift"].(map[string]any)
	if len(branches) != 2 || holdout == nil || holdout["branch"] != "holdout" || len(uplift) != 2 {
		t.Fatalf("%s", x.raw)
	}
	var entered, converted float64
	for i, v := range append(branches, holdout) {
		br := v.(map[string]any)
		if i < 2 && br["branch"] != []string{"a", "b"}[i] {
			t.Fatalf("branches out of order: %s", x.raw)
		}
		for _, k := range []string{"entered", "sent", "delivered", "opened", "clicked", "converted", "conversionRate", "interval"} {
			if _, ok := br[k]; !ok {
				t.Fatalf("branch %v lacks %s: %s", br["branch"], k, x.raw)
			}
		}
		e, c := br["entered"].(float64), br["converted"].(float64)
		entered, converted = entered+e, converted+c
		iv := br["interval"].([]any)
		if e > 0 && (br["conversionRate"].(float64) != c/e || iv[0].(float64) > c/e || iv[1].(float64) < c/e) {
			t.Fatalf("branch %v: rate and interval: %s", br["branch"], x.raw)
		}
		if i < 2 && holdout["entered"].(float64) > 0 {
			u, ok := uplift[br["branch"].(string)].(float64)
			if want := br["conversionRate"].(float64) - holdout["conversionRate"].(float64); !ok || u-want > 1e-9 || want-u > 1e-9 {
				t.Fatalf("uplift of %v: %v, want %v", br["branch"], uplift[br["branch"].(string)], want)
			}
		}
	}
	if entered != n || converted != n/2 {
		t.Fatalf("entered %v converted %v, want %d and %d: %s", entered, converted, n, n/2, x.raw)
	}

	// Enrolments show their branch, and the dry run answers it.
	listed := b.expect("GET", "/api/sequences/trial/contacts?limit=100", tok, nil, 200).items()
	for _, it := range listed {
		if br := it.(map[string]any)["branch"]; br != "a" && br != "b" && br != "holdout" {
			t.Fatalf("enrolment branch %v", br)
		}
	}
	seqs := b.expect("GET", "/api/contacts/"+ids[0]+"/sequences", tok, nil, 200).items()
	branchOf := map[string]any{}
	for _, it := range seqs {
		m := it.(map[string]any)
		branchOf[m["sequenceId"].(string)] = m["branch"]
	}
	if branchOf["plain"] != "default" || branchOf["trial"] == nil || branchOf["trial"] == "default" {
		t.Fatalf("contact's enrolments: %v", branchOf)
	}
	dr := b.expect("POST", "/api/sequences/trial/dry-run", tok, map[string]any{"contactId": ids[0]}, 200)
	if dr.body["branch"] != branchOf["trial"] {
		t.Fatalf("dry run branch %v, enrolment's %v", dr.body["branch"], branchOf["trial"])
	}

	// Without a split: one branch, default; without a holdout or goal:
	// null, and no uplift to compute.
	p := b.expect("GET", "/api/sequences/plain/experiment", tok, nil, 200)
	pb := p.body["branches"].([]any)
	if len(pb) != 1 || pb[0].(map[string]any)["branch"] != "default" || pb[0].(map[string]any)["entered"] != float64(n) ||
		p.body["holdout"] != nil || p.body["goal"] != nil || p.body["uplift"].(map[string]any)["default"] != nil {
		t.Fatalf("%s", p.raw)
	}

	// Another tenant: not found, as a missing sequence.
	b.expectError("GET", "/api/sequences/trial/experiment", other, nil, 404, "SEQUENCE_NOT_FOUND")
	b.expectError("GET", "/api/sequences/nope/experiment", tok, nil, 404, "SEQUENCE_NOT_FOUND")
}
