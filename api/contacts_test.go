package api

import (
	"fmt"
	"net/url"
	"sync"
	"testing"

	"tidings/internal/config"
)

func TestContactCreateAndGet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_c"))
	r := b.expect("POST", "/api/contacts", tok, map[string]any{"email": "  Ann@Example.COM ", "userId": "u1",
		"properties": map[string]any{"plan": "pro", "seats": 3, "beta": true, "tags": []any{"a", 1, false}}}, 201)
	c := r.body
	if c["email"] != "ann@example.com" || c["userId"] != "u1" || c["subscribed"] != true || c["suppressed"] != false {
		t.Fatalf("%s", r.raw)
	}
	d := c["derived"].(map[string]any)
	if d["totalSends"] != 0.0 || d["totalOpens"] != 0.0 || d["totalClicks"] != 0.0 || d["lastEventAt"] != nil || d["inactiveDays"] != 0.0 {
		t.Fatalf("derived: %v", d)
	}
	id := c["contactId"].(string)
	if id[:4] != "cnt_" {
		t.Fatalf("id %q", id)
	}
	g := b.expect("GET", "/api/contacts/"+id, tok, nil, 200)
	if g.body["properties"].(map[string]any)["seats"] != 3.0 {
		t.Fatalf("%s", g.raw)
	}
	b.expectError("POST", "/api/contacts", tok, map[string]any{"email": "ANN@example.com"}, 409, "CONTACT_EXISTS")
	b.expectError("GET", "/api/contacts/cnt_nope", tok, nil, 404, "CONTACT_NOT_FOUND")

	// Exact lookup by email.
	l := b.expect("GET", "/api/contacts?email="+url.QueryEscape("ANN@example.com"), tok, nil, 200)
	if l.body["contactId"] != id || l.body["derived"] == nil {
		t.Fatalf("lookup: %s", l.raw)
	}
	b.expectError("GET", "/api/contacts?email=nobody@example.com", tok, nil, 404, "CONTACT_NOT_FOUND")
	// A plus in the address, encoded or not.
	plus := b.expect("POST", "/api/contacts", tok, map[string]any{"email": "ann+news@example.com"}, 201).body["contactId"]
	for _, q := range []string{"email=ann%2Bnews@example.com", "email=ann+news@example.com", "limit=5&email=ann+news%40example.com"} {
		if l := b.expect("GET", "/api/contacts?"+q, tok, nil, 200); l.body["contactId"] != plus {
			t.Fatalf("%s: %s", q, l.raw)
		}
	}
}

func TestContactValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_cv"))
	tests := []struct {
		desc  string
		body  any
		field string
	}{
		{"no email", map[string]any{"userId": "x"}, "email"},
		{"bad email", map[string]any{"email": "nope"}, "email"},
		{"email not a string", map[string]any{"email": 7}, "email"},
		{"nested object", map[string]any{"email": "a@b.co", "properties": map[string]any{"addr": map[string]any{"city": "x"}}}, "properties.addr"},
		{"array of objects", map[string]any{"email": "a@b.co", "properties": map[string]any{"xs": []any{map[string]any{}}}}, "properties.xs"},
		{"properties not an object", map[string]any{"email": "a@b.co", "properties": []any{1}}, "properties"},
		{"subscribed not a bool", map[string]any{"email": "a@b.co", "subscribed": "yes"}, "subscribed"},
	}
	for _, tt := range tests {
		r := b.expectError("POST", "/api/contacts", tok, tt.body, 400, "VALIDATION_ERROR")
		if _, ok := r.fields()[tt.field]; !ok {
			t.Errorf("%s: no details.fields[%q]: %s", tt.desc, tt.field, r.raw)
		}
	}
	if l := b.expect("GET", "/api/contacts", tok, nil, 200); len(l.items()) != 0 {
		t.Fatalf("invalid input created contacts: %s", l.raw)
	}
}

func TestContactConcurrentDuplicateCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_dup"))
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- b.do("POST", "/api/contacts", tok, map[string]any{"email": "same@example.com"}).status
		}()
	}
	wg.Wait()
	close(codes)
	created, conflicts := 0, 0
	for c := range codes {
		switch c {
		case 201:
			created++
		case 409:
			conflicts++
		default:
			t.Fatalf("status %d", c)
		}
	}
	if created != 1 || conflicts != 19 {
		t.Fatalf("created %d conflicts %d", created, conflicts)
	}
	if r := b.expect("GET", "/api/tenant", tok, nil, 200); r.body["contactCount"] != 1.0 {
		t.Fatalf("contactCount %v", r.body["contactCount"])
	}
}

