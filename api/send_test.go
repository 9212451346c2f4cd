package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"tidings/internal/config"
	"tidings/internal/delivery"
	"tidings/internal/provider/providertest"
	"tidings/internal/sendgridevents"
	"tidings/internal/store"
	"tidings/internal/tenants"
)

// sendFixture is a tenant ready to send: a contact, a template, the
// contact whitelisted (the tenant is in sandbox).
type sendFixture struct {
	b         *bundle
	org, key  string
	contactID string
}

func newSendFixture(t testing.TB, org string, opts ...option) sendFixture {
	t.Helper()
	b := setup(t, opts...)
	key := b.apiKey(b.tenant(org))
	c := b.expect("POST", "/api/contacts", key, map[string]any{"email": "ann@example.com",
		"properties": map[string]any{"firstName": "Ann"}}, 201)
	b.expect("PUT", "/api/templates/welcome", key, map[string]any{"name": "Welcome",
		"subject": "Hi {{ contact.properties.firstName }}",
		"content": `<mjml><mj-body><mj-section><mj-column><mj-text>Hello {{ name }}! <a href="https://example.com/docs?a=1&amp;b=2">Docs</a> <a href="{{ unsubscribeUrl }}">Unsubscribe</a></mj-text></mj-column></mj-section></mj-body></mjml>`},
		201)
	b.expect("POST", "/api/tenant/sandbox-whitelist", key, map[string]any{"email": "ann@example.com"}, 200)
	return sendFixture{b: b, org: org, key: key, contactID: c.body["contactId"].(string)}
}

// exec runs SQL on the test's database, for states no endpoint can reach
// yet in one step (a verified domain, a paused tenant).
func (f sendFixture) exec(sql string, args ...any) {
	f.b.t.Helper()
	if _, err := f.b.db.Pool.Exec(context.Background(), sql, args...); err != nil {
		f.b.t.Fatal(err)
	}
}

// verifiedDomain adds a domain to the tenant in the given state.
func (f sendFixture) domain(name, status string, sendingEnabled bool) {
	f.exec(`INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
		VALUES ($1, $2, $3, $4, 'tok', '{a,b,c}')`, f.org, name, status, sendingEnabled)
}

