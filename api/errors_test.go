package api

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"tidings/internal/app"
)

// The request log names the error code, and for a VALIDATION_ERROR the
// invalid fields, beside the status and the tenant (tenant_id, as every
// log line names it).
func TestRequestLogCarriesErrorCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var log bytes.Buffer
	app := newApp(t, app.Infra{Config: b.cfg, DB: b.db, Redis: b.rdb, RedisPrefix: b.prefix,
		Keys: runKeyCache(t, b.db, b.rdb, b.prefix, 0), Log: slog.New(slog.NewTextHandler(&log, nil))}, Deps{})
	logged := &bundle{t: t, app: app, db: b.db, cfg: b.cfg, rdb: b.rdb, prefix: b.prefix}
	tok := b.tenant("org_log")

	tests := []struct {
		desc, method, path string
		body               any
		want               []string
		wantNot            []string
	}{
		{desc: "validation error", method: "PATCH", path: "/api/tenant",
			body: map[string]any{"name": "", "preferredRegion": " "},
			want: []string{"status=400", "code=VALIDATION_ERROR", "fields=name,preferredRegion"}},
		{desc: "not found", method: "GET", path: "/api/contacts/cnt_nope",
			want: []string{"status=404", "code=CONTACT_NOT_FOUND"}, wantNot: []string{"fields="}},
		{desc: "success", method: "GET", path: "/api/tenant",
			want: []string{"status=200", "tenant_id=org_log"}, wantNot: []string{"code=", "fields=", " tenant="}},
	}
	for _, tt := range tests {
		log.Reset()
		logged.do(tt.method, tt.path, tok, tt.body)
		line := log.String()
		for _, w := range tt.want {
			if !strings.Contains(line, w) {
				t.Errorf("%s: log lacks %q: %s", tt.desc, w, line)
			}
		}
		for _, w := range tt.wantNot {
			if strings.Contains(line, w) {
				t.Errorf("%s: log has %q: %s", tt.desc, w, line)
			}
		}
	}
}

// Answers are JSON for programs: <, > and & arrive as written, not as
// \u003c and the like, so template content reads as sent.
func TestJSONIsNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.tenant("org_json")
	b.expect("PUT", "/api/templates/t1", tok, map[string]any{"name": "Fish & chips", "subject": "<Hi>",
		"content": "<p>Salt &amp; vinegar</p>"}, 201)
	r := b.expect("GET", "/api/templates/t1", tok, nil, 200)
	for _, want := range []string{`"name":"Fish & chips"`, `"subject":"<Hi>"`, `<p>Salt &amp; vinegar</p>`} {
		if !strings.Contains(string(r.raw), want) {
			t.Errorf("answer lacks %s: %s", want, r.raw)
		}
	}
	if bytes.Contains(r.raw, []byte(`\u003c`)) || bytes.Contains(r.raw, []byte(`\u0026`)) || bytes.HasSuffix(r.raw, []byte("\n")) {
		t.Fatalf("escaped or not compact: %s", r.raw)
	}
	p := b.expect("POST", "/api/templates/t1/preview", tok, nil, 200)
	if !bytes.Contains(p.raw, []byte(`"html":"<!doctype`)) && !bytes.Contains(p.raw, []byte(`"html":"<!DOCTYPE`)) {
		t.Fatalf("preview html escaped: %.200s", p.raw)
	}
}
