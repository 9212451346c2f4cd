package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"tidings/internal/config"

	"tidings/internal/telemetry/telemetrytest"
)

// metricsToken is the METRICS_TOKEN of the tests that scrape the public
// port.
const metricsToken = "a-metrics-token-of-at-least-32-bytes"

// GET /metrics serves every metric docs/operations.md lists for the api,
// with route templates (never raw paths) as labels: on the admin listener
// without a credential, and on the public port to METRICS_TOKEN.
func TestPrometheusMetricsServesTheDocumentedNames(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.MetricsToken = metricsToken })
	b.expect("GET", "/healthz", "", nil, 200)
	b.expectError("GET", "/api/contacts/cnt_secret_id_in_path", "", nil, 401, "UNAUTHORIZED")
	b.expectError("GET", "/no/such/route/tok_abc", "", nil, 404, "NOT_FOUND")
	r := b.do("GET", "/metrics", metricsToken, nil)
	body := string(r.raw)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s: %s", r.status, r.header.Get("Content-Type"), r.raw)
	}
	admin := httptest.NewRecorder()
	AdminHandler().ServeHTTP(admin, httptest.NewRequest("GET", "/metrics", nil))
	if admin.Code != 200 || !strings.Contains(admin.Body.String(), `route="/api/contacts/:id"`) {
		t.Fatalf("admin listener's /metrics: %d %.200s", admin.Code, admin.Body)
	}
	if missing := telemetrytest.Missing(body, telemetrytest.Documented(t, "api")); len(missing) > 0 {
		t.Fatalf("documented but not served: %v", missing)
	}
	for _, want := range []string{`route="/healthz"`, `route="/api/contacts/:id"`, `route="unmatched"`, `code="401"`} {
		if !strings.Contains(body, want) {
			t.Errorf("no series with %s", want)
		}
	}
	for _, leak := range []string{"cnt_secret_id_in_path", "tok_abc"} {
		if strings.Contains(body, leak) {
			t.Errorf("a raw path reached a label: %s", leak)
		}
	}
}

// /metrics left the public port (ADDENDUM 25): without METRICS_TOKEN, or
// with another bearer, it is a plain 404, as if there were no route.
func TestPublicMetricsNeedTheMetricsToken(t *testing.T) {
	t.Parallel()
	open := setup(t)
	for _, tok := range []string{"", metricsToken} {
		open.expectError("GET", "/metrics", tok, nil, 404, "NOT_FOUND")
	}
	b := setup(t, func(c *config.Config) { c.MetricsToken = metricsToken })
	for _, tok := range []string{"", "another-token-of-at-least-32-bytes!!", metricsToken + "x", b.session("org_m")} {
		b.expectError("GET", "/metrics", tok, nil, 404, "NOT_FOUND")
	}
	if r := b.do("GET", "/metrics", metricsToken, nil); r.status != 200 || !strings.Contains(string(r.raw), "# TYPE") {
		t.Fatalf("with METRICS_TOKEN: %d %.200s", r.status, r.raw)
	}
}