func TestContactUpsertAndMerge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_up"))
	r := b.expect("PUT", "/api/contacts", tok, map[string]any{"email": "u@example.com", "properties": map[string]any{"a": 1, "b": "x"}}, 201)
	if r.body["created"] != true {
		t.Fatalf("%s", r.raw)
	}
	id := r.body["contactId"]
	r = b.expect("PUT", "/api/contacts", tok, map[string]any{"email": "U@example.com", "userId": "ext", "subscribed": false,
		"properties": map[string]any{"b": nil, "c": []any{"x"}}}, 200)
	if r.body["created"] != false || r.body["contactId"] != id || r.body["userId"] != "ext" || r.body["subscribed"] != false {
		t.Fatalf("%s", r.raw)
	}
	props := r.body["properties"].(map[string]any)
	if len(props) != 2 || props["a"] != 1.0 || props["c"].([]any)[0] != "x" {
		t.Fatalf("merge: %v", props)
	}

	// PATCH merges too, null removes, email is immutable, nothing is an error.
	p := b.expect("PATCH", fmt.Sprint("/api/contacts/", id), tok, map[string]any{"properties": map[string]any{"a": nil, "d": true}}, 200)
	props = p.body["properties"].(map[string]any)
	if len(props) != 2 || props["d"] != true || props["c"] == nil {
		t.Fatalf("patch merge: %v", props)
	}
	e := b.expectError("PATCH", fmt.Sprint("/api/contacts/", id), tok, map[string]any{"email": "new@example.com"}, 400, "VALIDATION_ERROR")
	if _, ok := e.fields()["email"]; !ok {
		t.Fatalf("%s", e.raw)
	}
	b.expectError("PATCH", fmt.Sprint("/api/contacts/", id), tok, map[string]any{}, 400, "VALIDATION_ERROR")
	b.expectError("PATCH", fmt.Sprint("/api/contacts/", id), tok, map[string]any{"properties": map[string]any{"o": map[string]any{}}}, 400, "VALIDATION_ERROR")
	b.expectError("PATCH", "/api/contacts/cnt_missing", tok, map[string]any{"subscribed": true}, 404, "CONTACT_NOT_FOUND")
	g := b.expect("GET", fmt.Sprint("/api/contacts/", id), tok, nil, 200)
	if g.body["email"] != "u@example.com" || len(g.body["properties"].(map[string]any)) != 2 {
		t.Fatalf("failed PATCHes changed the contact: %s", g.raw)
	}
	p = b.expect("PATCH", fmt.Sprint("/api/contacts/", id), tok, map[string]any{"userId": nil, "subscribed": true}, 200)
	if p.body["userId"] != nil || p.body["subscribed"] != true {
		t.Fatalf("%s", p.raw)
	}
}

func TestContactListPagination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_page"))
	for i := 0; i < 45; i++ {
		b.expect("POST", "/api/contacts", tok, map[string]any{"email": fmt.Sprintf("p%02d@example.com", i)}, 201)
	}
	seen := map[string]bool{}
	cursor := ""
	var pages []int
	for {
		path := "/api/contacts?limit=20"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r := b.expect("GET", path, tok, nil, 200)
		for _, it := range r.items() {
			m := it.(map[string]any)
			if _, ok := m["derived"]; ok {
				t.Fatal("list items must omit derived")
			}
			if seen[m["contactId"].(string)] {
				t.Fatal("repeated item across pages")
			}
			seen[m["contactId"].(string)] = true
		}
		pages = append(pages, len(r.items()))
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != 45 || fmt.Sprint(pages) != "[20 20 5]" {
		t.Fatalf("pages %v, %d contacts", pages, len(seen))
	}
	first := b.expect("GET", "/api/contacts?limit=1", tok, nil, 200).items()[0].(map[string]any)
	if first["email"] != "p44@example.com" {
		t.Fatalf("newest first: got %v", first["email"])
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "cursor=bogus"} {
		b.expectError("GET", "/api/contacts?"+q, tok, nil, 400, "VALIDATION_ERROR")
	}
}

func TestContactStatsAndDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_stats"))
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, b.expect("POST", "/api/contacts", tok, map[string]any{"email": fmt.Sprintf("s%d@example.com", i)}, 201).body["contactId"].(string))
	}
	if _, err := b.db.Pool.Exec(t.Context(), `UPDATE contacts SET suppressed = true WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(t.Context(), `UPDATE contacts SET created_at = now() - interval '3 days' WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	s := b.expect("GET", "/api/contacts/stats", tok, nil, 200).body
	if s["total"] != 3.0 || s["suppressedCount"] != 1.0 || s["addedLast24h"] != 2.0 || s["addedLast7d"] != 3.0 {
		t.Fatalf("stats %v", s)
	}
	b.expect("POST", "/api/events", tok, map[string]any{"email": "s2@example.com", "name": "x"}, 201)
	b.expect("DELETE", "/api/contacts/"+ids[2], tok, nil, 204)
	b.expectError("DELETE", "/api/contacts/"+ids[2], tok, nil, 404, "CONTACT_NOT_FOUND")
	b.expectError("GET", "/api/contacts/"+ids[2], tok, nil, 404, "CONTACT_NOT_FOUND")
	var n int
	_ = b.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE contact_id = $1`, ids[2]).Scan(&n)
	if n != 0 {
		t.Fatal("events of a deleted contact remain")
	}
	if r := b.expect("GET", "/api/tenant", tok, nil, 200); r.body["contactCount"] != 2.0 {
		t.Fatalf("contactCount %v", r.body["contactCount"])
	}
	// The email is free again.
	b.expect("POST", "/api/contacts", tok, map[string]any{"email": "s2@example.com"}, 201)
}

func TestContactPlanLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.PlanFreeContacts = 3 })
	tok := b.apiKey(b.tenant("org_plan"))
	for i := 0; i < 3; i++ {
		b.expect("POST", "/api/contacts", tok, map[string]any{"email": fmt.Sprintf("l%d@example.com", i)}, 201)
	}
	b.expectError("POST", "/api/contacts", tok, map[string]any{"email": "over@example.com"}, 402, "PLAN_LIMIT_EXCEEDED")
	b.expectError("PUT", "/api/contacts", tok, map[string]any{"email": "over@example.com"}, 402, "PLAN_LIMIT_EXCEEDED")
	// A duplicate is reported as one even at the limit.
	b.expectError("POST", "/api/contacts", tok, map[string]any{"email": "L2@example.com"}, 409, "CONTACT_EXISTS")
	// Upserting an existing contact is not a new one.
	b.expect("PUT", "/api/contacts", tok, map[string]any{"email": "l1@example.com", "properties": map[string]any{"x": 1}}, 200)
	id := b.expect("GET", "/api/contacts?email=l0@example.com", tok, nil, 200).body["contactId"].(string)
	b.expect("DELETE", "/api/contacts/"+id, tok, nil, 204)
	b.expect("POST", "/api/contacts", tok, map[string]any{"email": "over@example.com"}, 201)
}

func TestContactTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.apiKey(b.tenant("org_ca"))
	other := b.apiKey(b.tenant("org_cb"))
	id := b.expect("POST", "/api/contacts", a, map[string]any{"email": "mine@example.com"}, 201).body["contactId"].(string)
	b.expect("POST", "/api/events", a, map[string]any{"email": "mine@example.com", "name": "signed_up"}, 201)
	for _, path := range []string{"", "/sends", "/scheduled", "/sequences", "/segments", "/timeline"} {
		b.expectError("GET", "/api/contacts/"+id+path, other, nil, 404, "CONTACT_NOT_FOUND")
	}
	b.expectError("GET", "/api/events/contacts/"+id, other, nil, 404, "CONTACT_NOT_FOUND")
	b.expectError("PATCH", "/api/contacts/"+id, other, map[string]any{"subscribed": false}, 404, "CONTACT_NOT_FOUND")
	b.expectError("DELETE", "/api/contacts/"+id, other, nil, 404, "CONTACT_NOT_FOUND")
	b.expectError("GET", "/api/contacts?email=mine@example.com", other, nil, 404, "CONTACT_NOT_FOUND")
	b.expectError("POST", "/api/events", other, map[string]any{"email": "mine@example.com", "name": "x"}, 404, "CONTACT_NOT_FOUND")
	if l := b.expect("GET", "/api/contacts", other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}
	if l := b.expect("GET", "/api/events", other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}
	if s := b.expect("GET", "/api/contacts/stats", other, nil, 200); s.body["total"] != 0.0 {
		t.Fatalf("%s", s.raw)
	}
	// The other tenant may use the same email for its own contact, and an
	// upsert of that email creates theirs rather than merging into ours.
	b.expect("PUT", "/api/contacts", other, map[string]any{"email": "mine@example.com", "properties": map[string]any{"who": "b"}}, 201)
	b.expect("POST", "/api/contacts", other, map[string]any{"email": "mine2@example.com"}, 201)
	if g := b.expect("GET", "/api/contacts/"+id, a, nil, 200); g.body["properties"].(map[string]any)["who"] != nil {
		t.Fatalf("another tenant's upsert reached this contact: %s", g.raw)
	}
	g := b.expect("GET", "/api/contacts/"+id, a, nil, 200)
	if g.body["subscribed"] != true {
		t.Fatalf("%s", g.raw)
	}
}

func TestContactSubListsAreEmptyUntilFilled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_sub"))
	id := b.expect("POST", "/api/contacts", tok, map[string]any{"email": "sub@example.com"}, 201).body["contactId"].(string)
	if r := b.expect("GET", "/api/contacts/"+id+"/sends", tok, nil, 200); len(r.items()) != 0 || r.body["nextCursor"] != nil {
		t.Fatalf("%s", r.raw)
	}
	if r := b.expect("GET", "/api/contacts/"+id+"/scheduled", tok, nil, 200); len(r.items()) != 0 || r.body["hasMore"] != false {
		t.Fatalf("%s", r.raw)
	}
	for _, p := range []string{"/sequences", "/segments"} {
		if r := b.expect("GET", "/api/contacts/"+id+p, tok, nil, 200); r.body["items"] == nil || len(r.items()) != 0 {
			t.Fatalf("%s: %s", p, r.raw)
		}
	}
	b.expectError("GET", "/api/contacts/"+id+"/sends?limit=500", tok, nil, 400, "VALIDATION_ERROR")
}
