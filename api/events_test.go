package api

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"tidings/internal/events"
	"tidings/internal/store"
	"tidings/queries"
)

func TestEventCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_ev"))
	cid := b.expect("POST", "/api/contacts", tok, map[string]any{"email": "ev@example.com"}, 201).body["contactId"]
	ts := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	r := b.expect("POST", "/api/events", tok, map[string]any{"email": "EV@example.com", "name": "purchase.completed",
		"properties": map[string]any{"amount": 12.5, "sku": "A1", "gift": false, "big": 12345678901234567},
		"timestamp":  ts.Format(time.RFC3339Nano)}, 201)
	ev := r.body["event"].(map[string]any)
	if ev["name"] != "purchase.completed" || ev["timestamp"] != formatTime(ts) || r.body["contactId"] != cid {
		t.Fatalf("%s", r.raw)
	}
	if len(ev["eventId"].(string)) < 5 || ev["eventId"].(string)[:4] != "evt_" {
		t.Fatalf("event id %v", ev["eventId"])
	}
	if seqs, ok := ev["processedSequences"].([]any); !ok || len(seqs) != 0 {
		t.Fatalf("processedSequences %v", ev["processedSequences"])
	}
	if seqs, ok := r.body["triggeredSequences"].([]any); !ok || len(seqs) != 0 {
		t.Fatalf("triggeredSequences %v", r.body["triggeredSequences"])
	}
	if string(r.raw) == "" || !strings.Contains(string(r.raw), "12345678901234567") {
		t.Fatalf("large number not kept exactly: %s", r.raw)
	}
	contact := r.body["contact"].(map[string]any)
	if contact["derived"].(map[string]any)["lastEventAt"] != formatTime(ts) {
		t.Fatalf("lastEventAt not updated: %v", contact["derived"])
	}

	// An older event does not move lastEventAt back; updateContact=false
	// leaves the contact alone and omits it.
	b.expect("POST", "/api/events", tok, map[string]any{"email": "ev@example.com", "name": "old", "timestamp": ts.Add(-24 * time.Hour).Format(time.RFC3339)}, 201)
	r = b.expect("POST", "/api/events", tok, map[string]any{"email": "ev@example.com", "name": "quiet", "updateContact": false}, 201)
	if _, ok := r.body["contact"]; ok {
		t.Fatalf("contact included with updateContact=false: %s", r.raw)
	}
	g := b.expect("GET", fmt.Sprint("/api/contacts/", cid), tok, nil, 200)
	if g.body["derived"].(map[string]any)["lastEventAt"] != formatTime(ts) {
		t.Fatalf("lastEventAt moved: %v", g.body["derived"])
	}
}

func TestEventValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_evv"))
	b.expect("POST", "/api/contacts", tok, map[string]any{"email": "v@example.com"}, 201)
	future := time.Now().Add(10 * time.Minute).UTC().Format(time.RFC3339)
	tests := []struct {
		desc  string
		body  map[string]any
		field string
	}{
		{"no email", map[string]any{"name": "x"}, "email"},
		{"bad email", map[string]any{"email": "x", "name": "x"}, "email"},
		{"no name", map[string]any{"email": "v@example.com"}, "name"},
		{"empty name", map[string]any{"email": "v@example.com", "name": ""}, "name"},
		{"reserved name", map[string]any{"email": "v@example.com", "name": "email.opened"}, "name"},
		{"nested property", map[string]any{"email": "v@example.com", "name": "x", "properties": map[string]any{"o": map[string]any{}}}, "properties.o"},
		{"array property", map[string]any{"email": "v@example.com", "name": "x", "properties": map[string]any{"a": []any{1}}}, "properties.a"},
		{"null property", map[string]any{"email": "v@example.com", "name": "x", "properties": map[string]any{"n": nil}}, "properties.n"},
		{"future timestamp", map[string]any{"email": "v@example.com", "name": "x", "timestamp": future}, "timestamp"},
		{"bad timestamp", map[string]any{"email": "v@example.com", "name": "x", "timestamp": "yesterday"}, "timestamp"},
		{"updateContact not bool", map[string]any{"email": "v@example.com", "name": "x", "updateContact": "no"}, "updateContact"},
	}
	for _, tt := range tests {
		r := b.expectError("POST", "/api/events", tok, tt.body, 400, "VALIDATION_ERROR")
		if _, ok := r.fields()[tt.field]; !ok {
			t.Errorf("%s: no details.fields[%q]: %s", tt.desc, tt.field, r.raw)
		}
	}
	// Slightly ahead is fine.
	soon := time.Now().Add(4 * time.Minute).UTC().Format(time.RFC3339)
	b.expect("POST", "/api/events", tok, map[string]any{"email": "v@example.com", "name": "x", "timestamp": soon}, 201)
	b.expectError("POST", "/api/events", tok, map[string]any{"email": "ghost@example.com", "name": "x"}, 404, "CONTACT_NOT_FOUND")
	if l := b.expect("GET", "/api/contacts", tok, nil, 200); len(l.items()) != 1 {
		t.Fatal("an event created a contact")
	}
	if l := b.expect("GET", "/api/events", tok, nil, 200); len(l.items()) != 1 {
		t.Fatalf("invalid events were stored: %s", l.raw)
	}
}

func TestEventFeeds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_feed"))
	c1 := b.expect("POST", "/api/contacts", tok, map[string]any{"email": "f1@example.com"}, 201).body["contactId"].(string)
	b.expect("POST", "/api/contacts", tok, map[string]any{"email": "f2@example.com"}, 201)
	base := time.Now().Add(-time.Hour)
	for i := 0; i < 25; i++ {
		email, name := "f1@example.com", "page_view"
		if i%5 == 0 {
			email, name = "f2@example.com", "signup"
		}
		b.expect("POST", "/api/events", tok, map[string]any{"email": email, "name": name,
			"timestamp": base.Add(time.Duration(i) * time.Minute).Format(time.RFC3339Nano)}, 201)
	}
	all := collect(b, tok, "/api/events?limit=7")
	if len(all) != 25 {
		t.Fatalf("feed has %d events", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i-1]["timestamp"].(string) < all[i]["timestamp"].(string) {
			t.Fatal("feed not newest first")
		}
	}
	if n := len(collect(b, tok, "/api/events?name=signup")); n != 5 {
		t.Fatalf("name filter: %d", n)
	}
	mine := collect(b, tok, "/api/events/contacts/"+c1+"?limit=6")
	if len(mine) != 20 {
		t.Fatalf("contact feed: %d", len(mine))
	}
	for _, e := range mine {
		if e["contactId"] != c1 {
			t.Fatal("another contact's event in the contact feed")
		}
	}
	if n := len(collect(b, tok, "/api/events/contacts/"+c1+"?name=signup")); n != 0 {
		t.Fatalf("contact feed name filter: %d", n)
	}
	if n := len(collect(b, tok, "/api/events/contacts/"+c1+"?name=page_view&limit=6")); n != 20 {
		t.Fatalf("contact feed name filter, paged: %d", n)
	}
	b.expectError("GET", "/api/events/contacts/cnt_nope", tok, nil, 404, "CONTACT_NOT_FOUND")
	b.expectError("GET", "/api/events?cursor=zzz", tok, nil, 400, "VALIDATION_ERROR")
}

