package api

import (
	"strings"
	"testing"

	"tidings/internal/tracking"
)

// The unsubscribe page of a topic message is a preference page: its
// one-click POST leaves that topic only, the preference form saves every
// topic, and "everything" unsubscribes the contact. Every POST needs the
// signed token (a forged one is the invalid-link 404), and the page loads
// nothing from anywhere.
func TestPreferencePage(t *testing.T) {
	t.Parallel()
	b := setupOutcomeAPI(t, true)
	b.sql(`INSERT INTO topics (tenant_id, id, name, description, default_mode) VALUES
		('ten_a', 'news', 'Product news', 'What ships', 'opt_out'),
		('ten_a', 'digest', 'Weekly digest', '', 'opt_in')`)
	tok, err := b.signer.UnsubscribeToken(tracking.IDs{TenantID: "ten_a", SendID: "snd_1", ContactID: "cnt_1", Topic: "news"})
	if err != nil {
		t.Fatal(err)
	}
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	page := b.raw("GET", "/t/u/"+tok, "", nil)
	body := string(page.raw)
	for _, want := range []string{"Unsubscribe from Product news", `name="topic" value="news" checked`,
		`name="topic" value="digest">`, "Unsubscribe from everything", `action="/t/u/` + tok + `"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("page lacks %q:\n%s", want, body)
		}
	}
	for _, bad := range []string{"<script", "src=", "http://", "https://"} {
		if strings.Contains(body, bad) {
			t.Fatalf("page holds %q:\n%s", bad, body)
		}
	}
	// RFC 8058 one-click from the topic message: the topic only.
	left := b.raw("POST", "/t/u/"+tok, "List-Unsubscribe=One-Click", form)
	if left.status != 200 || !strings.Contains(string(left.raw), "You left <strong>Product news</strong>") {
		t.Fatalf("one-click: %d\n%s", left.status, left.raw)
	}
	if got := b.scalar(`SELECT subscribed::text || ' ' || topics::text FROM contacts WHERE tenant_id = 'ten_a'`); got != `true {"news": false}` {
		t.Fatalf("after leaving the topic: %s", got)
	}
	if got := b.scalar(`SELECT count(*) FROM timeline_entries WHERE tenant_id = 'ten_a' AND type = 'topics_changed'`); got != "1" {
		t.Fatalf("%s timeline entries", got)
	}
	// The preference form: join the digest, stay out of news.
	saved := b.raw("POST", "/t/u/"+tok, "preferences=1&topic=digest", form)
	if saved.status != 200 || !strings.Contains(string(saved.raw), "Your preferences are saved") ||
		!strings.Contains(string(saved.raw), `value="digest" checked`) {
		t.Fatalf("preferences: %d\n%s", saved.status, saved.raw)
	}
	if got := b.scalar(`SELECT topics->>'digest' || ' ' || (topics->>'news') FROM contacts WHERE tenant_id = 'ten_a'`); got != "true false" {
		t.Fatalf("after saving: %s", got)
	}
	// A forged token changes nothing.
	b.expectInvalidLink("POST", "/t/u/"+tamper(tok))
	// Everything.
	all := b.raw("POST", "/t/u/"+tok, "List-Unsubscribe=One-Click&scope=all", form)
	if !strings.Contains(string(all.raw), "You are unsubscribed") {
		t.Fatalf("everything: %s", all.raw)
	}
	if got := b.scalar(`SELECT subscribed FROM contacts WHERE tenant_id = 'ten_a'`); got != "false" {
		t.Fatal("scope=all left the contact subscribed")
	}
}
