package api

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"tidings/internal/config"
	"tidings/internal/testenv"
)

const testDKIMSuffix = "dkim.test.example"

// domainSetup is setup with an in-test DNS server as DNS_RESOLVER.
func domainSetup(t *testing.T, opts ...option) (*bundle, *testenv.DNSZone) {
	t.Helper()
	z := testenv.DNS(t)
	opts = append([]option{func(c *config.Config) {
		c.DNSResolver, c.DKIMCNAMESuffix = z.Addr, testDKIMSuffix
	}}, opts...)
	return setup(t, opts...), z
}

// records returns a domain response's dnsRecords.
func records(t *testing.T, r resp) []map[string]any {
	t.Helper()
	raw, ok := r.body["dnsRecords"].([]any)
	if !ok {
		t.Fatalf("no dnsRecords: %s", r.raw)
	}
	out := make([]map[string]any, len(raw))
	for i, x := range raw {
		out[i] = x.(map[string]any)
	}
	return out
}

// publish puts the records of a domain response at the given indexes (0 is
// the verification TXT, 1-3 the DKIM CNAMEs) into the zone.
func publish(t *testing.T, z *testenv.DNSZone, recs []map[string]any, which ...int) {
	t.Helper()
	for _, i := range which {
		r := recs[i]
		z.Publish(t, r["type"].(string), r["name"].(string), r["value"].(string))
	}
}

var timestampRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestDomainCreate(t *testing.T) {
	t.Parallel()
	b, _ := domainSetup(t)
	tok := b.tenant("org_dom")

	r := b.expect("POST", "/api/domains", tok, map[string]any{"domain": " Mail.Example.COM. "}, http.StatusCreated)
	d := r.body
	if d["domain"] != "mail.example.com" || d["status"] != "pending" || d["sendingEnabled"] != false ||
		d["healthStatus"] != "unknown" || d["verifiedAt"] != nil || d["lastCheckedAt"] != nil ||
		!timestampRE.MatchString(d["createdAt"].(string)) {
		t.Fatalf("created: %s", r.raw)
	}
	for _, k := range []string{"verifiedAt", "lastCheckedAt"} {
		if _, ok := d[k]; !ok {
			t.Fatalf("%s must be present (null): %s", k, r.raw)
		}
	}
	dkim, _ := d["dkimTokens"].([]any)
	recs := records(t, r)
	if len(dkim) != 3 || len(recs) != 4 {
		t.Fatalf("want 3 DKIM tokens and 4 records: %s", r.raw)
	}
	txt := recs[0]
	if txt["type"] != "TXT" || txt["name"] != "_tidings.mail.example.com" || txt["purpose"] != "Domain verification" ||
		!strings.HasPrefix(txt["value"].(string), "tidings-verification=") {
		t.Fatalf("verification record: %v", txt)
	}
	for i, tk := range dkim {
		c := recs[i+1]
		if c["type"] != "CNAME" || c["name"] != tk.(string)+"._domainkey.mail.example.com" ||
			c["value"] != tk.(string)+"."+testDKIMSuffix || c["purpose"] != "DKIM" || len(c) != 4 {
			t.Fatalf("DKIM record %d: %v", i, c)
		}
	}

	for _, tc := range []struct {
		desc string
		body any
		msg  string
	}{
		{"missing", map[string]any{}, "is required"},
		{"null", map[string]any{"domain": nil}, "is required"},
		{"wrong type", map[string]any{"domain": 5}, "must be a string"},
		{"not a name", map[string]any{"domain": "not a domain"}, "not a valid domain name"},
		{"one label", map[string]any{"domain": "localhost"}, "two labels"},
		{"IP address", map[string]any{"domain": "10.0.0.1"}, "not an IP address"},
		{"already added, another spelling", map[string]any{"domain": "MAIL.example.com."}, "already been added"},
	} {
		e := b.expectError("POST", "/api/domains", tok, tc.body, 400, "VALIDATION_ERROR")
		got, _ := e.fields()["domain"].([]any)
		if len(got) == 0 || !strings.Contains(got[0].(string), tc.msg) {
			t.Fatalf("%s: want details.fields.domain containing %q: %s", tc.desc, tc.msg, e.raw)
		}
	}
	b.expectError("POST", "/api/domains", tok, "", 400, "VALIDATION_ERROR")

	// An internationalised name is stored in its ASCII form and found by
	// either spelling.
	idn := b.expect("POST", "/api/domains", tok, map[string]any{"domain": "Bücher.example"}, 201)
	if idn.body["domain"] != "xn--bcher-kva.example" {
		t.Fatalf("%s", idn.raw)
	}
	b.expect("GET", "/api/domains/b%C3%BCcher.example", tok, nil, 200)
	b.expect("GET", "/api/domains/xn--bcher-kva.example", tok, nil, 200)
}

