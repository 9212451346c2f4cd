package api

import (
	"strings"
	"testing"

	"tidings/internal/telemetry/telemetrytest"
)

// GET /metrics serves every metric docs/operations.md lists for the api,
// with route templates (never raw paths) as labels, without a credential.
func TestPrometheusMetricsServesTheDocumentedNames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.expect("GET", "/healthz", "", nil, 200)
	b.expectError("GET", "/api/contacts/cnt_secret_id_in_path", "", nil, 401, "UNAUTHORIZED")
	b.expectError("GET", "/no/such/route/tok_abc", "", nil, 404, "NOT_FOUND")
	r := b.do("GET", "/metrics", "", nil)
	body := string(r.raw)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s: %s", r.status, r.header.Get("Content-Type"), r.raw)
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
