package api

import (
	"testing"
)

// seedRefs inserts a sequence, a template and a segment directly, as their
// own capabilities would.
func seedRefs(t *testing.T, b *bundle, tenant string) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO sequences (tenant_id, id, name, content, trigger_event) VALUES ($1, 'onboarding', 'Onboarding', 'x', 'signed_up')`,
		`INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html) VALUES ($1, 'welcome', 'Welcome', 'Hi', 'x', 'x')`,
		`INSERT INTO segments (tenant_id, id, name, rules) VALUES ($1, 'seg_vip', 'VIP', '{"operator":"and","conditions":[]}')`,
	} {
		if _, err := b.db.Pool.Exec(t.Context(), q, tenant); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCampaignLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_cmp"))
	seedRefs(t, b, "org_cmp")
	r := b.expect("POST", "/api/campaigns", tok, map[string]any{"name": "Launch", "description": "Q3",
		"sequenceIds": []string{"onboarding", "onboarding"}, "templateIds": []string{"welcome"}, "segmentId": "seg_vip",
		"goals": []string{"purchase.completed"}}, 201)
	c := r.body
	id := c["campaignId"].(string)
	if id[:4] != "cmp_" || c["status"] != "draft" || len(c["sequenceIds"].([]any)) != 1 || c["segmentId"] != "seg_vip" {
		t.Fatalf("%s", r.raw)
	}
	if _, ok := c["startedAt"]; ok {
		t.Fatal("a draft has no startedAt")
	}
	a := b.expect("PATCH", "/api/campaigns/"+id, tok, map[string]any{"status": "active"}, 200)
	started := a.body["startedAt"]
	if a.body["status"] != "active" || started == nil {
		t.Fatalf("%s", a.raw)
	}
	b.expect("PATCH", "/api/campaigns/"+id, tok, map[string]any{"status": "paused"}, 200)
	a = b.expect("PATCH", "/api/campaigns/"+id, tok, map[string]any{"status": "active", "goals": []string{"x"}, "name": "Renamed"}, 200)
	if a.body["startedAt"] != started || a.body["name"] != "Renamed" || len(a.body["goals"].([]any)) != 1 || a.body["goals"].([]any)[0] != "x" {
		t.Fatalf("startedAt must be set only on first activation; goals replaced: %s", a.raw)
	}
	// Any status may move to any valid status.
	for _, st := range []string{"archived", "draft", "completed", "active"} {
		b.expect("PATCH", "/api/campaigns/"+id, tok, map[string]any{"status": st}, 200)
	}
	b.expectError("PATCH", "/api/campaigns/"+id, tok, map[string]any{"status": "exploded"}, 400, "VALIDATION_ERROR")
	b.expectError("PATCH", "/api/campaigns/"+id, tok, map[string]any{}, 400, "VALIDATION_ERROR")
	b.expectError("PATCH", "/api/campaigns/"+id, tok, map[string]any{"segmentId": "seg_nope"}, 400, "VALIDATION_ERROR")
	b.expectError("PATCH", "/api/campaigns/cmp_nope", tok, map[string]any{"name": "x"}, 404, "NOT_FOUND")
	g := b.expect("GET", "/api/campaigns/"+id, tok, nil, 200)
	if g.body["segmentId"] != "seg_vip" || g.body["status"] != "active" {
		t.Fatalf("failed PATCHes changed the campaign: %s", g.raw)
	}
	p := b.expect("PATCH", "/api/campaigns/"+id, tok, map[string]any{"segmentId": nil}, 200)
	if p.body["segmentId"] != nil {
		t.Fatalf("%s", p.raw)
	}

	b.expect("DELETE", "/api/campaigns/"+id, tok, nil, 204)
	b.expectError("GET", "/api/campaigns/"+id, tok, nil, 404, "NOT_FOUND")
	b.expectError("DELETE", "/api/campaigns/"+id, tok, nil, 404, "NOT_FOUND")
	var n int
	_ = b.db.Pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM sequences) + (SELECT count(*) FROM templates)`).Scan(&n)
	if n != 2 {
		t.Fatal("deleting a campaign deleted its sequences or templates")
	}
}

func TestCampaignValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_cmpv"))
	seedRefs(t, b, "org_cmpv")
	for field, body := range map[string]map[string]any{
		"name":        {"description": "no name"},
		"sequenceIds": {"name": "x", "sequenceIds": []string{"missing"}},
		"templateIds": {"name": "x", "templateIds": []string{"welcome", "missing"}},
		"segmentId":   {"name": "x", "segmentId": "seg_missing"},
		"goals":       {"name": "x", "goals": "not-an-array"},
	} {
		r := b.expectError("POST", "/api/campaigns", tok, body, 400, "VALIDATION_ERROR")
		if _, ok := r.fields()[field]; !ok {
			t.Errorf("%s: %s", field, r.raw)
		}
	}
	if l := b.expect("GET", "/api/campaigns", tok, nil, 200); len(l.items()) != 0 {
		t.Fatal("invalid campaigns were stored")
	}
}

func TestCampaignAssociationsAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_cmpa"))
	seedRefs(t, b, "org_cmpa")
	id := b.expect("POST", "/api/campaigns", tok, map[string]any{"name": "A"}, 201).body["campaignId"].(string)
	b.expect("POST", "/api/campaigns", tok, map[string]any{"name": "B"}, 201)
	for i := 0; i < 2; i++ {
		r := b.expect("POST", "/api/campaigns/"+id+"/sequences/onboarding", tok, nil, 200)
		if len(r.body["sequenceIds"].([]any)) != 1 {
			t.Fatalf("adding twice must keep one: %s", r.raw)
		}
		r = b.expect("POST", "/api/campaigns/"+id+"/templates/welcome", tok, nil, 200)
		if len(r.body["templateIds"].([]any)) != 1 {
			t.Fatalf("%s", r.raw)
		}
	}
	b.expectError("POST", "/api/campaigns/"+id+"/sequences/nope", tok, nil, 404, "SEQUENCE_NOT_FOUND")
	b.expectError("POST", "/api/campaigns/"+id+"/templates/nope", tok, nil, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("POST", "/api/campaigns/cmp_nope/templates/welcome", tok, nil, 404, "NOT_FOUND")
	b.expectError("DELETE", "/api/campaigns/cmp_nope/sequences/onboarding", tok, nil, 404, "NOT_FOUND")
	r := b.expect("DELETE", "/api/campaigns/"+id+"/sequences/onboarding", tok, nil, 200)
	if len(r.body["sequenceIds"].([]any)) != 0 {
		t.Fatalf("%s", r.raw)
	}
	r = b.expect("DELETE", "/api/campaigns/"+id+"/templates/welcome", tok, nil, 200)
	if len(r.body["templateIds"].([]any)) != 0 {
		t.Fatalf("%s", r.raw)
	}
	b.expect("PATCH", "/api/campaigns/"+id, tok, map[string]any{"status": "active"}, 200)
	if l := b.expect("GET", "/api/campaigns?status=active", tok, nil, 200); len(l.items()) != 1 {
		t.Fatalf("%s", l.raw)
	}
	if l := b.expect("GET", "/api/campaigns?status=draft", tok, nil, 200); len(l.items()) != 1 {
		t.Fatalf("%s", l.raw)
	}
	b.expectError("GET", "/api/campaigns?status=bogus", tok, nil, 400, "VALIDATION_ERROR")
	if all := collect(b, tok, "/api/campaigns?limit=1"); len(all) != 2 || all[0]["name"] != "B" {
		t.Fatalf("%v", all)
	}
}

func TestCampaignTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.apiKey(b.tenant("org_cia"))
	other := b.apiKey(b.tenant("org_cib"))
	seedRefs(t, b, "org_cia")
	id := b.expect("POST", "/api/campaigns", a, map[string]any{"name": "Mine"}, 201).body["campaignId"].(string)
	b.expectError("GET", "/api/campaigns/"+id, other, nil, 404, "NOT_FOUND")
	b.expectError("PATCH", "/api/campaigns/"+id, other, map[string]any{"name": "x"}, 404, "NOT_FOUND")
	b.expectError("DELETE", "/api/campaigns/"+id, other, nil, 404, "NOT_FOUND")
	b.expect("POST", "/api/campaigns/"+id+"/templates/welcome", a, nil, 200)
	b.expect("POST", "/api/campaigns/"+id+"/sequences/onboarding", a, nil, 200)
	for _, p := range []string{"/templates/welcome", "/sequences/onboarding"} {
		b.expectError("POST", "/api/campaigns/"+id+p, other, nil, 404, "NOT_FOUND")
		b.expectError("DELETE", "/api/campaigns/"+id+p, other, nil, 404, "NOT_FOUND")
	}
	if g := b.expect("GET", "/api/campaigns/"+id, a, nil, 200); len(g.body["templateIds"].([]any)) != 1 || len(g.body["sequenceIds"].([]any)) != 1 {
		t.Fatalf("another tenant changed the associations: %s", g.raw)
	}
	if l := b.expect("GET", "/api/campaigns", other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}
	// Another tenant's template or segment cannot be attached.
	oid := b.expect("POST", "/api/campaigns", other, map[string]any{"name": "Theirs"}, 201).body["campaignId"].(string)
	b.expectError("POST", "/api/campaigns/"+oid+"/templates/welcome", other, nil, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("POST", "/api/campaigns/"+oid+"/sequences/onboarding", other, nil, 404, "SEQUENCE_NOT_FOUND")
	b.expectError("POST", "/api/campaigns", other, map[string]any{"name": "x", "segmentId": "seg_vip"}, 400, "VALIDATION_ERROR")
	if g := b.expect("GET", "/api/campaigns/"+id, a, nil, 200); g.body["name"] != "Mine" {
		t.Fatalf("%s", g.raw)
	}
}