func TestDomainGetAndList(t *testing.T) {
	t.Parallel()
	b, _ := domainSetup(t)
	tok := b.tenant("org_dom")
	created := b.expect("POST", "/api/domains", tok, map[string]any{"domain": "example.com"}, 201)
	for _, n := range []string{"b.example", "c.example"} {
		b.expect("POST", "/api/domains", tok, map[string]any{"domain": n}, 201)
	}

	// Any spelling of the name finds the domain: case, trailing dot,
	// percent-encoding.
	for _, p := range []string{"example.com", "EXAMPLE.Com", "example.com.", "example%2Ecom", "%45xample.com"} {
		g := b.expect("GET", "/api/domains/"+p, tok, nil, 200)
		if g.body["domain"] != "example.com" || len(records(t, g)) != 4 ||
			g.body["dnsRecords"].([]any)[0].(map[string]any)["value"] != created.body["dnsRecords"].([]any)[0].(map[string]any)["value"] {
			t.Fatalf("GET %s: %s", p, g.raw)
		}
	}
	for _, p := range []string{"nope.example", "-bad-", "not%20a%20domain", "10.0.0.1"} {
		b.expectError("GET", "/api/domains/"+p, tok, nil, 404, "DOMAIN_NOT_FOUND")
	}

	// Newest first, pages of limit, no dnsRecords in the items.
	l := b.expect("GET", "/api/domains?limit=2", tok, nil, 200)
	items := l.items()
	if len(items) != 2 || items[0].(map[string]any)["domain"] != "c.example" ||
		items[1].(map[string]any)["domain"] != "b.example" {
		t.Fatalf("first page: %s", l.raw)
	}
	for _, it := range items {
		d := it.(map[string]any)
		if _, ok := d["dnsRecords"]; ok {
			t.Fatalf("list items carry no dnsRecords: %s", l.raw)
		}
		if d["status"] != "pending" || d["healthStatus"] != "unknown" || len(d["dkimTokens"].([]any)) != 3 {
			t.Fatalf("list item: %v", d)
		}
	}
	next, _ := l.body["nextCursor"].(string)
	if next == "" {
		t.Fatalf("no nextCursor: %s", l.raw)
	}
	l = b.expect("GET", "/api/domains?limit=2&cursor="+next, tok, nil, 200)
	if len(l.items()) != 1 || l.items()[0].(map[string]any)["domain"] != "example.com" || l.body["nextCursor"] != nil {
		t.Fatalf("last page: %s", l.raw)
	}
	b.expectError("GET", "/api/domains?limit=0", tok, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/domains?limit=101", tok, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/domains?cursor=forged", tok, nil, 400, "VALIDATION_ERROR")
}

