package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"tidings/internal/auth"
	"tidings/internal/config"
)

func TestErrorEnvelopes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("org_env")
	b.app.Get("/boom", func(c *fiber.Ctx) error { panic("secret internal detail") })

	tests := []struct {
		desc         string
		method, path string
		token        string
		body         any
		status       int
		code         string
		field        string
	}{
		{"unknown route", "GET", "/nope", "", nil, 404, "NOT_FOUND", ""},
		{"unknown api route with credential", "GET", "/api/nope", tok, nil, 404, "NOT_FOUND", ""},
		{"wrong method", "PUT", "/api/tenant", tok, nil, 405, "METHOD_NOT_ALLOWED", ""},
		{"malformed JSON", "PATCH", "/api/tenant", tok, `{"name": `, 400, "VALIDATION_ERROR", "body"},
		{"trailing data", "PATCH", "/api/tenant", tok, `{"name": "a"} {}`, 400, "VALIDATION_ERROR", "body"},
		{"not an object", "PATCH", "/api/tenant", tok, `[1,2]`, 400, "VALIDATION_ERROR", "body"},
		{"wrong type", "POST", "/api/api-keys", tok, `{"name": 5}`, 400, "VALIDATION_ERROR", "name"},
		{"wrong type in Opt", "PATCH", "/api/tenant", tok, `{"name": true}`, 400, "VALIDATION_ERROR", "name"},
		{"empty body", "POST", "/api/api-keys", tok, ``, 400, "VALIDATION_ERROR", "body"},
		{"bad enum", "PATCH", "/api/tenant", tok, `{"sendingStatus": "turbo"}`, 400, "VALIDATION_ERROR", "sendingStatus"},
		{"no fields on PATCH", "PATCH", "/api/tenant", tok, `{}`, 400, "VALIDATION_ERROR", "body"},
		{"no fields on contact PATCH", "PATCH", "/api/contacts/cnt_x", tok, `{}`, 400, "VALIDATION_ERROR", "body"},
		{"no fields on segment PATCH", "PATCH", "/api/segments/seg_x", tok, `{}`, 400, "VALIDATION_ERROR", "body"},
		{"no fields on campaign PATCH", "PATCH", "/api/campaigns/cmp_x", tok, `{}`, 400, "VALIDATION_ERROR", "body"},
		{"NUL in a string", "PATCH", "/api/tenant", tok, `{"name": "a\u0000b"}`, 400, "VALIDATION_ERROR", "name"},
		{"NUL deep in an object", "POST", "/api/contacts", tok, `{"email": "n@x.io", "properties": {"tags": ["ok", "b\u0000"]}}`, 400, "VALIDATION_ERROR", "properties.tags[1]"},
		{"panic", "GET", "/boom", "", nil, 500, "INTERNAL_ERROR", ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			b.t = t
			r := b.expectError(tt.method, tt.path, tt.token, tt.body, tt.status, tt.code)
			if strings.HasPrefix(tt.path, "/api") && r.header.Get("X-RateLimit-Limit") == "" {
				t.Errorf("an /api answer without rate limit headers")
			}
			if tt.field != "" {
				if _, ok := r.fields()[tt.field]; !ok {
					t.Fatalf("details.fields.%s missing: %s", tt.field, r.raw)
				}
			}
			if tt.status == 500 {
				if strings.Contains(string(r.raw), "secret") || len(r.body["error"].(map[string]any)["details"].(map[string]any)) != 0 {
					t.Fatalf("500 leaks internals: %s", r.raw)
				}
			}
		})
	}
}

func TestPayloadTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("org_big")
	// fasthttp enforces the limit while reading from a real connection, so
	// this test goes through a listener rather than app.Test.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.Shutdown() })
	// The server answers from the Content-Length header, before the body:
	// read the answer without writing the body, so the test does not race
	// the server closing the connection.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PATCH /api/tenant HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"name\": \"", tok, 1<<20+100)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]map[string]any
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusRequestEntityTooLarge || body["error"]["code"] != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("status %d body %v", res.StatusCode, body)
	}
	if r := b.expect("GET", "/api/tenant", tok, nil, 200); r.body["name"] != "Org org_big" {
		t.Fatalf("oversized PATCH changed the tenant: %s", r.raw)
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.tenant("org_auth")
	// Each token is right but for what its name says: the test's issuer
	// and audience (DASHBOARD_JWT_ISSUER, DASHBOARD_JWT_AUDIENCE) included.
	mint := func(secret string, ttl time.Duration) string {
		tok, _ := auth.MintHS256Claims(secret, testIssuer, testAudience, "u", "org_auth", ttl)
		return tok
	}
	claims := func(c jwt.MapClaims) string {
		c["iss"], c["aud"] = testIssuer, testAudience
		tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(testSecret))
		return tok
	}
	in := time.Now().Add(time.Hour).Unix()
	noIssuer, _ := auth.MintHS256Claims(testSecret, "", testAudience, "u", "org_auth", time.Hour)
	otherAudience, _ := auth.MintHS256Claims(testSecret, testIssuer, "another-app", "u", "org_auth", time.Hour)
	neither, _ := auth.MintHS256(testSecret, "u", "org_auth", time.Hour)
	for desc, tok := range map[string]string{
		"missing": "", "garbage key": "tdk_short", "unknown key": auth.GenerateKey().Raw,
		"expired session": mint(testSecret, -time.Hour), "expired 5s ago": mint(testSecret, -5*time.Second),
		"wrong secret": mint("other-secret", time.Hour), "no org_id": claims(jwt.MapClaims{"sub": "u", "exp": in}),
		"no exp": claims(jwt.MapClaims{"sub": "u", "org_id": "org_auth"}), "no sub": claims(jwt.MapClaims{"org_id": "org_auth", "exp": in}),
		"no issuer": noIssuer, "another audience": otherAudience, "neither issuer nor audience": neither,
		"not a jwt": "a.b.c",
	} {
		r := b.expectError("GET", "/api/tenant", tok, nil, 401, "UNAUTHORIZED")
		if r.header.Get("X-RateLimit-Limit") == "" {
			t.Errorf("%s: 401 without rate limit headers", desc)
		}
	}
	// A scheme other than Bearer is not a credential; the scheme name is
	// case-insensitive.
	valid := b.session("org_auth")
	for hdr, want := range map[string]int{"Basic " + valid: 401, "Token " + valid: 401, "bearer " + valid: 200, "BEARER " + valid: 200} {
		req := httptest.NewRequest("GET", "/api/tenant", nil)
		req.Header.Set("Authorization", hdr)
		res, err := b.app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("Authorization %.12q...: status %d, want %d", hdr, res.StatusCode, want)
		}
	}

	// An organisation without a tenant sees 404 everywhere but provisioning.
	fresh := b.session("org_unprovisioned")
	b.expectError("GET", "/api/tenant", fresh, nil, 404, "NOT_FOUND")
	b.expectError("GET", "/api/api-keys", fresh, nil, 404, "NOT_FOUND")
	b.expectError("POST", "/api/api-keys", fresh, map[string]any{"name": "x"}, 404, "NOT_FOUND")
}

func TestTenantProvisioning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.session("org_acme")
	r := b.expect("POST", "/api/tenant", tok, map[string]any{"name": "Acme"}, 201)
	want := map[string]any{"tenantId": "org_acme", "identityProviderOrgId": "org_acme", "name": "Acme",
		"plan": "free", "sendingStatus": "sandbox", "billingStatus": "none",
		"contactCount": float64(0), "monthlySendCount": float64(0)}
	for k, v := range want {
		if r.body[k] != v {
			t.Errorf("%s = %v, want %v", k, r.body[k], v)
		}
	}
	if wl, ok := r.body["sandboxWhitelist"].([]any); !ok || len(wl) != 0 {
		t.Errorf("sandboxWhitelist = %v", r.body["sandboxWhitelist"])
	}
	for _, k := range []string{"createdAt", "updatedAt"} {
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", r.body[k].(string)); err != nil {
			t.Errorf("%s not ISO 8601 ms UTC: %v", k, r.body[k])
		}
	}
	again := b.expect("POST", "/api/tenant", tok, map[string]any{"name": "Renamed"}, 200)
	if again.body["name"] != "Acme" || again.body["createdAt"] != r.body["createdAt"] {
		t.Fatalf("repeat provisioning changed the tenant: %s", again.raw)
	}
	b.expectError("POST", "/api/tenant", b.session("org_x"), map[string]any{}, 400, "VALIDATION_ERROR")
	b.expectError("POST", "/api/tenant", b.session("org_x"), map[string]any{"name": strings.Repeat("n", 129)}, 400, "VALIDATION_ERROR")
	key := b.apiKey(tok)
	b.expectError("POST", "/api/tenant", key, map[string]any{"name": "x"}, 403, "FORBIDDEN")
	got := b.expect("GET", "/api/tenant", key, nil, 200)
	if got.body["tenantId"] != "org_acme" {
		t.Fatalf("GET tenant with API key: %s", got.raw)
	}
}

func TestTenantUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("org_upd")
	r := b.expect("PATCH", "/api/tenant", tok, map[string]any{"name": "New", "defaultFromAddress": " Hello@Acme.com ",
		"preferredRegion": "eu", "sendingStatus": "paused"}, 200)
	if r.body["name"] != "New" || r.body["defaultFromAddress"] != "hello@acme.com" ||
		r.body["preferredRegion"] != "eu" || r.body["sendingStatus"] != "paused" {
		t.Fatalf("update not applied: %s", r.raw)
	}
	g := b.expect("GET", "/api/tenant", tok, nil, 200)
	if g.body["name"] != "New" {
		t.Fatalf("update not stored: %s", g.raw)
	}
	// Clearing an optional setting removes it from the resource.
	r = b.expect("PATCH", "/api/tenant", tok, map[string]any{"preferredRegion": nil}, 200)
	if _, ok := r.body["preferredRegion"]; ok {
		t.Fatalf("preferredRegion not cleared: %s", r.raw)
	}
	// Leaving sandbox needs a real provider and a verified domain.
	e := b.expectError("PATCH", "/api/tenant", tok, map[string]any{"sendingStatus": "enabled"}, 400, "VALIDATION_ERROR")
	if _, ok := e.fields()["sendingStatus"]; !ok {
		t.Fatalf("no details.fields.sendingStatus: %s", e.raw)
	}
	b.expectError("PATCH", "/api/tenant", tok, map[string]any{"defaultFromAddress": "nope"}, 400, "VALIDATION_ERROR")
	if g := b.expect("GET", "/api/tenant", tok, nil, 200); g.body["sendingStatus"] != "paused" {
		t.Fatalf("failed PATCH changed state: %s", g.raw)
	}
}

func TestLeavingSandboxWithProviderAndVerifiedDomain(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.EmailProvider, c.SendgridAPIKey = "sendgrid", "SG.x" })
	tok := b.tenant("org_live")
	b.expectError("PATCH", "/api/tenant", tok, map[string]any{"sendingStatus": "enabled"}, 400, "VALIDATION_ERROR")
	if _, err := b.db.Pool.Exec(t.Context(), `INSERT INTO domains (tenant_id, domain, status, verification_token, dkim_tokens)
		VALUES ('org_live', 'acme.com', 'verified', 't', '{a,b,c}')`); err != nil {
		t.Fatal(err)
	}
	r := b.expect("PATCH", "/api/tenant", tok, map[string]any{"sendingStatus": "enabled"}, 200)
	if r.body["sendingStatus"] != "enabled" {
		t.Fatalf("%s", r.raw)
	}
}

func TestSandboxWhitelist(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("org_wl")
	r := b.expect("GET", "/api/tenant/sandbox-whitelist", tok, nil, 200)
	if len(r.body["emails"].([]any)) != 0 {
		t.Fatalf("%s", r.raw)
	}
	b.expect("POST", "/api/tenant/sandbox-whitelist", tok, map[string]any{"email": " A+b@Example.com "}, 200)
	r = b.expect("POST", "/api/tenant/sandbox-whitelist", tok, map[string]any{"email": "a+b@example.com"}, 200)
	if got := r.body["emails"].([]any); len(got) != 1 || got[0] != "a+b@example.com" {
		t.Fatalf("duplicate or unnormalised entry: %s", r.raw)
	}
	b.expectError("POST", "/api/tenant/sandbox-whitelist", tok, map[string]any{"email": "not-an-email"}, 400, "VALIDATION_ERROR")
	// "+" in a path is a literal plus; %2B is the same address.
	r = b.expect("DELETE", "/api/tenant/sandbox-whitelist/"+url.PathEscape("a+b@example.com"), tok, nil, 200)
	if len(r.body["emails"].([]any)) != 0 {
		t.Fatalf("not removed: %s", r.raw)
	}
	for i := 0; i < 50; i++ {
		b.expect("POST", "/api/tenant/sandbox-whitelist", tok, map[string]any{"email": "u" + strings.Repeat("x", i) + "@example.com"}, 200)
	}
	e := b.expectError("POST", "/api/tenant/sandbox-whitelist", tok, map[string]any{"email": "one-more@example.com"}, 400, "VALIDATION_ERROR")
	if _, ok := e.fields()["email"]; !ok {
		t.Fatalf("%s", e.raw)
	}
	if r := b.expect("GET", "/api/tenant", tok, nil, 200); len(r.body["sandboxWhitelist"].([]any)) != 50 {
		t.Fatalf("whitelist size %d", len(r.body["sandboxWhitelist"].([]any)))
	}
}
