package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"tidings/internal/config"
)

// fuzzMethods and fuzzRoutes are what FuzzAPI picks from: every method the
// API serves and every route of app.go (":p" is replaced by the fuzzed path
// parameter, percent-encoded so that any bytes arrive, NUL and invalid
// UTF-8 included), plus a route that does not exist.
var (
	fuzzMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	fuzzRoutes  = []string{
		"/api/tenant", "/api/tenant/sandbox-whitelist", "/api/tenant/sandbox-whitelist/:p",
		"/api/api-keys", "/api/api-keys/:p",
		"/api/contacts", "/api/contacts/stats", "/api/contacts/:p", "/api/contacts/:p/sends",
		"/api/contacts/:p/scheduled", "/api/contacts/:p/sequences", "/api/contacts/:p/segments",
		"/api/contacts/:p/timeline",
		"/api/events", "/api/events/contacts/:p",
		"/api/templates", "/api/templates/:p", "/api/templates/:p/versions", "/api/templates/:p/preview",
		"/api/segments", "/api/segments/:p", "/api/segments/:p/members", "/api/segments/:p/compute",
		"/api/campaigns", "/api/campaigns/:p", "/api/campaigns/:p/sequences/:p", "/api/campaigns/:p/templates/:p",
		"/api/send", "/api/sends", "/api/sends/:p",
		"/api/domains", "/api/domains/:p", "/api/domains/:p/verify",
		"/api/sequences", "/api/sequences/:p", "/api/sequences/:p/status", "/api/sequences/:p/contacts",
		"/api/sequences/:p/contacts/:p", "/api/sequences/:p/sends", "/api/sequences/:p/dry-run",
		"/api/scheduled", "/api/scheduled/:p",
		"/t/o/:p", "/t/c/:p", "/t/u/:p", "/webhooks/sendgrid",
		"/api/nowhere/:p",
		"/docs", "/docs/assets/:p", "/api/openapi.json",
	}
)