// pending → verifying (records missing, named in the message) → verified;
// sending can be enabled only then.
func TestDomainVerifyLifecycle(t *testing.T) {
	t.Parallel()
	b, z := domainSetup(t)
	tok := b.tenant("org_dom")
	created := b.expect("POST", "/api/domains", tok, map[string]any{"domain": "example.com"}, 201)
	recs := records(t, created)

	v := b.expect("POST", "/api/domains/example.com/verify", tok, nil, 200)
	if v.body["status"] != "verifying" || v.body["healthStatus"] != "degraded" || v.body["sendingEnabled"] != false ||
		v.body["verifiedAt"] != nil || v.body["lastCheckedAt"] == nil || len(records(t, v)) != 4 {
		t.Fatalf("first verify: %s", v.raw)
	}
	msg, _ := v.body["message"].(string)
	for _, r := range recs {
		if !strings.Contains(msg, r["name"].(string)) {
			t.Fatalf("message does not name missing %s: %q", r["name"], msg)
		}
	}
	b.expectError("PATCH", "/api/domains/example.com", tok, map[string]any{"sendingEnabled": true}, 422, "DOMAIN_NOT_VERIFIED")

	// Three of four: the message names only the missing CNAME.
	publish(t, z, recs, 0, 1, 2)
	v = b.expect("POST", "/api/domains/EXAMPLE.com./verify", tok, nil, 200)
	msg, _ = v.body["message"].(string)
	if v.body["status"] != "verifying" || !strings.Contains(msg, "CNAME "+recs[3]["name"].(string)) ||
		strings.Contains(msg, recs[0]["name"].(string)) || strings.Contains(msg, recs[1]["name"].(string)) {
		t.Fatalf("second verify: %s", v.raw)
	}
	b.expectError("PATCH", "/api/domains/example.com", tok, map[string]any{"sendingEnabled": true}, 422, "DOMAIN_NOT_VERIFIED")
	// Disabling is allowed in any status.
	if p := b.expect("PATCH", "/api/domains/example.com", tok, map[string]any{"sendingEnabled": false}, 200); p.body["sendingEnabled"] != false {
		t.Fatalf("%s", p.raw)
	}

	publish(t, z, recs, 3)
	v = b.expect("POST", "/api/domains/example.com/verify", tok, nil, 200)
	if v.body["status"] != "verified" || v.body["healthStatus"] != "healthy" || v.body["verifiedAt"] == nil ||
		!strings.Contains(v.body["message"].(string), "verified") {
		t.Fatalf("third verify: %s", v.raw)
	}
	g := b.expect("GET", "/api/domains/example.com", tok, nil, 200)
	if g.body["status"] != "verified" || g.body["verifiedAt"] != v.body["verifiedAt"] || g.body["lastCheckedAt"] != v.body["lastCheckedAt"] {
		t.Fatalf("stored: %s", g.raw)
	}

	p := b.expect("PATCH", "/api/domains/example.com", tok, map[string]any{"sendingEnabled": true}, 200)
	if p.body["sendingEnabled"] != true || p.body["status"] != "verified" || len(records(t, p)) != 4 ||
		p.body["createdAt"] != g.body["createdAt"] {
		t.Fatalf("PATCH answer must be the whole domain: %s", p.raw)
	}
	if g := b.expect("GET", "/api/domains/example.com", tok, nil, 200); g.body["sendingEnabled"] != true {
		t.Fatalf("sendingEnabled not stored: %s", g.raw)
	}
	b.expectError("POST", "/api/domains/nope.example/verify", tok, nil, 404, "DOMAIN_NOT_FOUND")
}

func TestDomainPatchValidation(t *testing.T) {
	t.Parallel()
	b, _ := domainSetup(t)
	tok := b.tenant("org_dom")
	b.expect("POST", "/api/domains", tok, map[string]any{"domain": "example.com"}, 201)

	// An empty PATCH reads as every other empty PATCH does.
	e := b.expectError("PATCH", "/api/domains/example.com", tok, map[string]any{}, 400, "VALIDATION_ERROR")
	if got, _ := e.fields()["body"].([]any); len(got) != 1 || got[0] != "must contain at least one of sendingEnabled, warmup" {
		t.Fatalf("empty PATCH: %s", e.raw)
	}
	for _, body := range []any{map[string]any{"sendingEnabled": nil}, map[string]any{"sendingEnabled": "yes"},
		map[string]any{"sendingEnabled": 1}} {
		e := b.expectError("PATCH", "/api/domains/example.com", tok, body, 400, "VALIDATION_ERROR")
		if _, ok := e.fields()["sendingEnabled"]; !ok {
			t.Fatalf("%v: want details.fields.sendingEnabled: %s", body, e.raw)
		}
	}
	b.expectError("PATCH", "/api/domains/example.com", tok, "", 400, "VALIDATION_ERROR")
	b.expectError("PATCH", "/api/domains/nope.example", tok, map[string]any{"sendingEnabled": false}, 404, "DOMAIN_NOT_FOUND")
	b.expectError("PATCH", "/api/domains/nope.example", tok, map[string]any{"sendingEnabled": true}, 404, "DOMAIN_NOT_FOUND")
}

func TestDomainDelete(t *testing.T) {
	t.Parallel()
	b, _ := domainSetup(t)
	tok := b.tenant("org_dom")
	first := b.expect("POST", "/api/domains", tok, map[string]any{"domain": "example.com"}, 201)

	r := b.expect("DELETE", "/api/domains/Example.COM", tok, nil, 204)
	if len(r.raw) != 0 {
		t.Fatalf("204 with a body: %s", r.raw)
	}
	b.expectError("GET", "/api/domains/example.com", tok, nil, 404, "DOMAIN_NOT_FOUND")
	b.expectError("DELETE", "/api/domains/example.com", tok, nil, 404, "DOMAIN_NOT_FOUND")
	b.expectError("POST", "/api/domains/example.com/verify", tok, nil, 404, "DOMAIN_NOT_FOUND")
	if l := b.expect("GET", "/api/domains", tok, nil, 200); len(l.items()) != 0 {
		t.Fatalf("deleted domain listed: %s", l.raw)
	}
	// Added again, it starts over with new tokens.
	again := b.expect("POST", "/api/domains", tok, map[string]any{"domain": "example.com"}, 201)
	if records(t, again)[0]["value"] == records(t, first)[0]["value"] {
		t.Fatal("a re-added domain kept its old verification token")
	}
}

