package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgconn"

	"tidings/internal/page"
	"tidings/internal/store"
)

// The fuzzer's four causes of 500 (issue 11), each answered 400
// VALIDATION_ERROR naming what is wrong, on every route that reads it.
func TestHostileInputIsValidationError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("hostile")
	b.expect("POST", "/api/contacts", tok, map[string]any{"email": "a@example.com"}, http.StatusCreated)
	codec, err := page.NewCodec(b.cfg.CursorKey())
	if err != nil {
		t.Fatal(err)
	}
	ancient := codec.Encode(page.Cursor{Time: time.Date(-4714, 11, 1, 0, 0, 0, 0, time.UTC), ID: "cnt_x"})
	late := codec.Encode(page.Cursor{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), ID: "cnt_x"})
	event := func(props string) string {
		return `{"email":"a@example.com","name":"signup","properties":` + props + `}`
	}
	tests := []struct {
		desc, method, path, body string
		field                    string // the field details.fields must name
	}{
		// NUL or invalid UTF-8 in a path id or a filter (was 22021).
		{desc: "NUL contact id", method: "GET", path: "/api/contacts/%00", field: "id"},
		{desc: "invalid UTF-8 segment id", method: "GET", path: "/api/segments/%ff", field: "id"},
		{desc: "NUL in name filter", method: "GET", path: "/api/events?name=%00", field: "name"},
		{desc: "invalid UTF-8 in name filter", method: "GET", path: "/api/events?name=%C3%28", field: "name"},
		{desc: "invalid UTF-8 template id", method: "GET", path: "/api/templates/%ff", field: "id"},
		{desc: "NUL campaign id", method: "PATCH", path: "/api/campaigns/%00", body: `{"name":"x"}`, field: "campaignId"},
		{desc: "invalid UTF-8 whitelist email", method: "DELETE", path: "/api/tenant/sandbox-whitelist/%fe", field: "email"},
		{desc: "invalid UTF-8 campaign status filter", method: "GET", path: "/api/campaigns?status=%ff", field: "status"},
		{desc: "NUL email filter", method: "GET", path: "/api/contacts?email=a%00@example.com", field: "email"},
		{desc: "NUL timeline id", method: "GET", path: "/api/contacts/%00/timeline", field: "id"},
		// Numbers outside PostgreSQL's numeric range, or absurd (was 22003).
		{desc: "contact number overflow", method: "POST", path: "/api/contacts",
			body: `{"email":"b@example.com","properties":{"n":1e131072}}`, field: "properties.n"},
		{desc: "contact number underflow", method: "PUT", path: "/api/contacts",
			body: `{"email":"a@example.com","properties":{"n":1e-16384}}`, field: "properties.n"},
		{desc: "contact number written out 100,000 digits", method: "POST", path: "/api/contacts",
			body: `{"email":"c@example.com","properties":{"n":1e99999}}`, field: "properties.n"},
		{desc: "event number overflow", method: "POST", path: "/api/events", body: event(`{"n":1e131072}`), field: "properties.n"},
		{desc: "event number underflow", method: "POST", path: "/api/events", body: event(`{"n":-1e-16384}`), field: "properties.n"},
		// Lone surrogates (was 22P02 for event properties; silently U+FFFD elsewhere).
		{desc: "event property lone surrogate", method: "POST", path: "/api/events", body: event(`{"k":"\ud800"}`), field: "properties.k"},
		{desc: "event name lone surrogate", method: "POST", path: "/api/events",
			body: `{"email":"a@example.com","name":"sign\udc00up"}`, field: "name"},
		{desc: "event property key lone surrogate", method: "POST", path: "/api/events",
			body: event(`{"\ud800":"x"}`), field: "properties.\uFFFD"},
		{desc: "contact property lone surrogate", method: "POST", path: "/api/contacts",
			body: `{"email":"d@example.com","properties":{"k":"x\ud800"}}`, field: "properties.k"},
		{desc: "contact property raw invalid UTF-8", method: "POST", path: "/api/contacts",
			body: "{\"email\":\"d@example.com\",\"properties\":{\"k\":\"\xff\"}}", field: "properties.k"},
		{desc: "segment name lone surrogate", method: "POST", path: "/api/segments",
			body: `{"name":"\ud800","rules":{"operator":"and","conditions":[]}}`, field: "name"},
		// Well-formed cursors outside the representable range (was 22008).
		{desc: "cursor before 4713 BC", method: "GET", path: "/api/contacts?cursor=" + ancient, field: "cursor"},
		{desc: "cursor after 9999", method: "GET", path: "/api/events?cursor=" + late, field: "cursor"},
		{desc: "cursor before 4713 BC on segments", method: "GET", path: "/api/segments?cursor=" + ancient, field: "cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			var body any
			if tt.body != "" {
				body = tt.body
			}
			r := b.expectError(tt.method, tt.path, tok, body, http.StatusBadRequest, "VALIDATION_ERROR")
			if _, ok := r.fields()[tt.field]; !ok {
				t.Fatalf("details.fields does not name %q: %s", tt.field, r.raw)
			}
		})
	}
}