// collect follows nextCursor through every page.
func collect(b *bundle, tok, path string) []map[string]any {
	b.t.Helper()
	var out []map[string]any
	cursor := ""
	for {
		p := path
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		if !strings.Contains(p, "?") {
			p = path + "?"
		}
		r := b.expect("GET", p, tok, nil, 200)
		for _, it := range r.items() {
			out = append(out, it.(map[string]any))
		}
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
}

func TestTimeline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_tl"))
	cid := b.expect("POST", "/api/contacts", tok, map[string]any{"email": "tl@example.com"}, 201).body["contactId"].(string)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := 0; i < 5; i++ {
		b.expect("POST", "/api/events", tok, map[string]any{"email": "tl@example.com", "name": fmt.Sprint("custom_", i),
			"properties": map[string]any{"i": i}, "timestamp": base.Add(time.Duration(i) * time.Hour).Format(time.RFC3339)}, 201)
	}
	// A system event and a sequence lifecycle entry, as later capabilities
	// will write them through the same entry points.
	ctx := context.Background()
	rec := &events.Recorder{DB: b.db}
	err := b.db.InTx(ctx, func(q *store.Tx) error {
		if _, err := rec.RecordSystem(ctx, q, events.System{TenantID: "org_tl", ContactID: cid, Name: events.Sent,
			Properties: map[string]any{"sendId": "snd_1", "templateId": "welcome"}, Timestamp: base.Add(150 * time.Minute), Sends: 1}); err != nil {
			return err
		}
		return q.TimelineEntryInsert(ctx, queries.TimelineEntryInsertParams{TenantID: "org_tl", ID: "tle_1", ContactID: cid,
			Type: "sequence_entered", OccurredAt: base.Add(30 * time.Minute), Data: []byte(`{"sequenceId":"onboarding"}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	r := b.expect("GET", "/api/contacts/"+cid+"/timeline", tok, nil, 200)
	items := r.items()
	if len(items) != 7 || r.body["hasMore"] != false {
		t.Fatalf("%s", r.raw)
	}
	var types []string
	for _, it := range items {
		types = append(types, it.(map[string]any)["type"].(string))
	}
	want := "[event event send event event sequence_entered event]"
	if fmt.Sprint(types) != want {
		t.Fatalf("types %v, want %v", types, want)
	}
	send := items[2].(map[string]any)["data"].(map[string]any)
	if send["sendId"] != "snd_1" || send["templateId"] != "welcome" {
		t.Fatalf("send entry data %v", send)
	}
	first := items[0].(map[string]any)
	if first["timestamp"] != "2026-03-01T16:00:00.000Z" || first["data"].(map[string]any)["name"] != "custom_4" {
		t.Fatalf("newest entry %v", first)
	}
	if g := b.expect("GET", "/api/contacts/"+cid, tok, nil, 200); g.body["derived"].(map[string]any)["totalSends"] != 1.0 {
		t.Fatalf("system event did not count the send: %s", g.raw)
	}

	// from/to are inclusive.
	q := fmt.Sprintf("?from=%s&to=%s", url.QueryEscape(base.Add(time.Hour).Format(time.RFC3339)), url.QueryEscape(base.Add(3*time.Hour).Format(time.RFC3339)))
	r = b.expect("GET", "/api/contacts/"+cid+"/timeline"+q, tok, nil, 200)
	if len(r.items()) != 4 {
		t.Fatalf("from/to window: %s", r.raw)
	}
	// limit and hasMore, then the rest through the cursor.
	r = b.expect("GET", "/api/contacts/"+cid+"/timeline?limit=3", tok, nil, 200)
	if len(r.items()) != 3 || r.body["hasMore"] != true {
		t.Fatalf("%s", r.raw)
	}
	r2 := b.expect("GET", "/api/contacts/"+cid+"/timeline?limit=100&cursor="+url.QueryEscape(r.body["nextCursor"].(string)), tok, nil, 200)
	if len(r2.items()) != 4 || r2.body["hasMore"] != false {
		t.Fatalf("%s", r2.raw)
	}
	for _, bad := range []string{"?limit=101", "?limit=0", "?from=nope", "?from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z"} {
		b.expectError("GET", "/api/contacts/"+cid+"/timeline"+bad, tok, nil, 400, "VALIDATION_ERROR")
	}
	b.expectError("GET", "/api/contacts/cnt_nope/timeline", tok, nil, 404, "CONTACT_NOT_FOUND")
}