// FuzzAPI sends random requests (method, route, path parameter, query,
// body) to the real app on a test database, as a tenant with a contact,
// and asserts that none answers 5xx, and that every error is the envelope
// of API.md section 7 and small. Seeds are the cases (here and in
// testdata/fuzz/FuzzAPI).
//
//	go test -run '^$' -fuzz FuzzAPI -fuzztime 5m ./api/
func FuzzAPI(f *testing.F) {
	seeds := []struct {
		method, route uint8
		param, query  string
		body          string
	}{
		{0, 7, "\x00", "", ""},              // GET /api/contacts/%00
		{0, 20, "\xff", "", ""},             // GET /api/segments/%ff
		{0, 13, "", "name=%00", ""},         // GET /api/events?name=%00
		{0, 13, "", "name=%ff&limit=5", ""}, // invalid UTF-8 filter
		{1, 5, "", "", `{"email":"n@example.com","properties":{"n":1e131072}}`},
		{2, 5, "", "", `{"email":"n@example.com","properties":{"n":1e-16384}}`},
		{1, 5, "", "", `{"email":"m@example.com","properties":{"n":1e99999}}`},
		{1, 13, "", "", `{"email":"fuzz@example.com","name":"e","properties":{"k":"\ud800"}}`},
		{1, 13, "", "", `{"email":"fuzz@example.com","name":"\udc00","properties":{"\ud800":1}}`},
		{0, 5, "", "cursor=eyJ2IjoxLCJ0IjotOTk5OTk5OTk5OTk5OTk5OTksImkiOiJ4In0", ""},
		{0, 5, "", "limit=0&cursor=%ff", ""},
		{1, 19, "", "", `{"name":"s","rules":{"operator":"and","conditions":[{},{},{}]}}`},
		{1, 19, "", "", `{"name":"s","rules":{"operator":"and","conditions":[{"type":"segment","segmentId":"\u0000","operator":"memberOf"}]}}`},
		{3, 20, "seg_x", "", `{"rules":{"operator":"or","conditions":[{"type":"property","field":"n","operator":"greaterThan","value":1e99}]}}`},
		{2, 16, "t1", "", `{"name":"n","subject":"\ud800","content":"<p>x</p>"}`},
		{1, 23, "", "", `{"name":"c","goals":["\u0000"],"segmentId":"\udfff"}`},
		{0, 12, "fuzz", "from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z", ""},
		{4, 2, "a%40b", "", ""},
		{1, 1, "", "", `{"email":"\u0000@example.com"}`},
		{3, 0, "", "", `{"name":"\ud83d\ude00","preferredRegion":"\udbff"}`},
	}
	for _, s := range seeds {
		f.Add(s.method, s.route, s.param, s.query, []byte(s.body))
	}
	// The routes added since, by name (method index into fuzzMethods).
	for _, s := range []struct {
		method      uint8
		route       string
		param, body string
	}{
		{3, "/api/sequences/:p", "onb", "trigger: {event: \"\\u0080\"}\nsteps: [{send: t}]\n"},
		{3, "/api/sequences/:p", "onb", `{"content":"? ` + strings.Repeat("k", 2000) + `\n: 1\n","name":"n"}`},
		{3, "/api/sequences/:p", "x\x00", `{"content":null,"enabled":"no"}`},
		{1, "/api/sequences/:p/contacts", "onb", `{"contactId":"\u0000"}`},
		{4, "/api/sequences/:p/contacts/:p", "\xff", ""},
		{1, "/api/sequences/:p/dry-run", "onb", `{"contactId":"c","stepId":7}`},
		{0, "/api/sequences/:p/status", "%zz", ""},
		{0, "/api/sequences/:p/sends", "onb", ""},
		{0, "/api/scheduled", "", ""},
		{0, "/api/scheduled/:p", "\x00", ""},
		{1, "/api/domains", "", `{"domain":"` + strings.Repeat("a.", 200) + `com"}`},
		{2, "/api/domains/:p", "ACME.com.", `{"sendingEnabled":null}`},
		{1, "/api/domains/:p/verify", "\xff", ""},
		{1, "/api/send", "", `{"to":"fuzz@example.com","template":"t","variables":{"v":"\ud800"}}`},
		{1, "/api/send", "", `{"to":"a\r\nBcc: x@example.com","template":"\u0000","from":"` + strings.Repeat("f", 400) + `"}`},
		{0, "/api/sends", "", ""},
		{0, "/api/sends/:p", "snd_\x00", ""},
		{1, "/webhooks/sendgrid", "", `[{"event":"delivered","sg_event_id":"e\u0000"}]`},
		{0, "/t/o/:p", "AQEBMAEwHn5fKLpqPYoa5PIUCBLPRw\r", ""},
		{0, "/t/c/:p", strings.Repeat("A", 5000), ""},
		{1, "/t/u/:p", "\x00", "List-Unsubscribe=One-Click"},
		{0, "/t/u/:p", "", ""},
		{0, "/docs/assets/:p", "../app.go", ""},
		{0, "/docs/assets/:p", "redoc.standalone.js\x00", ""},
	} {
		f.Add(s.method, fuzzRoute(f, s.route), s.param, "", []byte(s.body))
	}
	b := setup(f, func(c *config.Config) { c.RateLimitPerMinute = 1 << 30 })
	tok := b.tenant("fuzz")
	b.expect("POST", "/api/contacts", tok, map[string]any{"email": "fuzz@example.com"}, http.StatusCreated)
	f.Fuzz(func(t *testing.T, method, route uint8, param, query string, body []byte) {
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		path := strings.ReplaceAll(fuzzRoutes[int(route)%len(fuzzRoutes)], ":p", url.PathEscape(param))
		if q := fuzzQuery(query); q != "" {
			path += "?" + q
		}
		req, err := http.NewRequest(m, "http://tidings.test"+path, bytes.NewReader(body))
		if err != nil {
			t.Skip(err)
		}
		if len(body) > 0 {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := b.app.Test(req, -1)
		if err != nil && errors.As(err, new(*fasthttp.ErrSmallBuffer)) {
			// A request line or headers beyond fasthttp's 4 KiB read buffer
			// never reach the app: a real server answers 431 through
			// errorHandler (fiber maps ErrSmallBuffer); app.Test returns
			// the error instead.
			return
		}
		if err != nil {
			t.Fatalf("%s %s: %v", m, path, err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 500 {
			t.Fatalf("%s %s %q: %d %s", m, path, body, res.StatusCode, raw)
		}
		if res.StatusCode < 400 {
			return
		}
		// The open pixel's 404 is the pixel itself (no broken image in an
		// email), by decision; everything else answers the envelope.
		if res.StatusCode == 404 && strings.HasPrefix(path, "/t/o/") && res.Header.Get("Content-Type") == "image/gif" {
			return
		}
		// The unsubscribe page and the click redirect answer a person in a
		// browser: an invalid link is a small HTML page.
		if res.StatusCode == 404 && (strings.HasPrefix(path, "/t/u/") || strings.HasPrefix(path, "/t/c/")) &&
			strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			return
		}
		var env struct {
			Error *struct {
				Code    *string         `json:"code"`
				Message *string         `json:"message"`
				Details *map[string]any `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &env); err != nil || env.Error == nil || env.Error.Code == nil ||
			env.Error.Message == nil || env.Error.Details == nil {
			t.Fatalf("%s %s: %d without the error envelope: %s", m, path, res.StatusCode, raw)
		}
		if len(raw) > 16<<10 {
			t.Fatalf("%s %s: error answer of %d bytes", m, path, len(raw))
		}
	})
}

// fuzzRoute is the index of route in fuzzRoutes.
func fuzzRoute(f *testing.F, route string) uint8 {
	for i, r := range fuzzRoutes {
		if r == route {
			return uint8(i)
		}
	}
	f.Fatalf("no route %s in fuzzRoutes", route)
	return 0
}

// fuzzQuery makes a query string of s: bytes a query may hold stay (so are
// broken escapes like %zz and %f), the rest are percent-encoded.
func fuzzQuery(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~=&%+", c) >= 0 {
			sb.WriteByte(c)
		} else {
			sb.WriteString(url.QueryEscape(string(c)))
		}
	}
	return sb.String()
}