// Numbers within the limits are stored and come back written out in full,
// never longer than 42 characters.
func TestPropertyNumbersWithinLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("numbers")
	r := b.expect("POST", "/api/contacts", tok,
		`{"email":"n@example.com","properties":{"big":1e19,"fine":1e-20,"max":-99999999999999999999}}`, http.StatusCreated)
	if !strings.Contains(string(r.raw), `"big": 10000000000000000000`) && !strings.Contains(string(r.raw), `"big":10000000000000000000`) {
		t.Fatalf("stored as %s", r.raw)
	}
}

// A data exception that validation missed still answers 400 in the
// envelope (store.Translate maps SQLSTATE class 22), and the log carries
// the SQLSTATE so the gap can be found and closed.
func TestDataExceptionThatEscapesIs400AndLogged(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	s := &Server{log: slog.New(slog.NewTextHandler(&log, nil))}
	app := fiber.New(FiberConfig(s.errorHandler))
	var code string
	app.Get("/x", func(c *fiber.Ctx) error {
		return store.Translate(fmt.Errorf("query: %w", &pgconn.PgError{Code: code, Message: "boom"}))
	})
	for _, code = range []string{"22021", "22003", "22P02", "22008", "22001"} {
		log.Reset()
		res, err := app.Test(httptest.NewRequest("GET", "/x", nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		var body errorBody
		_ = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || body.Error.Code != "VALIDATION_ERROR" || body.Error.Details == nil {
			t.Errorf("%s: %d %+v", code, res.StatusCode, body)
		}
		if !strings.Contains(log.String(), "sqlstate="+code) {
			t.Errorf("%s: log lacks the SQLSTATE: %s", code, log.String())
		}
	}
}

// What is stored is bounded, and a body full of mistakes gets a short
// answer (issue 11: 50,000 empty conditions got a 7 MB 400).
func TestStoredSizesAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("bounds")
	conds := func(n int, cond string) string {
		return `{"name":"s","rules":{"operator":"or","conditions":[` +
			strings.TrimSuffix(strings.Repeat(cond+",", n), ",") + `]}}`
	}
	leaf := `{"type":"property","field":"f","operator":"equals","value":"` + strings.Repeat("x", 4000) + `"}`
	tests := []struct {
		desc, method, path, body, field string
	}{
		{desc: "rules over 64 KiB", method: "POST", path: "/api/segments", body: conds(20, leaf), field: "rules"},
		{desc: "50,000 empty conditions", method: "POST", path: "/api/segments", body: conds(50_000, `{}`)},
		{desc: "template content over 512 KiB", method: "PUT", path: "/api/templates/big",
			body: `{"name":"n","subject":"s","content":"` + strings.Repeat("x", 512<<10+1) + `"}`, field: "content"},
		{desc: "201 event properties", method: "POST", path: "/api/events", field: "properties",
			body: `{"email":"a@example.com","name":"e","properties":{` + manyProps(201) + `}}`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			r := b.expectError(tt.method, tt.path, tok, tt.body, http.StatusBadRequest, "VALIDATION_ERROR")
			if len(r.raw) > 8<<10 {
				t.Fatalf("answer of %d bytes", len(r.raw))
			}
			if len(r.fields()) > 20 {
				t.Fatalf("%d fields listed", len(r.fields()))
			}
			if _, ok := r.fields()[tt.field]; tt.field != "" && !ok {
				t.Fatalf("details.fields does not name %q: %.300s", tt.field, r.raw)
			}
		})
	}
}

func manyProps(n int) string {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"k%d":1`, i)
	}
	return sb.String()
}