func TestSendDeliversAndRecords(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_send")
	b := f.b
	r := b.expect("POST", "/api/send", f.key, map[string]any{"to": " Ann@Example.com ", "template": "welcome",
		"variables": map[string]any{"name": "Ada", "contact": "not me", "unsubscribeUrl": "https://evil.example"}}, 200)
	if r.body["status"] != "sent" || !strings.HasPrefix(r.body["sendId"].(string), "snd_") || r.body["messageId"] == "" {
		t.Fatalf("%s", r.raw)
	}
	msgs := b.sg.Messages()
	if len(msgs) != 1 {
		t.Fatalf("provider got %d messages", len(msgs))
	}
	m := msgs[0].Mail
	if m.Subject != "Hi Ann" || m.From.Address != b.cfg.SandboxFromAddress || m.Personalizations[0].To[0].Address != "ann@example.com" {
		t.Fatalf("message: subject %q from %q", m.Subject, m.From.Address)
	}
	if m.CustomArgs["send_id"] != r.body["sendId"] || m.CustomArgs["tenant_id"] != "org_send" {
		t.Fatalf("custom args %v", m.CustomArgs)
	}
	if len(m.Content) != 2 || m.Content[0].Type != "text/plain" || m.Content[1].Type != "text/html" {
		t.Fatalf("content %+v", m.Content)
	}
	html := m.Content[1].Value
	// Caller variables cannot pose as the unsubscribe link; links are
	// tracked, the unsubscribe link stays direct, and the pixel is there.
	if strings.Contains(html, "evil.example") || strings.Contains(html, "https://example.com/docs") ||
		!strings.Contains(html, b.cfg.PublicBaseURL+"/t/c/") || !strings.Contains(html, b.cfg.PublicBaseURL+"/t/u/") ||
		!strings.Contains(html, b.cfg.PublicBaseURL+"/t/o/") || !strings.Contains(html, "Hello Ada!") {
		t.Fatalf("html: %s", html)
	}
	if _, ok := m.Headers["List-Unsubscribe"]; ok {
		t.Fatal("a transactional send carries List-Unsubscribe")
	}

	// The send record, the contact's counter and the email.sent event.
	id := r.body["sendId"].(string)
	s := b.expect("GET", "/api/sends/"+id, f.key, nil, 200)
	if s.body["deliveryStatus"] != "sent" || s.body["templateId"] != "welcome" || s.body["contactId"] != f.contactID ||
		s.body["toAddress"] != "ann@example.com" || s.body["subject"] != "Hi Ann" || s.body["messageId"] != r.body["messageId"] ||
		s.body["openCount"] != 0.0 || s.body["deliveredAt"] != nil {
		t.Fatalf("send record %s", s.raw)
	}
	if _, ok := s.body["sequenceId"]; ok {
		t.Fatalf("a transactional send has a sequenceId: %s", s.raw)
	}
	c := b.expect("GET", "/api/contacts/"+f.contactID, f.key, nil, 200)
	if c.body["derived"].(map[string]any)["totalSends"] != 1.0 {
		t.Fatalf("totalSends %s", c.raw)
	}
	ev := b.expect("GET", "/api/events?name=email.sent", f.key, nil, 200)
	if len(ev.items()) != 1 {
		t.Fatalf("email.sent events: %s", ev.raw)
	}
	list := b.expect("GET", "/api/contacts/"+f.contactID+"/sends", f.key, nil, 200)
	if len(list.items()) != 1 {
		t.Fatalf("contact sends: %s", list.raw)
	}
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_senderr")
	b := f.b
	b.expect("POST", "/api/contacts", f.key, map[string]any{"email": "bob@example.com"}, 201)
	b.expect("POST", "/api/contacts", f.key, map[string]any{"email": "cat@example.com", "subscribed": false}, 201)
	b.expect("POST", "/api/tenant/sandbox-whitelist", f.key, map[string]any{"email": "cat@example.com"}, 200)
	b.expect("PUT", "/api/templates/off", f.key, map[string]any{"name": "Off", "subject": "s", "content": "<p>x</p>"}, 201)
	b.expect("PUT", "/api/templates/off", f.key, map[string]any{"enabled": false}, 200)

	tests := []struct {
		desc   string
		body   any
		status int
		code   string
		field  string
	}{
		{"no to", map[string]any{"template": "welcome"}, 400, "VALIDATION_ERROR", "to"},
		{"bad email", map[string]any{"to": "nope", "template": "welcome"}, 400, "VALIDATION_ERROR", "to"},
		{"no template", map[string]any{"to": "ann@example.com"}, 400, "VALIDATION_ERROR", "template"},
		{"wrong type", map[string]any{"to": "ann@example.com", "template": "welcome", "ignoreUnsubscribe": "yes"}, 400, "VALIDATION_ERROR", "ignoreUnsubscribe"},
		{"unknown contact", map[string]any{"to": "zed@example.com", "template": "welcome"}, 404, "CONTACT_NOT_FOUND", ""},
		{"unknown template", map[string]any{"to": "ann@example.com", "template": "nope"}, 404, "TEMPLATE_NOT_FOUND", ""},
		{"disabled template", map[string]any{"to": "ann@example.com", "template": "off"}, 400, "VALIDATION_ERROR", "template"},
		{"unsubscribed", map[string]any{"to": "cat@example.com", "template": "welcome"}, 400, "VALIDATION_ERROR", "to"},
		{"not whitelisted in sandbox", map[string]any{"to": "bob@example.com", "template": "welcome"}, 403, "FORBIDDEN", ""},
		{"from on an unknown domain", map[string]any{"to": "ann@example.com", "template": "welcome", "from": "me@nowhere.example"}, 404, "DOMAIN_NOT_FOUND", ""},
		{"from not parsable", map[string]any{"to": "ann@example.com", "template": "welcome", "from": "not an address"}, 400, "VALIDATION_ERROR", "from"},
	}
	for _, tt := range tests {
		r := b.expectError("POST", "/api/send", f.key, tt.body, tt.status, tt.code)
		if tt.field != "" {
			if _, ok := r.fields()[tt.field]; !ok {
				t.Errorf("%s: details name no %q: %s", tt.desc, tt.field, r.raw)
			}
		}
	}
	// ignoreUnsubscribe sends to the unsubscribed contact.
	b.expect("POST", "/api/send", f.key, map[string]any{"to": "cat@example.com", "template": "welcome", "ignoreUnsubscribe": true}, 200)

	// Domains: added but not verified, verified but not enabled, fine.
	f.domain("pending.example", "pending", false)
	f.domain("quiet.example", "verified", false)
	f.domain("acme.example", "verified", true)
	send := func(from string) map[string]any {
		return map[string]any{"to": "ann@example.com", "template": "welcome", "from": from}
	}
	b.expectError("POST", "/api/send", f.key, send("a@pending.example"), 422, "DOMAIN_NOT_VERIFIED")
	b.expectError("POST", "/api/send", f.key, send("a@quiet.example"), 403, "FORBIDDEN")
	b.expect("POST", "/api/send", f.key, send("Acme News <news@acme.example>"), 200)
	msgs := b.sg.Messages()
	if last := msgs[len(msgs)-1].Mail.From; last.Address != "news@acme.example" || last.Name != "Acme News" {
		t.Fatalf("from %+v", last)
	}

	// Paused: nothing goes out, even to a whitelisted contact.
	f.exec(`UPDATE tenants SET sending_status = $2 WHERE id = $1`, f.org, tenants.Paused)
	b.expectError("POST", "/api/send", f.key, send("news@acme.example"), 403, "FORBIDDEN")

	// Enabled: any contact; without a from and without a default, from is
	// required; the default from must be on a usable domain.
	f.exec(`UPDATE tenants SET sending_status = $2 WHERE id = $1`, f.org, tenants.Enabled)
	r := b.expectError("POST", "/api/send", f.key, map[string]any{"to": "bob@example.com", "template": "welcome"}, 400, "VALIDATION_ERROR")
	if _, ok := r.fields()["from"]; !ok {
		t.Fatalf("%s", r.raw)
	}
	f.exec(`UPDATE tenants SET default_from_address = 'hello@acme.example' WHERE id = $1`, f.org)
	b.expect("POST", "/api/send", f.key, map[string]any{"to": "bob@example.com", "template": "welcome"}, 200)
	if got := b.sg.Count(); got != 3 {
		t.Fatalf("provider accepted %d messages, want 3 (every refused request sent nothing)", got)
	}
}

