package api

import (
	"net/url"
	"testing"
)

// The suppression list: a manual add suppresses the contact and cancels
// its pending sends; a contact deleted and created again (or upserted) with
// a listed email is suppressed; removing an email unsuppresses its contact
// and says so on the timeline; list, filter, and another tenant's view.
func TestSuppressionRoutes(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_supp")
	b := f.b
	b.putYAML("/api/sequences/drip", f.key, "text/yaml", "name: D\ntrigger: {event: go}\nsteps: [{delay: 1h}, {send: welcome}]\n", 201)
	f.event("go", nil)
	if len(f.scheduled("status=pending")) != 1 {
		t.Fatal("no pending send")
	}
	r := b.expect("POST", "/api/suppressions", f.key, map[string]any{"email": " ANN@example.com ", "note": "asked by phone"}, 201)
	if r.body["email"] != "ann@example.com" || r.body["reason"] != "manual" || r.body["note"] != "asked by phone" || r.body["sendId"] != nil {
		t.Fatalf("%s", r.raw)
	}
	if c := b.expect("GET", "/api/contacts/"+f.contactID, f.key, nil, 200); c.body["suppressed"] != true {
		t.Fatalf("%s", c.raw)
	}
	if got := f.scheduled("status=cancelled&cancelReason=suppressed"); len(got) != 1 {
		t.Fatalf("pending send not cancelled: %v", got)
	}
	// Again: nothing changes, the first entry comes back.
	if r := b.expect("POST", "/api/suppressions", f.key, map[string]any{"email": "ann@example.com"}, 200); r.body["note"] != "asked by phone" {
		t.Fatalf("%s", r.raw)
	}
	b.expectError("POST", "/api/suppressions", f.key, map[string]any{"email": "not-an-email"}, 400, "VALIDATION_ERROR")
	b.expectError("POST", "/api/suppressions", f.key, map[string]any{"emial": "x@example.com"}, 400, "VALIDATION_ERROR")
	b.expect("POST", "/api/suppressions", f.key, map[string]any{"email": "nobody@example.com"}, 201)

	// Deleted and created again, or upserted: still suppressed.
	b.expect("DELETE", "/api/contacts/"+f.contactID, f.key, nil, 204)
	c := b.expect("POST", "/api/contacts", f.key, map[string]any{"email": "ann@example.com"}, 201)
	if c.body["suppressed"] != true {
		t.Fatalf("re-created: %s", c.raw)
	}
	if u := b.expect("PUT", "/api/contacts", f.key, map[string]any{"email": "nobody@example.com"}, 201); u.body["suppressed"] != true {
		t.Fatalf("upserted: %s", u.raw)
	}
	id := c.body["contactId"].(string)

	l := b.expect("GET", "/api/suppressions?reason=manual", f.key, nil, 200)
	if len(l.items()) != 2 {
		t.Fatalf("%s", l.raw)
	}
	if l := b.expect("GET", "/api/suppressions?reason=complaint", f.key, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}
	b.expectError("GET", "/api/suppressions?reason=spam", f.key, nil, 400, "VALIDATION_ERROR")
	if p := b.expect("GET", "/api/suppressions?limit=1", f.key, nil, 200); len(p.items()) != 1 || p.body["nextCursor"] == nil {
		t.Fatalf("%s", p.raw)
	}

	// Another tenant sees none of it and cannot remove it.
	other := b.apiKey(b.tenant("org_supp2"))
	if l := b.expect("GET", "/api/suppressions", other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}
	b.expectError("DELETE", "/api/suppressions/ann@example.com", other, nil, 404, "NOT_FOUND")

	b.expect("DELETE", "/api/suppressions/"+url.PathEscape("ann@example.com"), f.key, nil, 204)
	b.expectError("DELETE", "/api/suppressions/ann@example.com", f.key, nil, 404, "NOT_FOUND")
	c = b.expect("GET", "/api/contacts/"+id, f.key, nil, 200)
	if c.body["suppressed"] != false {
		t.Fatalf("after removal: %s", c.raw)
	}
	tl := b.expect("GET", "/api/contacts/"+id+"/timeline", f.key, nil, 200)
	found := false
	for _, it := range tl.items() {
		found = found || it.(map[string]any)["type"] == "suppression_removed"
	}
	if !found {
		t.Fatalf("no suppression_removed entry: %s", tl.raw)
	}
}
