package api

import (
	"context"
	"testing"
	"time"

	"tidings/internal/config"
)

// revokeBehindTheCache marks the key revoked in the database without going
// through the API, so no eviction is sent: an instance that still answers
// 200 afterwards is provably serving the key from its cache. undo restores
// the key.
func revokeBehindTheCache(t *testing.T, b *bundle, raw string) (undo func()) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.db.Pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE key_prefix = $1`, raw[:12]); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := b.db.Pool.Exec(ctx, `UPDATE api_keys SET revoked_at = NULL WHERE key_prefix = $1`, raw[:12]); err != nil {
			t.Fatal(err)
		}
	}
}

// waitUnauthorized polls GET /api/api-keys with key until it is refused and
// returns how long that took, failing after limit.
func waitUnauthorized(t *testing.T, b *bundle, key string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		r := b.do("GET", "/api/api-keys", key, nil)
		if r.status == 401 {
			if r.code() != "UNAUTHORIZED" {
				t.Fatalf("401 with code %q", r.code())
			}
			return time.Since(start)
		}
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.raw)
		}
		if time.Since(start) > limit {
			t.Fatalf("revoked key still accepted after %s", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A revoked key is refused on the very next request by the instance that
// revoked it, and within moments by another instance whose cache holds it:
// the eviction travels through Redis, long before the cache TTL.
func TestRevokedKeyIsRefusedOnEveryInstance(t *testing.T) {
	t.Parallel()
	const ttl = time.Hour // far beyond the test: only the eviction explains a 401
	one := setup(t, func(c *config.Config) { c.APIKeyCacheTTL = ttl })
	two := one.instance(one.prefix, ttl)
	tok := one.tenant("org_revoke")
	r := one.expect("POST", "/api/api-keys", tok, map[string]any{"name": "doomed"}, 201)
	key, keyID := r.body["rawKey"].(string), r.body["keyId"].(string)
	for _, inst := range []*bundle{one, two} {
		inst.expect("GET", "/api/api-keys", key, nil, 200)
	}
	undo := revokeBehindTheCache(t, one, key)
	for _, inst := range []*bundle{one, two} {
		inst.expect("GET", "/api/api-keys", key, nil, 200) // from the cache
	}
	undo()

	one.expect("DELETE", "/api/api-keys/"+keyID, tok, nil, 204)
	one.expectError("GET", "/api/api-keys", key, nil, 401, "UNAUTHORIZED")
	took := waitUnauthorized(t, two, key, 3*time.Second)
	t.Logf("the other instance refused the key %s after the revocation", took)
	one.expectError("GET", "/api/api-keys", key, nil, 401, "UNAUTHORIZED")
}

// An instance that misses the eviction (here: it listens on another
// channel) still refuses a revoked key once its entry expires, at most the
// cache TTL after the revocation.
func TestRevokedKeyIsRefusedWithinTheTTLWhenTheEvictionIsLost(t *testing.T) {
	t.Parallel()
	const ttl = 500 * time.Millisecond
	one := setup(t)
	deaf := one.instance(one.prefix+"deaf:", ttl)
	tok := one.tenant("org_deaf")
	r := one.expect("POST", "/api/api-keys", tok, map[string]any{"name": "doomed"}, 201)
	key, keyID := r.body["rawKey"].(string), r.body["keyId"].(string)
	deaf.expect("GET", "/api/api-keys", key, nil, 200)
	undo := revokeBehindTheCache(t, one, key)
	deaf.expect("GET", "/api/api-keys", key, nil, 200) // from the cache
	undo()

	one.expect("DELETE", "/api/api-keys/"+keyID, tok, nil, 204)
	one.expectError("GET", "/api/api-keys", key, nil, 401, "UNAUTHORIZED")
	// The bound is the TTL; the slack covers scheduling under -race.
	took := waitUnauthorized(t, deaf, key, ttl+time.Second)
	t.Logf("the deaf instance refused the key %s after the revocation", took)
}
