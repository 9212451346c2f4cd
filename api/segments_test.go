package api

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"tidings/internal/config"
)

func rule(field, op string, value any) map[string]any {
	return map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "property", "field": field, "operator": op, "value": value}}}
}

func segRef(id, op string) map[string]any {
	return map[string]any{"operator": "and", "conditions": []any{map[string]any{"type": "segment", "segmentId": id, "operator": op}}}
}

func TestSegmentCreateAndValidate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_seg"))
	r := b.expect("POST", "/api/segments", tok, map[string]any{"name": "Pro", "rules": rule("plan", "equals", "pro")}, 201)
	s := r.body
	if s["segmentId"].(string)[:4] != "seg_" || s["memberCount"] != 0.0 || s["enabled"] != true || s["lastComputedAt"] != nil ||
		len(s["dependsOn"].([]any)) != 0 || len(s["dependedBy"].([]any)) != 0 || s["version"] == nil || s["description"] != nil {
		t.Fatalf("%s", r.raw)
	}
	if _, ok := s["version"].(string); !ok {
		t.Fatal("version must be a string")
	}
	bad := map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "property", "field": "a", "operator": "equals", "value": 1},
		map[string]any{"type": "property", "field": "a", "operator": "equals", "value": 1},
		map[string]any{"type": "property", "field": "b", "operator": "bogus", "value": 1},
	}}
	e := b.expectError("POST", "/api/segments", tok, map[string]any{"name": "Bad", "rules": bad}, 400, "VALIDATION_ERROR")
	if _, ok := e.fields()["rules.conditions[2].operator"]; !ok {
		t.Fatalf("error must name the path of the bad node: %s", e.raw)
	}
	b.expectError("POST", "/api/segments", tok, map[string]any{"rules": rule("a", "exists", nil)}, 400, "VALIDATION_ERROR")
	b.expectError("POST", "/api/segments", tok, map[string]any{"name": "x"}, 400, "VALIDATION_ERROR")
	e = b.expectError("POST", "/api/segments", tok, map[string]any{"name": "x", "rules": segRef("seg_missing", "memberOf")}, 400, "VALIDATION_ERROR")
	if _, ok := e.fields()["rules.conditions[0].segmentId"]; !ok {
		t.Fatalf("an unknown reference must be named by its path: %s", e.raw)
	}
	// jsonb writes 1e300 out in full, so such a value could never be
	// computed: it is refused up front.
	e = b.expectError("POST", "/api/segments", tok, map[string]any{"name": "x", "rules": rule("n", "greaterThan", 1e300)}, 400, "VALIDATION_ERROR")
	if _, ok := e.fields()["rules.conditions[0].value"]; !ok {
		t.Fatalf("%s", e.raw)
	}
	if l := b.expect("GET", "/api/segments", tok, nil, 200); len(l.items()) != 1 {
		t.Fatalf("%s", l.raw)
	}
}

