package api

import (
	"fmt"
	"testing"
)

// drainLive runs the segments role's queue until it is empty, as the
// worker does.
func (b *bundle) drainLive() {
	b.t.Helper()
	for {
		n, err := b.svc.Segments.DrainLive(b.t.Context(), 100)
		if err != nil {
			b.t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// Live segments over HTTP: the live field, its rules, explain with its
// errors and tenant isolation, and a sequence started by entering.
func TestLiveSegmentsAndExplain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_live"))
	other := b.apiKey(b.tenant("org_live_other"))

	first := b.expect("POST", "/api/contacts", tok, map[string]any{"email": "first@x.test", "properties": map[string]any{"plan": "pro"}}, 201).body["contactId"].(string)
	plain := b.expect("POST", "/api/segments", tok, map[string]any{"name": "plain", "rules": rule("plan", "equals", "pro")}, 201).body
	if plain["live"] != false {
		t.Fatalf("live defaults to false: %v", plain)
	}
	e := b.expectError("POST", "/api/segments", tok, map[string]any{"name": "over", "live": true,
		"rules": segRef(plain["segmentId"].(string), "memberOf")}, 400, "VALIDATION_ERROR")
	if _, ok := e.fields()["rules.conditions[0].segmentId"]; !ok {
		t.Fatalf("%s", e.raw)
	}
	b.expectError("PATCH", "/api/segments/"+plain["segmentId"].(string), tok, map[string]any{"live": "yes"}, 400, "VALIDATION_ERROR")
	s := b.expect("POST", "/api/segments", tok, map[string]any{"name": "pro", "live": true, "rules": rule("plan", "equals", "pro")}, 201).body
	id := s["segmentId"].(string)
	if s["live"] != true || s["memberCount"] != 1.0 || s["lastComputedAt"] == nil {
		t.Fatalf("made live: %v", s)
	}

	// A sequence started by entering it; the contact already a member is
	// not enrolled.
	b.expect("PUT", "/api/templates/welcome", tok, map[string]any{"name": "W", "subject": "Hi", "content": "<p>hi</p>"}, 201)
	b.expectError("PUT", "/api/sequences/bad", tok, map[string]any{"content": fmt.Sprintf(
		"name: Bad\ntrigger: {segment: %s, on: entered}\nsteps: [{send: welcome}]\n", plain["segmentId"])}, 400, "VALIDATION_ERROR")
	b.expect("PUT", "/api/sequences/winback", tok, map[string]any{"content": fmt.Sprintf(
		"name: Win\ntrigger: {segment: %s, on: entered}\nsteps: [{send: welcome}]\n", id)}, 201)
	// A segment a sequence trigger names stays live.
	b.expectError("PATCH", "/api/segments/"+id, tok, map[string]any{"live": false}, 400, "VALIDATION_ERROR")

	second := b.expect("POST", "/api/contacts", tok, map[string]any{"email": "second@x.test", "properties": map[string]any{"plan": "pro"}}, 201).body["contactId"].(string)
	b.drainLive()
	enrolled := b.expect("GET", "/api/sequences/winback/contacts", tok, nil, 200).items()
	if len(enrolled) != 1 || enrolled[0].(map[string]any)["contactId"] != second {
		t.Fatalf("enrolled %v, want only %s", enrolled, second)
	}
	if g := b.expect("GET", "/api/segments/"+id, tok, nil, 200).body; g["memberCount"] != 2.0 {
		t.Fatalf("memberCount %v", g["memberCount"])
	}
	var types []string
	for _, it := range b.expect("GET", "/api/contacts/"+second+"/timeline", tok, nil, 200).items() {
		types = append(types, it.(map[string]any)["type"].(string))
	}
	if fmt.Sprint(types) == "" || !contains(types, "segment_entered") {
		t.Fatalf("timeline of the new member: %v", types)
	}

	// Explain.
	x := b.expect("GET", "/api/segments/"+id+"/explain?contactId="+first, tok, nil, 200).body
	leaf := x["rules"].(map[string]any)["conditions"].([]any)[0].(map[string]any)
	if x["isMember"] != true || x["storedIsMember"] != true || x["evaluatedAt"] == nil || leaf["actual"] != "pro" || leaf["result"] != true {
		t.Fatalf("explain: %v", x)
	}
	b.expectError("GET", "/api/segments/"+id+"/explain", tok, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/segments/"+id+"/explain?contactId=cnt_nope", tok, nil, 404, "CONTACT_NOT_FOUND")
	b.expectError("GET", "/api/segments/seg_nope/explain?contactId="+first, tok, nil, 404, "SEGMENT_NOT_FOUND")
	// Another tenant sees neither the segment nor the contact.
	b.expectError("GET", "/api/segments/"+id+"/explain?contactId="+first, other, nil, 404, "SEGMENT_NOT_FOUND")
	os := b.expect("POST", "/api/segments", other, map[string]any{"name": "o", "rules": rule("plan", "exists", nil)}, 201).body["segmentId"].(string)
	b.expectError("GET", "/api/segments/"+os+"/explain?contactId="+first, other, nil, 404, "CONTACT_NOT_FOUND")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