// A resolver that answers nothing makes verify 503 DNS_UNAVAILABLE and
// stores nothing.
func TestDomainVerifyResolverDown(t *testing.T) {
	t.Parallel()
	b, z := domainSetup(t)
	tok := b.tenant("org_dom")
	b.expect("POST", "/api/domains", tok, map[string]any{"domain": "example.com"}, 201)
	z.SetServFail(true)

	e := b.expectError("POST", "/api/domains/example.com/verify", tok, nil, 503, "DNS_UNAVAILABLE")
	if d := e.body["error"].(map[string]any)["details"].(map[string]any); len(d) != 0 {
		t.Fatalf("5xx details must be empty: %s", e.raw)
	}
	if msg := e.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "try again") {
		t.Fatalf("message: %q", msg)
	}
	g := b.expect("GET", "/api/domains/example.com", tok, nil, 200)
	if g.body["status"] != "pending" || g.body["healthStatus"] != "unknown" || g.body["lastCheckedAt"] != nil {
		t.Fatalf("a check that learnt nothing changed the domain: %s", g.raw)
	}
	// The domain is looked up first: an unknown one is still 404.
	b.expectError("POST", "/api/domains/nope.example/verify", tok, nil, 404, "DOMAIN_NOT_FOUND")
}

// Domains belong to their tenant: another tenant sees none of them, and may
// add the same name with its own tokens and its own verification.
func TestDomainTenantIsolation(t *testing.T) {
	t.Parallel()
	b, z := domainSetup(t)
	a := b.tenant("org_a")
	o := b.tenant("org_b")
	mine := b.expect("POST", "/api/domains", a, map[string]any{"domain": "example.com"}, 201)

	b.expectError("GET", "/api/domains/example.com", o, nil, 404, "DOMAIN_NOT_FOUND")
	b.expectError("PATCH", "/api/domains/example.com", o, map[string]any{"sendingEnabled": false}, 404, "DOMAIN_NOT_FOUND")
	b.expectError("DELETE", "/api/domains/example.com", o, nil, 404, "DOMAIN_NOT_FOUND")
	b.expectError("POST", "/api/domains/example.com/verify", o, nil, 404, "DOMAIN_NOT_FOUND")
	if l := b.expect("GET", "/api/domains", o, nil, 200); len(l.items()) != 0 {
		t.Fatalf("other tenant lists A's domain: %s", l.raw)
	}

	theirs := b.expect("POST", "/api/domains", o, map[string]any{"domain": "EXAMPLE.com"}, 201)
	if records(t, theirs)[0]["value"] == records(t, mine)[0]["value"] {
		t.Fatal("two tenants share a verification token")
	}
	// A publishes its records: A verifies, B does not.
	publish(t, z, records(t, mine), 0, 1, 2, 3)
	if v := b.expect("POST", "/api/domains/example.com/verify", a, nil, 200); v.body["status"] != "verified" {
		t.Fatalf("A: %s", v.raw)
	}
	if v := b.expect("POST", "/api/domains/example.com/verify", o, nil, 200); v.body["status"] != "verifying" {
		t.Fatalf("B verified with A's records: %s", v.raw)
	}
	b.expect("DELETE", "/api/domains/example.com", o, nil, 204)
	if g := b.expect("GET", "/api/domains/example.com", a, nil, 200); g.body["status"] != "verified" {
		t.Fatalf("B's delete touched A's domain: %s", g.raw)
	}
}

// Leaving sandbox end to end: a real provider and a domain verified through
// the API (ADDENDUM section 2).
func TestDomainVerifiedLetsTenantLeaveSandbox(t *testing.T) {
	t.Parallel()
	b, z := domainSetup(t, func(c *config.Config) { c.EmailProvider, c.SendgridAPIKey = "sendgrid", "SG.test" })
	tok := b.tenant("org_live")
	enable := map[string]any{"sendingStatus": "enabled"}
	wantRefused := func(when string) {
		t.Helper()
		e := b.expectError("PATCH", "/api/tenant", tok, enable, 400, "VALIDATION_ERROR")
		if _, ok := e.fields()["sendingStatus"]; !ok {
			t.Fatalf("%s: want details.fields.sendingStatus: %s", when, e.raw)
		}
	}
	wantRefused("no domain")
	d := b.expect("POST", "/api/domains", tok, map[string]any{"domain": "acme.example"}, 201)
	wantRefused("pending domain")
	publish(t, z, records(t, d), 0, 1)
	b.expect("POST", "/api/domains/acme.example/verify", tok, nil, 200)
	wantRefused("verifying domain")

	publish(t, z, records(t, d), 2, 3)
	if v := b.expect("POST", "/api/domains/acme.example/verify", tok, nil, 200); v.body["status"] != "verified" {
		t.Fatalf("%s", v.raw)
	}
	if r := b.expect("PATCH", "/api/tenant", tok, enable, 200); r.body["sendingStatus"] != "enabled" {
		t.Fatalf("%s", r.raw)
	}
}