func TestSendProviderFailureLeavesNoRecord(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_sendfail")
	b := f.b
	for _, status := range []int{500, 429, 400} {
		b.sg.FailNext(1, status, 0)
		r := b.expectError("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome"}, 502, "PROVIDER_ERROR")
		if len(r.body["error"].(map[string]any)["details"].(map[string]any)) != 0 {
			t.Fatalf("5xx details must be {}: %s", r.raw)
		}
	}
	if l := b.expect("GET", "/api/sends", f.key, nil, 200); len(l.items()) != 0 {
		t.Fatalf("a failed send left a record: %s", l.raw)
	}
	c := b.expect("GET", "/api/contacts/"+f.contactID, f.key, nil, 200)
	if c.body["derived"].(map[string]any)["totalSends"] != 0.0 {
		t.Fatalf("totalSends moved: %s", c.raw)
	}
}

func TestSendMissingVariablesAndHeaderInjection(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_sendvars")
	b := f.b
	b.expect("PUT", "/api/templates/inj", f.key, map[string]any{"name": "Inj",
		"subject": "Re: {{ topic }}", "content": "<p>{{ body }}</p>"}, 201)
	// A missing variable renders empty.
	b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "inj"}, 200)
	// CR/LF in a variable that reaches the subject cannot add a header.
	b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "inj",
		"variables": map[string]any{"topic": "x\r\nBcc: victim@example.com"}}, 200)
	msgs := b.sg.Messages()
	if msgs[0].Mail.Subject != "Re:" && msgs[0].Mail.Subject != "Re: " {
		t.Fatalf("subject %q", msgs[0].Mail.Subject)
	}
	if s := msgs[1].Mail.Subject; strings.ContainsAny(s, "\r\n") {
		t.Fatalf("subject keeps a line break: %q", s)
	}
	for _, m := range msgs {
		if strings.Contains(string(m.Raw), "victim") && strings.Contains(strings.ToLower(string(m.Raw)), `"bcc"`) {
			t.Fatalf("injected Bcc: %s", m.Raw)
		}
	}
	// CR/LF in a from name is refused before anything is sent.
	f.domain("acme.example", "verified", true)
	before := b.sg.Count()
	b.expectError("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "inj",
		"from": "\"Evil\r\nBcc: v@example.com\" <a@acme.example>"}, 400, "VALIDATION_ERROR")
	if b.sg.Count() != before {
		t.Fatal("a from with CR/LF reached the provider")
	}
}

