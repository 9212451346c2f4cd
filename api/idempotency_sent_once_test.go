package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"tidings/internal/config"
	"tidings/internal/testenv"
)

// doKey sends a JSON request with an Idempotency-Key.
func (b *bundle) doKey(method, path, token, key string, body any) resp {
	b.t.Helper()
	j, _ := json.Marshal(body)
	req := httptest.NewRequest(method, path, bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	res, err := b.app.Test(req, -1)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

// A batch send repeated with its Idempotency-Key after its first request
// died (or failed to store its answer) once the provider had its messages
// answers from the records the key names and sends nothing again
// (ADDENDUM 19): the outside review's "batch send twice".
func TestSendBatchRepeatAfterCrashSendsNothing(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_batch_crash")
	b := f.b
	b.expect("POST", "/api/contacts", f.key, map[string]any{"email": "bob@example.com"}, 201)
	f.exec(`UPDATE tenants SET sandbox_whitelist = '{ann@example.com,bob@example.com}' WHERE id = $1`, f.org)
	body := map[string]any{"messages": []any{
		map[string]any{"to": "ann@example.com", "template": "welcome"},
		map[string]any{"to": "nobody@example.com", "template": "welcome"},
		map[string]any{"to": "bob@example.com", "template": "welcome"},
	}}
	first := b.doKey("POST", "/api/send/batch", f.key, "batch-1", body)
	if first.status != 200 || b.sg.Count() != 2 {
		t.Fatalf("first: %d %s, provider took %d", first.status, first.raw, b.sg.Count())
	}
	// The process died after the provider accepted, before the answer was
	// stored; the key's first request is long silent.
	f.exec(`UPDATE idempotency_keys SET response_status = NULL, response_body = NULL,
		created_at = now() - interval '10 minutes' WHERE tenant_id = $1`, f.org)
	again := b.doKey("POST", "/api/send/batch", f.key, "batch-1", body)
	if again.status != 200 || again.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("repeat: %d %v %s", again.status, again.header, again.raw)
	}
	if n := b.sg.Count(); n != 2 {
		t.Fatalf("the repeat sent again: the provider took %d messages", n)
	}
	fi, ai := first.items(), again.items()
	for _, i := range []int{0, 2} {
		f, a := fi[i].(map[string]any), ai[i].(map[string]any)
		if a["status"] != "sent" || a["sendId"] != f["sendId"] || a["messageId"] != f["messageId"] {
			t.Errorf("item %d: first %v, repeat %v", i, f, a)
		}
	}
	// The message that failed its checks has no record: not sent, and the
	// repeat says so rather than sending it.
	if e := ai[1].(map[string]any); e["status"] != "error" || e["error"].(map[string]any)["code"] != "NOT_SENT" {
		t.Errorf("item 1: %v", e)
	}
	// The key is not forgotten either: another repeat answers the same.
	if r := b.doKey("POST", "/api/send/batch", f.key, "batch-1", body); r.status != 200 || b.sg.Count() != 2 {
		t.Fatalf("third: %d %s, provider took %d", r.status, r.raw, b.sg.Count())
	}
}

// Idempotency-Keys are scoped by credential (ADDENDUM 19): another API key
// of the same tenant reusing one makes a first request of its own, and is
// never answered the response made for the first key.
func TestIdempotencyKeyPerCredential(t *testing.T) {
	t.Parallel()
	b := setup(t)
	session := b.tenant("org_idem_cred")
	one, two := b.apiKey(session), b.apiKey(session)
	first := b.doKey("POST", "/api/contacts", one, "k-1", map[string]any{"email": "ann@example.com"})
	if first.status != 201 {
		t.Fatalf("%d %s", first.status, first.raw)
	}
	if r := b.doKey("POST", "/api/contacts", one, "k-1", map[string]any{"email": "ann@example.com"}); r.status != 201 ||
		!bytes.Equal(r.raw, first.raw) {
		t.Fatalf("same key, same credential: %d %s", r.status, r.raw)
	}
	// The second key's request runs: the contact exists already.
	r := b.doKey("POST", "/api/contacts", two, "k-1", map[string]any{"email": "ann@example.com"})
	if r.status != 409 || r.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("same key, another credential: %d %s", r.status, r.raw)
	}
}