// A verified domain is not enough without a real provider (outbox is the
// default).
func TestDomainVerifiedWithoutProviderStaysInSandbox(t *testing.T) {
	t.Parallel()
	b, z := domainSetup(t)
	tok := b.tenant("org_dev")
	d := b.expect("POST", "/api/domains", tok, map[string]any{"domain": "acme.example"}, 201)
	publish(t, z, records(t, d), 0, 1, 2, 3)
	if v := b.expect("POST", "/api/domains/acme.example/verify", tok, nil, 200); v.body["status"] != "verified" {
		t.Fatalf("%s", v.raw)
	}
	e := b.expectError("PATCH", "/api/tenant", tok, map[string]any{"sendingStatus": "enabled"}, 400, "VALIDATION_ERROR")
	if got, _ := e.fields()["sendingStatus"].([]any); len(got) == 0 || !strings.Contains(got[0].(string), "provider") {
		t.Fatalf("%s", e.raw)
	}
}

// Warm-up (ADDENDUM 23): PATCH turns it on and sets a schedule; the view
// shows the schedule (the default until one is set), no day before the
// first message, and day 1's limit; a bad schedule changes nothing; another
// tenant cannot touch it.
func TestDomainWarmupPatch(t *testing.T) {
	t.Parallel()
	b, _ := domainSetup(t)
	tok, other := b.tenant("org_warm"), b.tenant("org_warm_other")
	d := b.expect("POST", "/api/domains", tok, map[string]any{"domain": "example.com"}, 201)
	w, _ := d.body["warmup"].(map[string]any)
	if w["enabled"] != false || w["day"] != nil || w["dailyLimit"] != nil || w["sentToday"] != float64(0) ||
		len(w["schedule"].([]any)) != 9 || w["schedule"].([]any)[0] != float64(50) {
		t.Fatalf("new domain's warmup: %s", d.raw)
	}
	for _, body := range []map[string]any{
		{"warmup": map[string]any{}},
		{"warmup": nil},
		{"warmup": map[string]any{"schedule": []int{}}},
		{"warmup": map[string]any{"schedule": []int{100, 50}}},
		{"warmup": map[string]any{"schedule": []int{0, 50}}},
		{"warmup": map[string]any{"schedule": []any{1.5}}},
		{"warmup": map[string]any{"enabled": "yes"}},
		{"warmup": map[string]any{"enabled": true, "speed": 2}},
	} {
		b.expectError("PATCH", "/api/domains/example.com", tok, body, 400, "VALIDATION_ERROR")
	}
	on := b.expect("PATCH", "/api/domains/example.com", tok,
		map[string]any{"warmup": map[string]any{"enabled": true, "schedule": []int{10, 20, 20}}}, 200)
	w, _ = on.body["warmup"].(map[string]any)
	if w["enabled"] != true || w["day"] != nil || w["dailyLimit"] != float64(10) || w["sentToday"] != float64(0) ||
		len(w["schedule"].([]any)) != 3 {
		t.Fatalf("warm-up on: %s", on.raw)
	}
	b.expectError("PATCH", "/api/domains/example.com", other, map[string]any{"warmup": map[string]any{"enabled": false}}, 404, "DOMAIN_NOT_FOUND")
	got := b.expect("GET", "/api/domains/example.com", tok, nil, 200)
	if g, _ := got.body["warmup"].(map[string]any); g["enabled"] != true {
		t.Fatalf("another tenant turned warm-up off: %s", got.raw)
	}
	reset := b.expect("PATCH", "/api/domains/example.com", tok, map[string]any{"warmup": map[string]any{"schedule": nil}}, 200)
	if w, _ := reset.body["warmup"].(map[string]any); len(w["schedule"].([]any)) != 9 || w["dailyLimit"] != float64(50) {
		t.Fatalf("schedule reset: %s", reset.raw)
	}
}
