package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"regexp"
	"sync"
	"testing"
)

func TestAPIKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("org_keys")
	r := b.expect("POST", "/api/api-keys", tok, map[string]any{"name": "  ci  "}, 201)
	raw := r.body["rawKey"].(string)
	if !regexp.MustCompile(`^tdk_[0-9A-Za-z]{32,}$`).MatchString(raw) {
		t.Fatalf("raw key %q does not look like tdk_<base62>", raw)
	}
	if r.body["keyPrefix"] != raw[:12] || r.body["name"] != "ci" || r.body["keyId"] == "" {
		t.Fatalf("bad create response: %s", r.raw)
	}
	// Only a hash is stored.
	var stored []byte
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT key_hash FROM api_keys`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(raw))
	if !bytes.Equal(stored, sum[:]) || bytes.Contains(stored, []byte(raw)) {
		t.Fatal("stored key is not the SHA-256 of the raw key")
	}
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM api_keys WHERE strpos(row_to_json(api_keys)::text, $1) > 0`, raw).Scan(&n); err != nil || n != 0 {
		t.Fatalf("raw key stored in clear (%d rows, %v)", n, err)
	}

	list := b.expect("GET", "/api/api-keys", raw, nil, 200)
	items := list.items()
	if len(items) != 1 {
		t.Fatalf("list: %s", list.raw)
	}
	item := items[0].(map[string]any)
	if item["status"] != "active" || item["tenantId"] != "org_keys" || item["keyPrefix"] != raw[:12] {
		t.Fatalf("list item: %v", item)
	}
	if _, ok := item["rawKey"]; ok || bytes.Contains(list.raw, []byte(raw)) {
		t.Fatal("list leaks the raw key")
	}

	// API keys may not mint or revoke keys.
	b.expectError("POST", "/api/api-keys", raw, map[string]any{"name": "x"}, 403, "FORBIDDEN")
	b.expectError("DELETE", "/api/api-keys/"+r.body["keyId"].(string), raw, nil, 403, "FORBIDDEN")

	// Revocation takes effect on the next request.
	b.expect("DELETE", "/api/api-keys/"+r.body["keyId"].(string), tok, nil, 204)
	b.expectError("GET", "/api/api-keys", raw, nil, 401, "UNAUTHORIZED")
	list = b.expect("GET", "/api/api-keys", tok, nil, 200)
	if list.items()[0].(map[string]any)["status"] != "revoked" {
		t.Fatalf("revoked key not listed as revoked: %s", list.raw)
	}
	b.expectError("DELETE", "/api/api-keys/key_unknown", tok, nil, 404, "NOT_FOUND")
}

func TestAPIKeyNameValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("org_names")
	for _, body := range []any{map[string]any{}, map[string]any{"name": ""}, map[string]any{"name": "   "},
		map[string]any{"name": string(bytes.Repeat([]byte("n"), 65))}, map[string]any{"name": nil}} {
		e := b.expectError("POST", "/api/api-keys", tok, body, 400, "VALIDATION_ERROR")
		if _, ok := e.fields()["name"]; !ok {
			t.Fatalf("%v: %s", body, e.raw)
		}
	}
	b.expect("POST", "/api/api-keys", tok, map[string]any{"name": string(bytes.Repeat([]byte("é"), 64))}, 201)
	if r := b.expect("GET", "/api/api-keys", tok, nil, 200); len(r.items()) != 1 {
		t.Fatalf("failed creations stored keys: %s", r.raw)
	}
}

func TestAPIKeyLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("org_limit")
	var wg sync.WaitGroup
	statuses := make(chan int, 15)
	for i := 0; i < 15; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses <- b.do("POST", "/api/api-keys", tok, map[string]any{"name": fmt.Sprint("k", i)}).status
		}(i)
	}
	wg.Wait()
	close(statuses)
	created := 0
	for s := range statuses {
		if s == 201 {
			created++
		} else if s != 400 {
			t.Fatalf("unexpected status %d", s)
		}
	}
	if created != 10 {
		t.Fatalf("created %d keys, want exactly 10", created)
	}
	e := b.expectError("POST", "/api/api-keys", tok, map[string]any{"name": "eleventh"}, 400, "VALIDATION_ERROR")
	_ = e
	// Revoking one frees a slot.
	list := b.expect("GET", "/api/api-keys", tok, nil, 200)
	id := list.items()[0].(map[string]any)["keyId"].(string)
	b.expect("DELETE", "/api/api-keys/"+id, tok, nil, 204)
	b.expect("POST", "/api/api-keys", tok, map[string]any{"name": "replacement"}, 201)
}

func TestAPIKeyTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.tenant("org_a")
	other := b.tenant("org_b")
	r := b.expect("POST", "/api/api-keys", a, map[string]any{"name": "a-key"}, 201)
	aKey, aID := r.body["rawKey"].(string), r.body["keyId"].(string)
	bKey := b.apiKey(other)

	if l := b.expect("GET", "/api/api-keys", bKey, nil, 200); len(l.items()) != 1 ||
		l.items()[0].(map[string]any)["tenantId"] != "org_b" {
		t.Fatalf("tenant b sees: %s", l.raw)
	}
	b.expectError("DELETE", "/api/api-keys/"+aID, other, nil, 404, "NOT_FOUND")
	b.expect("GET", "/api/api-keys", aKey, nil, 200) // still valid
	if g := b.expect("GET", "/api/tenant", aKey, nil, 200); g.body["tenantId"] != "org_a" {
		t.Fatalf("key resolved to the wrong tenant: %s", g.raw)
	}
}
