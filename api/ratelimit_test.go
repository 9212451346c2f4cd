package api

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"tidings/internal/app"
	"tidings/internal/auth"
	"tidings/internal/config"
	"tidings/internal/ratelimit"
	"tidings/internal/testenv"
)

func TestRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.RateLimitPerMinute = 100 })
	tok := b.tenant("org_rl") // request 1
	other := b.tenant("org_rl_other")
	for i := 2; i <= 100; i++ {
		r := b.expect("GET", "/api/tenant", tok, nil, 200)
		if r.header.Get("X-RateLimit-Limit") != "100" || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(100-i) {
			t.Fatalf("request %d: limit %q remaining %q", i, r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Remaining"))
		}
	}
	r := b.expectError("GET", "/api/tenant", tok, nil, 429, "RATE_LIMITED")
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 1 || r.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("Retry-After %q remaining %q", r.header.Get("Retry-After"), r.header.Get("X-RateLimit-Remaining"))
	}
	msg := r.body["error"].(map[string]any)["message"].(string)
	if want := strconv.Itoa(ra) + " seconds"; !strings.Contains(msg, want) {
		t.Fatalf("message %q does not name %q", msg, want)
	}
	// Another tenant has its own budget, and failed authentication does not
	// spend it, even with credentials that name that tenant (a revoked key,
	// a badly signed session).
	b.expect("GET", "/api/tenant", other, nil, 200)                                                          // 2
	revoked := b.apiKey(other)                                                                               // 3
	keyID := b.expect("GET", "/api/api-keys", other, nil, 200).items()[0].(map[string]any)["keyId"].(string) // 4
	b.expect("DELETE", "/api/api-keys/"+keyID, other, nil, 204)                                              // 5
	forged, _ := auth.MintHS256Claims("not-the-secret", testIssuer, testAudience, "u", "org_rl_other", time.Hour)
	for _, bad := range []string{revoked, forged, "tdk_" + "0123456789012345678901234567890123"} {
		for i := 0; i < 3; i++ {
			b.expectError("GET", "/api/tenant", bad, nil, 401, "UNAUTHORIZED")
		}
	}
	if r := b.expect("GET", "/api/tenant", other, nil, 200); r.header.Get("X-RateLimit-Remaining") != "94" {
		t.Fatalf("remaining %q after failed auth, want 94", r.header.Get("X-RateLimit-Remaining"))
	}
}

// Two API instances on one Redis share one budget per tenant.
func TestRateLimitSharedAcrossInstances(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.RateLimitPerMinute = 10 })
	rdb, prefix := testenv.Redis(t)
	mk := func() *bundle {
		app := newApp(t, app.Infra{Config: b.cfg, DB: b.db, Redis: rdb, RedisPrefix: prefix},
			Deps{Limiter: ratelimit.NewPer(rdb, 10, time.Hour, prefix)})
		return &bundle{t: t, app: app, db: b.db, cfg: b.cfg}
	}
	one, two := mk(), mk()
	tok := one.tenant("org_shared")
	for i := 0; i < 9; i++ {
		inst := one
		if i%2 == 0 {
			inst = two
		}
		inst.expect("GET", "/api/tenant", tok, nil, 200)
	}
	two.expectError("GET", "/api/tenant", tok, nil, 429, "RATE_LIMITED")
	one.expectError("GET", "/api/tenant", tok, nil, 429, "RATE_LIMITED")
}