// idempotent sends POST /api/send with an Idempotency-Key.
func (f sendFixture) idempotent(key string, body any) resp {
	f.b.t.Helper()
	j, _ := json.Marshal(body)
	req := httptest.NewRequest("POST", "/api/send", strings.NewReader(string(j)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.key)
	req.Header.Set("Idempotency-Key", key)
	res, err := f.b.app.Test(req, -1)
	if err != nil {
		f.b.t.Fatal(err)
	}
	defer res.Body.Close()
	var r resp
	r.status, r.header = res.StatusCode, res.Header
	r.raw, _ = io.ReadAll(res.Body)
	_ = json.Unmarshal(r.raw, &r.body)
	return r
}

func TestSendIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_sendidem")
	b := f.b
	body := map[string]any{"to": "ann@example.com", "template": "welcome"}
	first := f.idempotent("order-42", body)
	if first.status != 200 {
		t.Fatalf("first: %d %v", first.status, first.body)
	}
	again := f.idempotent("order-42", body)
	if again.status != 200 || again.body["sendId"] != first.body["sendId"] || again.body["messageId"] != first.body["messageId"] {
		t.Fatalf("replay: %d %v, want %v", again.status, again.body, first.body)
	}
	if b.sg.Count() != 1 {
		t.Fatalf("the replay sent again: %d messages", b.sg.Count())
	}
	other := f.idempotent("order-42", map[string]any{"to": "ann@example.com", "template": "welcome", "variables": map[string]any{"x": 1}})
	if other.status != 422 || other.body["error"].(map[string]any)["code"] != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("other body: %d %v", other.status, other.body)
	}
	// A failed first attempt is not kept: the retry with the same key sends.
	b.sg.FailNext(1, http.StatusServiceUnavailable, 0)
	if r := f.idempotent("order-43", body); r.status != 502 {
		t.Fatalf("failing first: %d %v", r.status, r.body)
	}
	if r := f.idempotent("order-43", body); r.status != 200 {
		t.Fatalf("retry after failure: %d %v", r.status, r.body)
	}
	if r := f.idempotent(strings.Repeat("k", 256), body); r.status != 400 {
		t.Fatalf("overlong key: %d", r.status)
	}
	// Concurrent repeats: one sends, the others are told it is in flight
	// or get the replay; never two messages.
	before := b.sg.Count()
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Go(func() { statuses[i] = f.idempotent("order-44", body).status })
	}
	wg.Wait()
	for _, s := range statuses {
		if s != 200 && s != 409 {
			t.Fatalf("concurrent statuses %v", statuses)
		}
	}
	if b.sg.Count() != before+1 {
		t.Fatalf("concurrent repeats sent %d messages, want 1", b.sg.Count()-before)
	}
}