func TestSegmentReferencesAndCycles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_cyc"))
	mk := func(name string, rules map[string]any) string {
		return b.expect("POST", "/api/segments", tok, map[string]any{"name": name, "rules": rules}, 201).body["segmentId"].(string)
	}
	a := mk("A", rule("x", "exists", nil))
	bb := mk("B", segRef(a, "memberOf"))
	c := mk("C", segRef(bb, "notMemberOf"))

	ga := b.expect("GET", "/api/segments/"+a, tok, nil, 200).body
	if fmt.Sprint(ga["dependedBy"]) != fmt.Sprint([]any{bb}) {
		t.Fatalf("dependedBy of A: %v", ga["dependedBy"])
	}
	// The list carries dependedBy too.
	for _, it := range b.expect("GET", "/api/segments", tok, nil, 200).items() {
		seg := it.(map[string]any)
		want := map[string]string{a: fmt.Sprint([]any{bb}), bb: fmt.Sprint([]any{c}), c: fmt.Sprint([]any{})}[seg["segmentId"].(string)]
		if fmt.Sprint(seg["dependedBy"]) != want {
			t.Fatalf("list dependedBy of %s: %v, want %s", seg["segmentId"], seg["dependedBy"], want)
		}
	}
	gc := b.expect("GET", "/api/segments/"+c, tok, nil, 200).body
	if fmt.Sprint(gc["dependsOn"]) != fmt.Sprint([]any{bb}) {
		t.Fatalf("dependsOn of C: %v", gc["dependsOn"])
	}
	// Cycles of length 1, 2 and 3.
	b.expectError("PATCH", "/api/segments/"+a, tok, map[string]any{"rules": segRef(a, "memberOf")}, 422, "CIRCULAR_DEPENDENCY")
	b.expectError("PATCH", "/api/segments/"+a, tok, map[string]any{"rules": segRef(bb, "memberOf")}, 422, "CIRCULAR_DEPENDENCY")
	b.expectError("PATCH", "/api/segments/"+a, tok, map[string]any{"rules": segRef(c, "memberOf")}, 422, "CIRCULAR_DEPENDENCY")
	if g := b.expect("GET", "/api/segments/"+a, tok, nil, 200); len(g.body["dependsOn"].([]any)) != 0 {
		t.Fatalf("rejected PATCH changed the graph: %s", g.raw)
	}
	// Deleting a referenced segment is refused; the leaf of the chain goes.
	b.expectError("DELETE", "/api/segments/"+a, tok, nil, 409, "SEGMENT_REFERENCED")
	b.expectError("DELETE", "/api/segments/"+bb, tok, nil, 409, "SEGMENT_REFERENCED")
	// Re-pointing C releases B.
	b.expect("PATCH", "/api/segments/"+c, tok, map[string]any{"rules": rule("y", "exists", nil)}, 200)
	if g := b.expect("GET", "/api/segments/"+bb, tok, nil, 200); len(g.body["dependedBy"].([]any)) != 0 {
		t.Fatalf("%s", g.raw)
	}
	b.expect("DELETE", "/api/segments/"+bb, tok, nil, 204)
	b.expect("DELETE", "/api/segments/"+a, tok, nil, 204)
	b.expectError("DELETE", "/api/segments/"+a, tok, nil, 404, "SEGMENT_NOT_FOUND")
	b.expectError("GET", "/api/segments/"+a, tok, nil, 404, "SEGMENT_NOT_FOUND")
}

func TestSegmentPatchVersioning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_segv"))
	id := b.expect("POST", "/api/segments", tok, map[string]any{"name": "V", "rules": rule("a", "equals", 1)}, 201).body["segmentId"].(string)
	v1 := b.expect("GET", "/api/segments/"+id, tok, nil, 200).body["version"]
	r := b.expect("PATCH", "/api/segments/"+id, tok, map[string]any{"name": "Renamed", "description": "d", "enabled": false}, 200)
	if r.body["version"] != v1 || r.body["name"] != "Renamed" || r.body["description"] != "d" || r.body["enabled"] != false {
		t.Fatalf("%s", r.raw)
	}
	r = b.expect("PATCH", "/api/segments/"+id, tok, map[string]any{"rules": rule("a", "equals", 1)}, 200)
	if r.body["version"] != v1 {
		t.Fatal("same rules must not change the version")
	}
	r = b.expect("PATCH", "/api/segments/"+id, tok, map[string]any{"rules": rule("a", "equals", 2)}, 200)
	if r.body["version"] == v1 || r.body["lastComputedAt"] != nil {
		t.Fatalf("rules change must bump version and not compute: %s", r.raw)
	}
	b.expectError("PATCH", "/api/segments/"+id, tok, map[string]any{}, 400, "VALIDATION_ERROR")
	b.expectError("PATCH", "/api/segments/seg_nope", tok, map[string]any{"name": "x"}, 404, "SEGMENT_NOT_FOUND")
	// A disabled segment does not compute.
	b.expectError("POST", "/api/segments/"+id+"/compute", tok, nil, 400, "VALIDATION_ERROR")
}

