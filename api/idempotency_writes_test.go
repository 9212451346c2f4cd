package api

import (
	"testing"
)

// Idempotency-Key on every write under /api (ADDENDUM 18): a repeat with
// the same key and request answers the first response without doing it
// again; the same key with another body, or on another route, is 422; a
// failed first attempt is not kept.
func TestIdempotencyKeyOnEveryWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_idem"))
	do := func(method, path, key string, body any) resp {
		t.Helper()
		return b.doKey(method, path, tok, key, body)
	}
	first := do("POST", "/api/contacts", "k-1", map[string]any{"email": "ann@example.com"})
	if first.status != 201 {
		t.Fatalf("%d %s", first.status, first.raw)
	}
	again := do("POST", "/api/contacts", "k-1", map[string]any{"email": "ann@example.com"})
	if again.status != 201 || string(again.raw) != string(first.raw) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %s", again.status, again.raw)
	}
	// Without the key the same request is a duplicate contact: the repeat
	// above did not run it again.
	b.expectError("POST", "/api/contacts", tok, map[string]any{"email": "ann@example.com"}, 409, "CONTACT_EXISTS")
	if r := do("POST", "/api/contacts", "k-1", map[string]any{"email": "bob@example.com"}); r.status != 422 || r.code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("another body: %d %s", r.status, r.raw)
	}
	if r := do("POST", "/api/topics", "k-1", map[string]any{"email": "ann@example.com"}); r.status != 422 {
		t.Fatalf("another route: %d %s", r.status, r.raw)
	}
	// A failed first attempt is not kept: the retry with the key runs.
	if r := do("PUT", "/api/contacts", "k-2", map[string]any{"email": "not-an-email"}); r.status != 400 {
		t.Fatalf("%d", r.status)
	}
	if r := do("PUT", "/api/contacts", "k-2", map[string]any{"email": "not-an-email"}); r.status != 400 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("a failure was replayed: %d", r.status)
	}
	// PATCH too, and a malformed key is refused.
	id := first.body["contactId"].(string)
	p1 := do("PATCH", "/api/contacts/"+id, "k-3", map[string]any{"properties": map[string]any{"n": 1}})
	p2 := do("PATCH", "/api/contacts/"+id, "k-3", map[string]any{"properties": map[string]any{"n": 1}})
	if p1.status != 200 || p2.header.Get("Idempotent-Replayed") != "true" || string(p1.raw) != string(p2.raw) {
		t.Fatalf("PATCH: %d %s / %s", p1.status, p1.raw, p2.raw)
	}
	if r := do("POST", "/api/topics", "bad\x01key", map[string]any{"topicId": "t", "name": "T", "default": "opt_in"}); r.status != 400 {
		t.Fatalf("malformed key: %d", r.status)
	}
	// Keys are per tenant.
	other := b.apiKey(b.tenant("org_idem2"))
	tok = other
	if r := do("POST", "/api/contacts", "k-1", map[string]any{"email": "ann@example.com"}); r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another tenant's key: %d %s", r.status, r.raw)
	}
}