// With leases (a large limit: LeaseSize > 1), the middleware's answers keep
// API.md's semantics over HTTP: one instance counts X-RateLimit-Remaining
// down exactly, two instances together admit the budget and no more (a
// fresh bucket, so no lease was taken before the window), and every
// refusal is 429 RATE_LIMITED with Retry-After.
func TestRateLimitLeasedOverHTTP(t *testing.T) {
	t.Parallel()
	const limit, lease = 40, 5
	b := setup(t, func(c *config.Config) { c.RateLimitPerMinute = limit })
	rdb, prefix := testenv.Redis(t)
	mk := func() *bundle {
		lim := ratelimit.NewPer(rdb, limit, time.Hour, prefix, ratelimit.WithLease(lease, time.Hour))
		app := newApp(t, app.Infra{Config: b.cfg, DB: b.db, Redis: rdb, RedisPrefix: prefix}, Deps{Limiter: lim})
		return &bundle{t: t, app: app, db: b.db, cfg: b.cfg}
	}
	one, two := mk(), mk()
	tok := one.tenant("org_leased") // request 1, on one
	for i := 2; i <= 12; i++ {
		r := one.expect("GET", "/api/tenant", tok, nil, 200)
		if got := r.header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(limit-i) {
			t.Fatalf("request %d on one instance: remaining %q, want %d", i, got, limit-i)
		}
	}
	admitted, refused := 12, 0
	for i := 0; refused < 4 && i < 3*limit; i++ {
		inst := one
		if i%2 == 0 {
			inst = two
		}
		r := inst.do("GET", "/api/tenant", tok, nil)
		switch r.status {
		case 200:
			admitted++
		case 429:
			refused++
			ra, err := strconv.Atoi(r.header.Get("Retry-After"))
			if err != nil || ra < 1 || r.header.Get("X-RateLimit-Remaining") != "0" ||
				r.body["error"].(map[string]any)["code"] != "RATE_LIMITED" {
				t.Fatalf("refusal: %d %s (Retry-After %q)", r.status, r.raw, r.header.Get("Retry-After"))
			}
		default:
			t.Fatalf("request: %d %s", r.status, r.raw)
		}
	}
	if admitted != limit || refused != 4 {
		t.Fatalf("admitted %d and refused %d, want the budget of %d admitted, then refusals", admitted, refused, limit)
	}
}

// Requests under /api without a valid credential are limited per client
// address (ADDENDUM 25): past UNAUTH_RATE_LIMIT_PER_MINUTE they are 429
// RATE_LIMITED with Retry-After instead of 401. A valid credential from
// the same address is not limited by it, and the routes outside /api that
// take no credential, and the API document, never count.
func TestUnauthenticatedRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.UnauthRateLimitPerMinute = 5 })
	tok := b.tenant("org_unauth")
	forged, _ := auth.MintHS256Claims("not-the-secret", testIssuer, testAudience, "u", "org_unauth", time.Hour)
	bad := []string{"", "tdk_" + "0123456789012345678901234567890123", forged, "garbage", "tdk_" + "0123456789012345678901234567890123"}
	for _, cred := range bad {
		b.expectError("GET", "/api/tenant", cred, nil, 401, "UNAUTHORIZED")
	}
	for _, cred := range bad[:2] {
		r := b.expectError("GET", "/api/contacts", cred, nil, 429, "RATE_LIMITED")
		ra, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || ra < 1 || r.header.Get("X-RateLimit-Remaining") != "0" || r.header.Get("X-RateLimit-Limit") != "5" {
			t.Fatalf("Retry-After %q, limit %q, remaining %q", r.header.Get("Retry-After"),
				r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Remaining"))
		}
		if msg := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, strconv.Itoa(ra)+" seconds") {
			t.Fatalf("message %q does not name the seconds", msg)
		}
	}
	for range 3 {
		b.expect("GET", "/api/tenant", tok, nil, 200)
	}
	for range 3 {
		for _, r := range []struct{ method, path string }{{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/api/openapi.json"},
			{"GET", "/docs"}, {"GET", "/t/o/garbage"}, {"GET", "/t/u/garbage"}, {"POST", "/webhooks/sendgrid"}} {
			if got := b.do(r.method, r.path, "", nil); got.status == 429 {
				t.Fatalf("%s %s is limited: %s", r.method, r.path, got.raw)
			}
		}
	}
}

// The address is the key: an IPv6 client is one /64 (one host holds a
// whole /64 and could rotate through it), an IPv4 client its address.
func TestClientKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"203.0.113.7":          "203.0.113.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1": "2001:db8:1:2::/64",
		"::ffff:203.0.113.7":   "203.0.113.7",
		"not an address":       "not an address",
	} {
		if got := clientKey(in); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", in, got, want)
		}
	}
}
