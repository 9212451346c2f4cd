package api

import (
	"testing"
)

// An A/B broadcast over HTTP: the experiment with its defaults, a bad one
// refused, per-variant figures, recipients with their variant, the winner
// picked by hand once; another tenant's broadcast is not found.
func TestBroadcastExperimentRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_ab"))
	other := b.apiKey(b.tenant("org_ab_other"))
	b.expect("PUT", "/api/templates/news", tok, map[string]any{"name": "News", "subject": "News", "content": "<p>Hello</p>"}, 201)
	seg := b.expect("POST", "/api/segments", tok, map[string]any{"name": "All",
		"rules": map[string]any{"operator": "and", "conditions": []any{map[string]any{"type": "property", "field": "plan", "operator": "equals", "value": "pro"}}}}, 201)
	segID := seg.body["segmentId"].(string)
	for _, email := range []string{"a@example.com", "b@example.com", "c@example.com", "d@example.com", "e@example.com", "f@example.com"} {
		b.expect("PUT", "/api/contacts", tok, map[string]any{"email": email, "properties": map[string]any{"plan": "pro"}}, 201)
		b.expect("POST", "/api/tenant/sandbox-whitelist", tok, map[string]any{"email": email}, 200)
	}
	b.db.Pool.Exec(t.Context(), `UPDATE contacts SET created_at = now() - interval '1 minute'`)
	exp := func(fraction any) map[string]any {
		return map[string]any{"variants": []any{map[string]any{"name": "Plain", "subject": "Hello"},
			map[string]any{"name": "Bold", "subject": "HELLO", "templateId": "news"}},
			"testFraction": fraction, "metric": "clicked", "waitFor": "2h", "autoWinner": false}
	}
	b.expectError("POST", "/api/broadcasts", tok, map[string]any{"name": "x", "templateId": "news", "segmentId": segID,
		"experiment": exp(0.9)}, 400, "VALIDATION_ERROR")
	b.expectError("POST", "/api/broadcasts", tok, map[string]any{"name": "x", "templateId": "news", "segmentId": segID,
		"experiment": map[string]any{"variants": []any{}, "metric": "opened", "waitFor": "1h", "colour": 1}}, 400, "VALIDATION_ERROR")
	c := b.expect("POST", "/api/broadcasts", tok, map[string]any{"name": "AB", "templateId": "news", "segmentId": segID,
		"experiment": exp(0.5)}, 201)
	id := c.body["broadcastId"].(string)
	x := c.body["experiment"].(map[string]any)
	vs := x["variants"].([]any)
	if x["testFraction"] != 0.5 || x["metric"] != "clicked" || x["waitFor"] != "2h" || x["autoWinner"] != false ||
		x["winner"] != nil || len(vs) != 2 || vs[0].(map[string]any)["templateId"] != "news" {
		t.Fatalf("%s", c.raw)
	}
	bold := vs[1].(map[string]any)["variantId"].(string)

	// Another tenant sees and picks nothing.
	b.expectError("GET", "/api/broadcasts/"+id, other, nil, 404, "NOT_FOUND")
	b.expectError("POST", "/api/broadcasts/"+id+"/winner", other, map[string]any{"variantId": bold}, 404, "NOT_FOUND")

	b.expect("POST", "/api/broadcasts/"+id+"/send", tok, nil, 200)
	if err := b.svc.Broadcasts.Start(t.Context(), "org_ab", id); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := b.svc.BroadcastDispatcher.Dispatch(t.Context(), 100); err != nil {
			t.Fatal(err)
		}
	}
	tested := b.sg.Count()
	rs := b.expect("GET", "/api/broadcasts/"+id+"/recipients", tok, nil, 200).items()
	held := 0
	for _, r := range rs {
		if r.(map[string]any)["variantId"] == nil {
			held++
		}
	}
	if len(rs) != 6 || held != 6-tested {
		t.Fatalf("%d recipients, %d without a variant, %d sent", len(rs), held, tested)
	}
	b.expectError("POST", "/api/broadcasts/"+id+"/winner", tok, map[string]any{"variantId": "var_nope"}, 400, "VALIDATION_ERROR")
	b.expectError("POST", "/api/broadcasts/"+id+"/winner", tok, map[string]any{}, 400, "VALIDATION_ERROR")
	w := b.expect("POST", "/api/broadcasts/"+id+"/winner", tok, map[string]any{"variantId": bold}, 200)
	win := w.body["experiment"].(map[string]any)["winner"].(map[string]any)
	if win["variantId"] != bold || win["reason"] != "manual" || win["pickedAt"] == nil {
		t.Fatalf("%s", w.raw)
	}
	b.expectError("POST", "/api/broadcasts/"+id+"/winner", tok, map[string]any{"variantId": bold}, 400, "VALIDATION_ERROR")
	for range 5 {
		if _, err := b.svc.BroadcastDispatcher.Dispatch(t.Context(), 100); err != nil {
			t.Fatal(err)
		}
	}
	g := b.expect("GET", "/api/broadcasts/"+id, tok, nil, 200)
	if g.body["status"] != "sent" || b.sg.Count() != 6 {
		t.Fatalf("%d sent: %s", b.sg.Count(), g.raw)
	}
	var total float64
	for _, v := range g.body["experiment"].(map[string]any)["variants"].([]any) {
		vm := v.(map[string]any)
		total += vm["recipients"].(float64)
		if iv := vm["interval"].([]any); len(iv) != 2 || vm["rate"] == nil {
			t.Fatalf("variant %v", vm)
		}
	}
	if total != 6 {
		t.Fatalf("variants hold %v recipients: %s", total, g.raw)
	}
	for _, r := range b.expect("GET", "/api/broadcasts/"+id+"/recipients", tok, nil, 200).items() {
		if r.(map[string]any)["variantId"] == nil {
			t.Fatalf("recipient without a variant after the pick: %v", r)
		}
	}
}