func TestSendsListFiltersAndIsolation(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_sends")
	b := f.b
	b.expect("PUT", "/api/templates/other", f.key, map[string]any{"name": "O", "subject": "o", "content": "<p>o</p>"}, 201)
	for _, tmpl := range []string{"welcome", "other", "welcome"} {
		b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": tmpl}, 200)
	}
	all := b.expect("GET", "/api/sends?limit=2", f.key, nil, 200)
	if len(all.items()) != 2 || all.body["nextCursor"] == nil {
		t.Fatalf("page 1: %s", all.raw)
	}
	rest := b.expect("GET", "/api/sends?limit=2&cursor="+all.body["nextCursor"].(string), f.key, nil, 200)
	if len(rest.items()) != 1 || rest.body["nextCursor"] != nil {
		t.Fatalf("page 2: %s", rest.raw)
	}
	newest := all.items()[0].(map[string]any)
	if w := b.expect("GET", "/api/sends?templateId=welcome", f.key, nil, 200); len(w.items()) != 2 {
		t.Fatalf("templateId filter: %s", w.raw)
	}
	if w := b.expect("GET", "/api/sends?status=delivered", f.key, nil, 200); len(w.items()) != 0 {
		t.Fatalf("status filter: %s", w.raw)
	}
	if w := b.expect("GET", "/api/sends?contactId="+f.contactID+"&templateId=other", f.key, nil, 200); len(w.items()) != 1 {
		t.Fatalf("contact+template filter: %s", w.raw)
	}
	// from/to are inclusive: the newest send's own time finds it.
	at := newest["sentAt"].(string)
	if w := b.expect("GET", "/api/sends?from="+at+"&to="+at, f.key, nil, 200); len(w.items()) != 1 {
		t.Fatalf("inclusive from/to: %s", w.raw)
	}
	b.expectError("GET", "/api/sends?status=lost", f.key, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/sends?from=yesterday", f.key, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/sends?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", f.key, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/sends?contactId=cnt_nope", f.key, nil, 404, "CONTACT_NOT_FOUND")
	b.expectError("GET", "/api/sends/snd_nope", f.key, nil, 404, "SEND_NOT_FOUND")
	b.expectError("GET", "/api/contacts/cnt_nope/sends", f.key, nil, 404, "CONTACT_NOT_FOUND")

	// Another tenant sees none of it, and cannot send to this one's contact.
	other := b.apiKey(b.tenant("org_sends_other"))
	if l := b.expect("GET", "/api/sends", other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("other tenant lists %s", l.raw)
	}
	b.expectError("GET", "/api/sends/"+newest["sendId"].(string), other, nil, 404, "SEND_NOT_FOUND")
	b.expectError("GET", "/api/contacts/"+f.contactID+"/sends", other, nil, 404, "CONTACT_NOT_FOUND")
	b.expectError("GET", "/api/sends?contactId="+f.contactID, other, nil, 404, "CONTACT_NOT_FOUND")
	b.expectError("POST", "/api/send", other, map[string]any{"to": "ann@example.com", "template": "welcome"}, 404, "CONTACT_NOT_FOUND")
}

// ADDENDUM 12: a provider that takes the request and never answers leaves
// the send in doubt: 502 PROVIDER_ERROR naming the send, whose record stays
// (inDoubt, listed by ?inDoubt=true); the answer is kept for the
// Idempotency-Key, so the client's retry replays it and sends nothing. A
// provider event naming the send settles it.
func TestSendInDoubtIsRecordedKeptAndNeverResent(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_send_doubt", func(c *config.Config) { c.ProviderTimeout = 300 * time.Millisecond })
	f.b.sg.FailNextWith(providertest.Failure{Hang: true, Accept: true})
	body := map[string]any{"to": "ann@example.com", "template": "welcome"}
	r := f.idempotent("doubt-1", body)
	if r.status != 502 || r.code() != "PROVIDER_ERROR" {
		t.Fatalf("first: %d %s", r.status, r.raw)
	}
	details, _ := r.body["error"].(map[string]any)["details"].(map[string]any)
	sendID, _ := details["sendId"].(string)
	if sendID == "" || details["inDoubt"] != true {
		t.Fatalf("details %v", details)
	}
	again := f.idempotent("doubt-1", body)
	if again.status != 502 || string(again.raw) != string(r.raw) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %s", again.status, again.raw)
	}
	if n := f.b.sg.Requests(); n != 1 {
		t.Fatalf("the provider got %d requests", n)
	}
	rec := f.b.expect("GET", "/api/sends/"+sendID, f.key, nil, 200)
	if rec.body["inDoubt"] != true || rec.body["deliveryStatus"] != "sent" {
		t.Fatalf("record %s", rec.raw)
	}
	if items := f.b.expect("GET", "/api/sends?inDoubt=true", f.key, nil, 200).items(); len(items) != 1 {
		t.Fatalf("in doubt list: %v", items)
	}
	f.b.expectError("GET", "/api/sends?inDoubt=maybe", f.key, nil, 400, "VALIDATION_ERROR")
	// A webhook event for the send settles it.
	err := f.b.svc.DB.InTx(context.Background(), func(q *store.Tx) error {
		_, err := f.b.svc.Outcomes.Apply(context.Background(), q, []delivery.Outcome{{TenantID: f.org, SendID: sendID,
			Kind: sendgridevents.Processed}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec := f.b.expect("GET", "/api/sends/"+sendID, f.key, nil, 200); rec.body["inDoubt"] != false {
		t.Fatalf("after the event: %s", rec.raw)
	}
	if items := f.b.expect("GET", "/api/sends?inDoubt=true", f.key, nil, 200).items(); len(items) != 0 {
		t.Fatalf("in doubt list after the event: %v", items)
	}
}

// A refusal (or nothing reaching the provider) leaves no record: 502 and
// the key released, so the retry sends (ADDENDUM 8 and 12).
func TestSendRefusedLeavesNoRecord(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_send_refused")
	f.b.sg.FailNext(1, 500, 0)
	body := map[string]any{"to": "ann@example.com", "template": "welcome"}
	if r := f.idempotent("refused-1", body); r.status != 502 {
		t.Fatalf("first: %d %s", r.status, r.raw)
	}
	if items := f.b.expect("GET", "/api/sends", f.key, nil, 200).items(); len(items) != 0 {
		t.Fatalf("a refused send left records: %v", items)
	}
	if r := f.idempotent("refused-1", body); r.status != 200 {
		t.Fatalf("retry: %d %s", r.status, r.raw)
	}
	if items := f.b.expect("GET", "/api/sends", f.key, nil, 200).items(); len(items) != 1 || items[0].(map[string]any)["inDoubt"] != false {
		t.Fatalf("records after the retry: %v", items)
	}
}

// PROVIDER_RATE_PER_SECOND: a provider's 429 holds the shared bucket for
// as long as it asked, and sends go on once it has passed.
func TestSendProviderRateLimit(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_sendrate", func(c *config.Config) { c.ProviderRatePerSecond = 1000 })
	b := f.b
	b.sg.FailNext(1, 429, 2*time.Second)
	b.expectError("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome"}, 502, "PROVIDER_ERROR")
	if ttl := b.rdb.PTTL(t.Context(), b.prefix+"sendrate:{provider}:hold").Val(); ttl <= 0 || ttl > 2*time.Second {
		t.Fatalf("hold %v after a 429 asking for 2 s", ttl)
	}
	start := time.Now()
	b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome"}, 200)
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("the next send went out %v after the 429", waited)
	}
}
