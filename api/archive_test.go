package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"tidings/internal/config"
)

// eventRetentionDays is a tenant setting (1-3650); the archive routes list
// and stream what the retention run archived, for the tenant only, and
// archived events leave the feeds.
func TestEventArchiveRoutes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := setup(t, func(c *config.Config) { c.ArchiveDir = dir })
	org := "org_arch"
	tok := b.apiKey(b.tenant(org))
	if r := b.expect("GET", "/api/tenant", tok, nil, 200); r.body["eventRetentionDays"] != float64(365) {
		t.Fatalf("default retention: %s", r.raw)
	}
	for _, bad := range []any{0, 3651, 1.5, "30", nil} {
		r := b.expectError("PATCH", "/api/tenant", tok, map[string]any{"eventRetentionDays": bad}, 400, "VALIDATION_ERROR")
		if _, ok := r.fields()["eventRetentionDays"]; !ok {
			t.Errorf("%v: %s", bad, r.raw)
		}
	}
	if r := b.expect("PATCH", "/api/tenant", tok, map[string]any{"eventRetentionDays": 30}, 200); r.body["eventRetentionDays"] != float64(30) {
		t.Fatalf("%s", r.raw)
	}
	b.expect("POST", "/api/contacts", tok, map[string]any{"email": "ann@example.com"}, 201)
	b.expect("POST", "/api/events", tok, map[string]any{"email": "ann@example.com", "name": "old.one",
		"properties": map[string]any{"n": 1}, "timestamp": "2020-03-04T05:06:07.089Z"}, 201)
	b.expect("POST", "/api/events", tok, map[string]any{"email": "ann@example.com", "name": "new.one"}, 201)
	if r := b.expect("GET", "/api/events/archive", tok, nil, 200); len(r.items()) != 0 {
		t.Fatalf("%s", r.raw)
	}
	if _, err := b.svc.Archiver.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := b.expect("GET", "/api/events/archive", tok, nil, 200)
	items := l.items()
	if len(items) != 1 {
		t.Fatalf("%s", l.raw)
	}
	m := items[0].(map[string]any)
	if m["month"] != "2020-03" || m["events"] != float64(1) || m["bytes"].(float64) <= 0 {
		t.Fatalf("%s", l.raw)
	}
	g := b.expect("GET", "/api/events/archive/2020-03", tok, nil, 200)
	if ct := g.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(bytes.NewReader(g.raw))
	var lines []map[string]any
	for sc.Scan() {
		var v map[string]any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%v: %s", err, g.raw)
		}
		lines = append(lines, v)
	}
	if len(lines) != 1 || lines[0]["name"] != "old.one" || lines[0]["timestamp"] != "2020-03-04T05:06:07.089Z" ||
		lines[0]["contactId"] == nil || lines[0]["eventId"] == nil || lines[0]["properties"].(map[string]any)["n"] != float64(1) {
		t.Fatalf("%s", g.raw)
	}
	if f := b.expect("GET", "/api/events", tok, nil, 200); len(f.items()) != 1 || f.items()[0].(map[string]any)["name"] != "new.one" {
		t.Fatalf("the feed still shows archived events: %s", f.raw)
	}
	b.expectError("GET", "/api/events/archive/2020-04", tok, nil, 404, "NOT_FOUND")
	b.expectError("GET", "/api/events/archive/2020-3", tok, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/events/archive/2020-13", tok, nil, 400, "VALIDATION_ERROR")

	other := b.apiKey(b.tenant("org_arch2"))
	if r := b.expect("GET", "/api/events/archive", other, nil, 200); len(r.items()) != 0 {
		t.Fatalf("another tenant sees %s", r.raw)
	}
	b.expectError("GET", "/api/events/archive/2020-03", other, nil, 404, "NOT_FOUND")
}