func TestSegmentCompute(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.SegmentComputeEvery = time.Hour })
	tok := b.apiKey(b.tenant("org_comp"))
	for i := 0; i < 10; i++ {
		plan := "free"
		if i < 4 {
			plan = "pro"
		}
		b.expect("POST", "/api/contacts", tok, map[string]any{"email": fmt.Sprintf("m%d@example.com", i),
			"properties": map[string]any{"plan": plan, "n": i}}, 201)
	}
	pro := b.expect("POST", "/api/segments", tok, map[string]any{"name": "Pro", "rules": rule("plan", "equals", "pro")}, 201).body["segmentId"].(string)
	// A nested reference: pro members with n >= 2.
	nested := map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "segment", "segmentId": pro, "operator": "memberOf"},
		map[string]any{"type": "property", "field": "n", "operator": "greaterOrEqual", "value": 2},
	}}
	big := b.expect("POST", "/api/segments", tok, map[string]any{"name": "Big pro", "rules": nested}, 201).body["segmentId"].(string)

	r := b.expect("POST", "/api/segments/"+pro+"/compute", tok, nil, 200)
	if r.body["segmentId"] != pro || r.body["processed"] != 10.0 || r.body["changed"] != 4.0 {
		t.Fatalf("%s", r.raw)
	}
	g := b.expect("GET", "/api/segments/"+pro, tok, nil, 200)
	if g.body["memberCount"] != 4.0 || g.body["lastComputedAt"] == nil {
		t.Fatalf("%s", g.raw)
	}
	// Within the interval: 429 with Retry-After.
	e := b.expectError("POST", "/api/segments/"+pro+"/compute", tok, nil, 429, "RATE_LIMITED")
	if e.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	// That 429 is the segment's, not the request budget's.
	if rem := e.header.Get("X-RateLimit-Remaining"); rem == "" || rem == "0" {
		t.Fatalf("compute 429 shows the request budget as %q", rem)
	}
	// The nested segment evaluates pro's rules, not its stored membership.
	r = b.expect("POST", "/api/segments/"+big+"/compute", tok, nil, 200)
	if r.body["changed"] != 2.0 {
		t.Fatalf("%s", r.raw)
	}
	members := b.expect("GET", "/api/segments/"+big+"/members", tok, nil, 200)
	if len(members.items()) != 2 {
		t.Fatalf("%s", members.raw)
	}
	m := members.items()[0].(map[string]any)
	if m["isMember"] != true || m["computedAt"] == nil || m["version"] == nil || !strings.Contains(fmt.Sprint(m["email"]), "@") {
		t.Fatalf("member %v", m)
	}
	cid := m["contactId"].(string)
	if c := b.expect("GET", "/api/contacts/"+cid, tok, nil, 200); c.body["email"] != m["email"] {
		t.Fatalf("member email %v, contact %v", m["email"], c.body["email"])
	}
	cs := b.expect("GET", "/api/contacts/"+cid+"/segments", tok, nil, 200)
	if len(cs.items()) != 2 || cs.items()[0].(map[string]any)["segmentId"] != big || cs.items()[0].(map[string]any)["memberCount"] != 2.0 ||
		cs.items()[1].(map[string]any)["segmentId"] != pro {
		t.Fatalf("%s", cs.raw)
	}

	// Contacts leave and join: changed counts both.
	b.expect("PATCH", "/api/contacts/"+cid, tok, map[string]any{"properties": map[string]any{"n": 0}}, 200)
	other := b.expect("GET", "/api/contacts?email=m9@example.com", tok, nil, 200).body["contactId"].(string)
	b.expect("PATCH", "/api/contacts/"+other, tok, map[string]any{"properties": map[string]any{"plan": "pro"}}, 200)
	// A compute that does not happen (disabled segment) uses up no interval.
	off := b.expect("POST", "/api/segments", tok, map[string]any{"name": "Off", "enabled": false, "rules": rule("plan", "equals", "pro")}, 201).body["segmentId"].(string)
	b.expectError("POST", "/api/segments/"+off+"/compute", tok, nil, 400, "VALIDATION_ERROR")
	b.expect("PATCH", "/api/segments/"+off, tok, map[string]any{"enabled": true}, 200)
	b.expect("POST", "/api/segments/"+off+"/compute", tok, nil, 200)
	// Let the interval pass.
	b.rdb.Del(t.Context(), b.prefix+"segcompute:org_comp:"+big)
	r = b.expect("POST", "/api/segments/"+big+"/compute", tok, nil, 200)
	if r.body["changed"] != 2.0 {
		t.Fatalf("one left and one joined: %s", r.raw)
	}
	if g := b.expect("GET", "/api/segments/"+big, tok, nil, 200); g.body["memberCount"] != 2.0 {
		t.Fatalf("%s", g.raw)
	}
	b.expectError("POST", "/api/segments/seg_nope/compute", tok, nil, 404, "SEGMENT_NOT_FOUND")
}

