package api

import (
	"strings"
	"testing"
)

// The broadcast routes end to end, in sandbox: the whitelisted member
// receives it, the other is skipped, and every route shows what happened.
func TestBroadcastRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_brd"))
	b.expect("PUT", "/api/templates/news", tok, map[string]any{"name": "News", "subject": "News",
		"content": "<p>Hello</p>"}, 201)
	seg := b.expect("POST", "/api/segments", tok, map[string]any{"name": "Pro",
		"rules": map[string]any{"operator": "and", "conditions": []any{map[string]any{"type": "property", "field": "plan", "operator": "equals", "value": "pro"}}}}, 201)
	segID := seg.body["segmentId"].(string)
	for _, email := range []string{"ann@example.com", "bob@example.com"} {
		b.expect("PUT", "/api/contacts", tok, map[string]any{"email": email, "properties": map[string]any{"plan": "pro"}}, 201)
	}
	b.expect("POST", "/api/tenant/sandbox-whitelist", tok, map[string]any{"email": "ann@example.com"}, 200)
	b.db.Pool.Exec(t.Context(), `UPDATE contacts SET created_at = now() - interval '1 minute'`)

	// Unknown fields, bad times and unknown references are refused.
	r := b.expectError("POST", "/api/broadcasts", tok, map[string]any{"name": "x", "templateId": "news", "segmentId": segID, "sendat": "x"}, 400, "VALIDATION_ERROR")
	if !strings.Contains(string(r.raw), "sendAt") {
		t.Fatalf("no did-you-mean: %s", r.raw)
	}
	b.expectError("POST", "/api/broadcasts", tok, map[string]any{"name": "x", "templateId": "nope", "segmentId": segID}, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("POST", "/api/broadcasts", tok, map[string]any{"name": "x", "templateId": "news", "segmentId": "seg_nope"}, 404, "SEGMENT_NOT_FOUND")
	b.expectError("POST", "/api/broadcasts", tok, map[string]any{"name": "x", "templateId": "news", "segmentId": segID,
		"sendAt": "2030-01-01T09:00:00"}, 400, "VALIDATION_ERROR")

	c := b.expect("POST", "/api/broadcasts", tok, map[string]any{"name": "Launch", "templateId": "news", "segmentId": segID,
		"sendAt": "2030-01-01T09:00:00", "localTime": true}, 201)
	id := c.body["broadcastId"].(string)
	if !strings.HasPrefix(id, "brd_") || c.body["status"] != "draft" || c.body["sendAt"] != "2030-01-01T09:00:00" ||
		c.body["localTime"] != true || c.body["stats"].(map[string]any)["recipients"] != float64(0) {
		t.Fatalf("%s", c.raw)
	}
	b.expect("PATCH", "/api/broadcasts/"+id, tok, map[string]any{"localTime": false, "sendAt": nil}, 200)
	b.expectError("POST", "/api/broadcasts/"+id+"/resume", tok, nil, 400, "VALIDATION_ERROR")
	s := b.expect("POST", "/api/broadcasts/"+id+"/send", tok, nil, 200)
	if s.body["status"] != "sending" || s.body["startedAt"] == nil {
		t.Fatalf("%s", s.raw)
	}
	b.expectError("PATCH", "/api/broadcasts/"+id, tok, map[string]any{"name": "late"}, 400, "VALIDATION_ERROR")
	b.expectError("DELETE", "/api/broadcasts/"+id, tok, nil, 400, "VALIDATION_ERROR")

	// The worker's part: the audience, then the messages.
	if err := b.svc.Broadcasts.Start(t.Context(), "org_brd", id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.BroadcastDispatcher.Dispatch(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	g := b.expect("GET", "/api/broadcasts/"+id, tok, nil, 200)
	st := g.body["stats"].(map[string]any)
	if g.body["status"] != "sent" || st["recipients"] != float64(2) || st["sent"] != float64(1) || st["skipped"] != float64(1) || st["queued"] != float64(0) {
		t.Fatalf("%s", g.raw)
	}
	rs := b.expect("GET", "/api/broadcasts/"+id+"/recipients?status=skipped", tok, nil, 200)
	if items := rs.items(); len(items) != 1 || items[0].(map[string]any)["skipReason"] != "not_whitelisted" ||
		items[0].(map[string]any)["email"] != "bob@example.com" {
		t.Fatalf("%s", rs.raw)
	}
	b.expectError("GET", "/api/broadcasts/"+id+"/recipients?limit=1001", tok, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/broadcasts/"+id+"/recipients?status=lost", tok, nil, 400, "VALIDATION_ERROR")
	sends := b.expect("GET", "/api/sends?broadcastId="+id, tok, nil, 200)
	if items := sends.items(); len(items) != 1 || items[0].(map[string]any)["broadcastId"] != id {
		t.Fatalf("%s", sends.raw)
	}
	if l := b.expect("GET", "/api/broadcasts?status=sent", tok, nil, 200); len(l.items()) != 1 {
		t.Fatalf("%s", l.raw)
	}
	b.expectError("GET", "/api/broadcasts?status=nope", tok, nil, 400, "VALIDATION_ERROR")
	if b.sg.Count() != 1 {
		t.Fatalf("provider took %d", b.sg.Count())
	}

	// Another tenant sees none of it.
	other := b.apiKey(b.tenant("org_brd2"))
	for _, p := range []string{"/api/broadcasts/" + id, "/api/broadcasts/" + id + "/recipients"} {
		b.expectError("GET", p, other, nil, 404, "NOT_FOUND")
	}
	b.expectError("POST", "/api/broadcasts/"+id+"/cancel", other, nil, 404, "NOT_FOUND")
	b.expectError("PATCH", "/api/broadcasts/"+id, other, map[string]any{"name": "x"}, 404, "NOT_FOUND")
	b.expectError("DELETE", "/api/broadcasts/"+id, other, nil, 404, "NOT_FOUND")
	if l := b.expect("GET", "/api/broadcasts", other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}
	if l := b.expect("GET", "/api/sends?broadcastId="+id, other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}

	// A draft is deleted with 204.
	d := b.expect("POST", "/api/broadcasts", tok, map[string]any{"name": "Draft", "templateId": "news", "segmentId": segID}, 201)
	b.expect("DELETE", "/api/broadcasts/"+d.body["broadcastId"].(string), tok, nil, 204)
}

// The tenant's time zone is set with PATCH and always shown.
func TestTenantTimezone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.session("org_tz")
	b.tenant("org_tz")
	if r := b.expect("GET", "/api/tenant", tok, nil, 200); r.body["timezone"] != "UTC" {
		t.Fatalf("%s", r.raw)
	}
	if r := b.expect("PATCH", "/api/tenant", tok, map[string]any{"timezone": "Asia/Tokyo"}, 200); r.body["timezone"] != "Asia/Tokyo" {
		t.Fatalf("%s", r.raw)
	}
	b.expectError("PATCH", "/api/tenant", tok, map[string]any{"timezone": "Mars/Base"}, 400, "VALIDATION_ERROR")
}