// Stored responses keep no secret in clear (ADDENDUM 19): an API key's
// rawKey and a webhook's secret are sealed in idempotency_keys, and the
// replay answers them as first answered, byte for byte.
func TestIdempotencyResponsesKeepNoSecret(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.WebhookAllowPrivateTargets = true })
	session := b.tenant("org_idem_secret")
	created := b.doKey("POST", "/api/api-keys", session, "key-1", map[string]any{"name": "ci"})
	hook := b.doKey("POST", "/api/webhooks", session, "hook-1", map[string]any{"url": "http://127.0.0.1:8080/x"})
	if created.status != 201 || hook.status != 201 {
		t.Fatalf("%d %s; %d %s", created.status, created.raw, hook.status, hook.raw)
	}
	rotated := b.doKey("POST", "/api/webhooks/"+hook.body["webhookId"].(string)+"/rotate-secret", session, "rot-1", nil)
	if rotated.status != 200 {
		t.Fatalf("%d %s", rotated.status, rotated.raw)
	}
	secrets := []string{created.body["rawKey"].(string), hook.body["secret"].(string), rotated.body["secret"].(string)}
	rows, err := b.db.Pool.Query(context.Background(), `SELECT response_body FROM idempotency_keys WHERE tenant_id = 'org_idem_secret'`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var stored []byte
		if err := rows.Scan(&stored); err != nil {
			t.Fatal(err)
		}
		n++
		for _, s := range secrets {
			if strings.Contains(string(stored), s) || strings.Contains(string(stored), strings.TrimPrefix(s, "whsec_")) {
				t.Errorf("a stored response holds a secret in clear: %s", stored)
			}
		}
	}
	if rows.Err() != nil || n < 3 {
		t.Fatalf("%d stored responses, %v", n, rows.Err())
	}
	for _, c := range []struct {
		path, key string
		first     resp
	}{{"/api/api-keys", "key-1", created}, {"/api/webhooks", "hook-1", hook}} {
		var body any = map[string]any{"name": "ci"}
		if c.key == "hook-1" {
			body = map[string]any{"url": "http://127.0.0.1:8080/x"}
		}
		r := b.doKey("POST", c.path, session, c.key, body)
		if r.status != c.first.status || !bytes.Equal(r.raw, c.first.raw) || r.header.Get("Idempotency-Replayed") != "true" {
			t.Errorf("replay of %s: %d %s, want %s", c.path, r.status, r.raw, c.first.raw)
		}
	}
}

// A send whose record's COMMIT commits while its answer is lost with the
// connection (PostgreSQL restarting, a backend terminated) still goes
// out, once, and answers sent; its repeat with the same Idempotency-Key
// replays that answer. Before the fix the write was taken as not written:
// 502 with the record and the key's link committed and the message never
// sent, and the client's retry met 409 IDEMPOTENCY_KEY_IN_USE until the
// ledger sweep put the record in doubt (fault run seed 16).
func TestSendWhoseRecordCommitAnswerIsLost(t *testing.T) {
	t.Parallel()
	db, proxy := testenv.DBBehindProxy(t)
	b := setupOn(t, db)
	key := b.apiKey(b.tenant("org_lost_commit"))
	b.expect("POST", "/api/contacts", key, map[string]any{"email": "ann@example.com"}, 201)
	b.expect("PUT", "/api/templates/welcome", key, map[string]any{"name": "Welcome", "subject": "Hi",
		"content": `<mjml><mj-body><mj-section><mj-column><mj-text>Hello</mj-text></mj-column></mj-section></mj-body></mjml>`}, 201)
	b.expect("POST", "/api/tenant/sandbox-whitelist", key, map[string]any{"email": "ann@example.com"}, 200)
	body := map[string]any{"to": "ann@example.com", "template": "welcome"}
	proxy.LoseCommitOf("INSERT INTO sends")
	first := b.doKey("POST", "/api/send", key, "lost-1", body)
	if proxy.Lost() != 1 {
		t.Fatalf("%d commits lost, want 1", proxy.Lost())
	}
	if first.status != 200 || b.sg.Count() != 1 {
		t.Fatalf("first: %d %s; the provider took %d", first.status, first.raw, b.sg.Count())
	}
	again := b.doKey("POST", "/api/send", key, "lost-1", body)
	if again.status != 200 || again.header.Get("Idempotency-Replayed") != "true" || again.body["sendId"] != first.body["sendId"] {
		t.Fatalf("repeat: %d %v %s", again.status, again.header, again.raw)
	}
	if n := b.sg.Count(); n != 1 {
		t.Errorf("the provider took %d messages, want 1", n)
	}
}