func TestSegmentMembersPagination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_mem"))
	const n = 120 // more than the default page of 100
	for i := 0; i < n; i++ {
		b.expect("POST", "/api/contacts", tok, map[string]any{"email": fmt.Sprintf("mp%d@example.com", i), "properties": map[string]any{"in": true}}, 201)
	}
	id := b.expect("POST", "/api/segments", tok, map[string]any{"name": "All", "rules": rule("in", "equals", true)}, 201).body["segmentId"].(string)
	b.expect("POST", "/api/segments/"+id+"/compute", tok, nil, 200)
	var got []string
	cursor := ""
	for {
		p := "/api/segments/" + id + "/members?limit=25"
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		r := b.expect("GET", p, tok, nil, 200)
		for _, it := range r.items() {
			got = append(got, it.(map[string]any)["contactId"].(string))
		}
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != n {
		t.Fatalf("%d members", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Fatal("members must be ordered by contactId")
		}
	}
	if r := b.expect("GET", "/api/segments/"+id+"/members", tok, nil, 200); len(r.items()) != 100 || r.body["nextCursor"] == nil {
		t.Fatalf("default limit is 100: got %d", len(r.items()))
	}
	b.expect("GET", "/api/segments/"+id+"/members?limit=1000", tok, nil, 200)
	b.expectError("GET", "/api/segments/"+id+"/members?limit=1001", tok, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/segments/seg_nope/members", tok, nil, 404, "SEGMENT_NOT_FOUND")
}

func TestSegmentTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.apiKey(b.tenant("org_sia"))
	other := b.apiKey(b.tenant("org_sib"))
	id := b.expect("POST", "/api/segments", a, map[string]any{"name": "Mine", "rules": rule("x", "exists", nil)}, 201).body["segmentId"].(string)
	for _, req := range []struct{ m, p string }{{"GET", ""}, {"DELETE", ""}, {"GET", "/members"}, {"POST", "/compute"}} {
		b.expectError(req.m, "/api/segments/"+id+req.p, other, nil, 404, "SEGMENT_NOT_FOUND")
	}
	b.expectError("PATCH", "/api/segments/"+id, other, map[string]any{"name": "x"}, 404, "SEGMENT_NOT_FOUND")
	// Another tenant's segment cannot be referenced.
	b.expectError("POST", "/api/segments", other, map[string]any{"name": "x", "rules": segRef(id, "memberOf")}, 400, "VALIDATION_ERROR")
	if l := b.expect("GET", "/api/segments", other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}
	b.expect("GET", "/api/segments/"+id, a, nil, 200)
}
