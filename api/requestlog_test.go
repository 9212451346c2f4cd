package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"tidings/internal/app"
)

// lockedBuffer is a log destination the test reads while the app writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// requestLines returns the request log's lines, decoded.
func (l *lockedBuffer) requestLines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var lines []map[string]any
	for _, raw := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	return lines
}

// Every request leaves one line with what an operator filters on: status,
// route template, tenant, error code and invalid fields, duration and the
// request id the client got.
func TestRequestLogLine(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	b := setup(t)
	b.app = newApp(t, app.Infra{Config: b.cfg, DB: b.db, Redis: b.rdb, RedisPrefix: b.prefix,
		Log: slog.New(slog.NewJSONHandler(&out, nil))}, Deps{})
	tok := b.tenant("org_log")
	missing := b.expect("GET", "/api/contacts/cnt_missing", tok, nil, http.StatusNotFound)
	b.expectError("POST", "/api/contacts", tok, map[string]any{"emial": "a@example.com"}, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/nowhere", "", nil, 404, "NOT_FOUND")

	lines := out.requestLines(t)
	if len(lines) != 4 {
		t.Fatalf("%d request lines, want 4: %v", len(lines), lines)
	}
	for i, tt := range []struct {
		desc string
		want map[string]any
	}{
		{desc: "provisioning", want: map[string]any{"method": "POST", "path": "/api/tenant", "route": "/api/tenant",
			"status": 201.0, "tenant_id": "org_log"}},
		{desc: "not found, with its code", want: map[string]any{"method": "GET", "path": "/api/contacts/cnt_missing",
			"route": "/api/contacts/:id", "status": 404.0, "tenant_id": "org_log", "code": "CONTACT_NOT_FOUND",
			"request_id": missing.header.Get("X-Request-ID")}},
		{desc: "invalid, with its fields", want: map[string]any{"route": "/api/contacts", "status": 400.0,
			"code": "VALIDATION_ERROR", "fields": "emial"}},
		{desc: "no route, no tenant", want: map[string]any{"path": "/api/nowhere", "route": "unmatched", "status": 404.0,
			"code": "NOT_FOUND", "tenant_id": nil}},
	} {
		got := lines[i]
		for k, v := range tt.want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v (line %v)", tt.desc, k, got[k], v, got)
			}
		}
		if d, ok := got["duration_ms"].(float64); !ok || d <= 0 {
			t.Errorf("%s: duration_ms %v", tt.desc, got["duration_ms"])
		}
		if id, _ := got["request_id"].(string); id == "" {
			t.Errorf("%s: no request_id", tt.desc)
		}
	}
}

// A tracking path holds a capability: /t/u/<token> unsubscribes for good
// and /t/c/<token> carries its destination. The request log shows the
// route template and a short hash of the token, never the token.
func TestRequestLogHidesTrackingTokens(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	b := setup(t)
	b.app = newApp(t, app.Infra{Config: b.cfg, DB: b.db, Redis: b.rdb, RedisPrefix: b.prefix,
		Log: slog.New(slog.NewJSONHandler(&out, nil))}, Deps{})
	const secret = "U0VDUkVUdG9rZW4tZm9yLWFubi1hdC1leGFtcGxl"
	paths := map[string]string{
		"/t/u/" + secret:            "/t/u/:token",
		"/t/c/" + secret:            "/t/c/:token",
		"/t/o/" + secret:            "/t/o/:token",
		"/t/u/" + secret + "/extra": "unmatched",
	}
	for p := range paths {
		b.do("GET", p, "", nil)
	}
	b.do("POST", "/t/u/"+secret, "", "")
	lines := out.requestLines(t)
	if len(lines) != len(paths)+1 {
		t.Fatalf("%d request lines, want %d", len(lines), len(paths)+1)
	}
	hashes := map[any]bool{}
	for _, l := range lines {
		raw, _ := json.Marshal(l)
		if strings.Contains(string(raw), secret) || strings.Contains(string(raw), secret[:16]) {
			t.Errorf("the token reached the log: %s", raw)
		}
		if l["path"] != l["route"] && l["route"] != "unmatched" {
			t.Errorf("path %v, want the route template %v", l["path"], l["route"])
		}
		h, _ := l["token_hash"].(string)
		if len(h) != 12 {
			t.Errorf("token_hash %q in %s", h, raw)
		}
		hashes[h] = true
	}
	// One token, one hash (the unmatched path's token is another string).
	if len(hashes) != 2 {
		t.Errorf("%d distinct hashes, want 2: %v", len(hashes), hashes)
	}
}
