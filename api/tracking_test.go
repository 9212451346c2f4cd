package api

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/config"
	"tidings/internal/sendgridevents"
	"tidings/internal/sendgridevents/sgtest"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
	"tidings/internal/tracking"
	"tidings/worker"
)

// outcomeBundle is an API with the webhook key and a task queue, two tenants
// with a contact and a send each (rows inserted directly), and the token
// signer the sends' tracking links would carry.
type outcomeBundle struct {
	*bundle
	signer   *tracking.Signer
	priv     *ecdsa.PrivateKey
	queueOpt asynq.RedisConnOpt
}

func setupOutcomeAPI(t *testing.T, withKey bool) *outcomeBundle {
	t.Helper()
	cfg, err := config.FromLookup(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.DashboardJWTSecret = testSecret
	cfg.RateLimitPerMinute = 10000
	db := testenv.DB(t)
	rdb, prefix := testenv.Redis(t)
	qURL, _ := testenv.RedisDB(t)
	qOpt, err := config.AsynqRedis(qURL)
	if err != nil {
		t.Fatal(err)
	}
	queue := asynq.NewClient(qOpt)
	t.Cleanup(func() { _ = queue.Close() })
	priv, pub, err := sgtest.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	var key *sendgridevents.Verifier
	if withKey {
		if key, err = sendgridevents.NewVerifier(pub); err != nil {
			t.Fatal(err)
		}
	}
	app, svc := newAppServices(t, app.Infra{Config: cfg, DB: db, Redis: rdb, RedisPrefix: prefix,
		Tasks: tasks.NewClient(queue, nil, testLog())}, Deps{WebhookKey: key})
	signer, err := tracking.NewSigner(cfg.TrackingSecret)
	if err != nil {
		t.Fatal(err)
	}
	b := &outcomeBundle{bundle: &bundle{t: t, app: app, svc: svc, db: db, cfg: cfg, rdb: rdb, prefix: prefix},
		signer: signer, priv: priv, queueOpt: qOpt}
	for _, tn := range []string{"ten_a", "ten_b"} {
		b.sql(`INSERT INTO tenants (id, name) VALUES ($1, $1)`, tn)
		b.sql(`INSERT INTO contacts (tenant_id, id, email) VALUES ($1, 'cnt_1', 'ann@example.com')`, tn)
		b.sql(`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version,
			from_address, to_address, subject, sent_at)
			VALUES ($1, 'snd_1', 'msg-1', 'cnt_1', 'welcome', 1, 'a@acme.test', 'ann@example.com', 'Hi', now() - interval '1 hour')`, tn)
	}
	return b
}

func (b *outcomeBundle) sql(q string, args ...any) {
	b.t.Helper()
	if _, err := b.db.Pool.Exec(context.Background(), q, args...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *outcomeBundle) scalar(q string, args ...any) string {
	b.t.Helper()
	var v any
	if err := b.db.Pool.QueryRow(context.Background(), q, args...).Scan(&v); err != nil {
		b.t.Fatal(err)
	}
	return fmt.Sprint(v)
}

func (b *outcomeBundle) token(kind tracking.Kind, tenant, send, url string) string {
	b.t.Helper()
	ids := tracking.IDs{TenantID: tenant, SendID: send, ContactID: "cnt_1"}
	var tok string
	var err error
	switch kind {
	case tracking.KindOpen:
		tok, err = b.signer.OpenToken(ids)
	case tracking.KindClick:
		tok, err = b.signer.ClickToken(ids, url)
	default:
		tok, err = b.signer.UnsubscribeToken(ids)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	return tok
}

// mailClientUA is Apple Mail's user agent.
const mailClientUA = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko)"

// raw sends a request with the given body and headers.
func (b *outcomeBundle) raw(method, path, body string, headers map[string]string) resp {
	b.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	// A mail client's user agent unless the test gives one: a hit without
	// one is a machine's (ADDENDUM 17).
	req.Header.Set("User-Agent", mailClientUA)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := b.app.Test(req, -1)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	r := resp{status: res.StatusCode, header: res.Header, raw: data}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(data, &r.body)
	}
	return r
}

// tamper changes one character in the middle of a token.
func tamper(tok string) string {
	i := len(tok) / 2
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}

func TestTrackingOpenPixel(t *testing.T) {
	t.Parallel()
	b := setupOutcomeAPI(t, true)
	tok := b.token(tracking.KindOpen, "ten_a", "snd_1", "")
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/t/o/" + tok, 200}, {"/t/o/" + tok, 200}, // counted twice on the send, once on the contact
		// A token that does not verify is 404 (ADDENDUM 8), still with the
		// pixel so no email shows a broken image; nothing is recorded.
		{"/t/o/" + tamper(tok), 404}, {"/t/o/garbage", 404},
		{"/t/o/" + b.token(tracking.KindClick, "ten_a", "snd_1", "https://acme.test/"), 404}, // another kind
		{"/t/o/" + b.token(tracking.KindOpen, "ten_a", "snd_gone", ""), 200},                 // valid, its send gone
	} {
		r := b.raw("GET", tc.path, "", nil)
		if r.status != tc.status || r.header.Get("Content-Type") != "image/gif" || len(r.raw) != len(pixelGIF) ||
			!strings.Contains(r.header.Get("Cache-Control"), "no-store") {
			t.Fatalf("GET %s: %d %v %d bytes; want %d", tc.path, r.status, r.header, len(r.raw), tc.status)
		}
	}
	if got := b.scalar(`SELECT open_count FROM sends WHERE tenant_id = 'ten_a'`); got != "2" {
		t.Fatalf("open_count %s", got)
	}
	// A HEAD to the pixel answers 200 and records a machine's open, which
	// the send's count leaves out (ADDENDUM 17).
	if r := b.raw("HEAD", "/t/o/"+tok, "", nil); r.status != 200 {
		t.Fatalf("HEAD: %d", r.status)
	}
	if got := b.scalar(`SELECT open_count::text || ' ' || (SELECT count(*) FROM events WHERE tenant_id = 'ten_a'
		AND properties @> '{"machine": true, "machineReason": "head_request"}') FROM sends WHERE tenant_id = 'ten_a'`); got != "2 1" {
		t.Fatalf("after HEAD: %s", got)
	}
	if got := b.scalar(`SELECT total_opens FROM contacts WHERE tenant_id = 'ten_a'`); got != "1" {
		t.Fatalf("total_opens %s", got)
	}
	if got := b.scalar(`SELECT count(*) FROM events WHERE name = 'email.opened' AND NOT properties ? 'machine'`); got != "2" {
		t.Fatalf("%s email.opened events of a person", got)
	}
}

func TestTrackingClickRedirect(t *testing.T) {
	t.Parallel()
	b := setupOutcomeAPI(t, true)
	target := "https://acme.test/pricing?a=1&b=2"
	tok := b.token(tracking.KindClick, "ten_a", "snd_1", target)
	r := b.raw("GET", "/t/c/"+tok, "", nil)
	if r.status != http.StatusFound || r.header.Get("Location") != target {
		t.Fatalf("click: %d Location %q", r.status, r.header.Get("Location"))
	}
	if got := b.scalar(`SELECT click_count::text || ' ' || (clicked_at IS NOT NULL)::text FROM sends WHERE tenant_id = 'ten_a'`); got != "1 true" {
		t.Fatalf("send after click: %s", got)
	}
	if got := b.scalar(`SELECT properties->>'url' FROM events WHERE name = 'email.clicked'`); got != target {
		t.Fatalf("click event url %s", got)
	}
	b.expectInvalidLink("GET", "/t/c/"+tamper(tok))
	b.expectInvalidLink("GET", "/t/c/"+b.token(tracking.KindOpen, "ten_a", "snd_1", ""))
	// A send that is gone still redirects, recording nothing.
	gone := b.raw("GET", "/t/c/"+b.token(tracking.KindClick, "ten_a", "snd_gone", target), "", nil)
	if gone.status != http.StatusFound || gone.header.Get("Location") != target {
		t.Fatalf("gone send: %d", gone.status)
	}
}

func TestTrackingUnsubscribe(t *testing.T) {
	t.Parallel()
	b := setupOutcomeAPI(t, true)
	tok := b.token(tracking.KindUnsubscribe, "ten_a", "snd_1", "")
	page := b.raw("GET", "/t/u/"+tok, "", nil)
	if page.status != 200 || page.header.Get("Content-Type") != "text/html; charset=utf-8" ||
		!strings.Contains(page.header.Get("Content-Security-Policy"), "default-src 'none'") ||
		!strings.Contains(string(page.raw), `action="/t/u/`+tok+`"`) || !strings.Contains(string(page.raw), "<form") {
		t.Fatalf("page: %d %v\n%s", page.status, page.header, page.raw)
	}
	// The page names the sender and the address (escaped as HTML).
	if !strings.Contains(string(page.raw), "every email from a@acme.test at ann@example.com.") {
		t.Fatalf("page does not name sender and address:\n%s", page.raw)
	}
	if got := b.scalar(`SELECT subscribed FROM contacts WHERE tenant_id = 'ten_a'`); got != "true" {
		t.Fatal("GET unsubscribed the contact")
	}
	// RFC 8058 one-click, as a mail client sends it.
	done := b.raw("POST", "/t/u/"+tok, "List-Unsubscribe=One-Click",
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if done.status != 200 || !strings.Contains(string(done.raw), "You are unsubscribed") ||
		done.header.Get("Content-Security-Policy") == "" {
		t.Fatalf("one-click: %d\n%s", done.status, done.raw)
	}
	if got := b.scalar(`SELECT subscribed::text || ' ' || suppressed::text FROM contacts WHERE tenant_id = 'ten_a'`); got != "false false" {
		t.Fatalf("contact after unsubscribe: %s", got)
	}
	// Posting again (the page's own form) is harmless; the event is one.
	form := "--x\r\nContent-Disposition: form-data; name=\"List-Unsubscribe\"\r\n\r\nOne-Click\r\n--x--\r\n"
	if r := b.raw("POST", "/t/u/"+tok, form, map[string]string{"Content-Type": "multipart/form-data; boundary=x"}); r.status != 200 {
		t.Fatalf("second POST: %d %s", r.status, r.raw)
	}
	if got := b.scalar(`SELECT count(*) FROM events WHERE tenant_id = 'ten_a' AND name = 'email.unsubscribed'`); got != "1" {
		t.Fatalf("%s email.unsubscribed events", got)
	}
	again := b.raw("GET", "/t/u/"+tok, "", nil)
	if !strings.Contains(string(again.raw), "You are unsubscribed") {
		t.Fatalf("page after unsubscribe:\n%s", again.raw)
	}
	b.expectInvalidLink("GET", "/t/u/"+tamper(tok))
	b.expectInvalidLink("POST", "/t/u/"+tamper(tok))
	b.sql(`DELETE FROM tenants WHERE id = 'ten_b'`)
	b.expectInvalidLink("POST", "/t/u/"+b.token(tracking.KindUnsubscribe, "ten_b", "snd_1", ""))
}

// Both tenants have a send snd_1 of a contact cnt_1; tokens signed for
// ten_b touch only ten_b's rows, since every lookup uses the token's tenant.
func TestTrackingTokensStayInTheirTenant(t *testing.T) {
	t.Parallel()
	b := setupOutcomeAPI(t, true)
	b.raw("GET", "/t/o/"+b.token(tracking.KindOpen, "ten_b", "snd_1", ""), "", nil)
	b.raw("GET", "/t/c/"+b.token(tracking.KindClick, "ten_b", "snd_1", "https://acme.test/"), "", nil)
	b.raw("POST", "/t/u/"+b.token(tracking.KindUnsubscribe, "ten_b", "snd_1", ""), "List-Unsubscribe=One-Click", nil)
	if got := b.scalar(`SELECT open_count::text || click_count::text FROM sends WHERE tenant_id = 'ten_a'`); got != "00" {
		t.Fatalf("ten_a's send counted %s", got)
	}
	if got := b.scalar(`SELECT subscribed FROM contacts WHERE tenant_id = 'ten_a'`); got != "true" {
		t.Fatal("ten_a's contact unsubscribed by ten_b's token")
	}
	if got := b.scalar(`SELECT open_count::text || click_count::text || subscribed::text FROM sends s
		JOIN contacts c USING (tenant_id) WHERE tenant_id = 'ten_b'`); got != "11false" {
		t.Fatalf("ten_b's own rows: %s", got)
	}
}

// signed returns the webhook headers for body, signed at ts.
func (b *outcomeBundle) signed(body []byte, ts time.Time) map[string]string {
	b.t.Helper()
	h, err := sgtest.Headers(b.priv, body, ts)
	if err != nil {
		b.t.Fatal(err)
	}
	h["Content-Type"] = "application/json"
	return h
}

func TestSendgridWebhook(t *testing.T) {
	t.Parallel()
	b := setupOutcomeAPI(t, true)
	now := time.Now()
	evs := []map[string]any{
		{"event": "delivered", "sg_event_id": "ev1", "timestamp": now.Unix(), "send_id": "snd_1", "tenant_id": "ten_a"},
		{"event": "bounce", "type": "bounce", "sg_event_id": "ev2", "timestamp": now.Unix(), "send_id": "snd_1", "tenant_id": "ten_b"},
		{"event": "delivered", "sg_event_id": "ev3", "timestamp": now.Unix(), "send_id": "snd_unknown", "tenant_id": "ten_a"},
	}
	body, _ := json.Marshal(evs)

	bad := b.signed(body, now)
	bad[sendgridevents.SignatureHeader] = "MEUCIQDx"
	b.expectErrorRaw("POST", "/webhooks/sendgrid", string(body), bad, 403, "FORBIDDEN")
	b.expectErrorRaw("POST", "/webhooks/sendgrid", string(body), map[string]string{"Content-Type": "application/json"}, 403, "FORBIDDEN")
	b.expectErrorRaw("POST", "/webhooks/sendgrid", string(body), b.signed(body, now.Add(-time.Hour)), 403, "FORBIDDEN")
	tampered := b.signed(body, now)
	b.expectErrorRaw("POST", "/webhooks/sendgrid", strings.Replace(string(body), "bounce", "blocked", 1), tampered, 403, "FORBIDDEN")
	if got := b.scalar(`SELECT count(*) FROM webhook_batches`); got != "0" {
		t.Fatalf("refused posts stored %s batches", got)
	}
	b.expectTooLarge("/webhooks/sendgrid")

	r := b.raw("POST", "/webhooks/sendgrid", string(body), b.signed(body, now))
	if r.status != http.StatusNoContent {
		t.Fatalf("good batch: %d %s", r.status, r.raw)
	}
	id := b.scalar(`SELECT id FROM webhook_batches WHERE applied_at IS NULL`)
	insp := asynq.NewInspector(b.queueOpt)
	defer insp.Close()
	info, err := insp.GetTaskInfo(tasks.QueueWebhooks, "webhook:"+id)
	if err != nil || info.Type != tasks.TypeWebhookBatch {
		t.Fatalf("task webhook:%s: %v %+v", id, err, info)
	}
	// The worker's handler, run directly on the enqueued task.
	h := worker.HandleWebhookBatch(b.svc)
	if err := h.ProcessTask(context.Background(), asynq.NewTask(info.Type, info.Payload)); err != nil {
		t.Fatal(err)
	}
	// The event of a send without a record is parked, not dropped (ADDENDUM 12).
	if got := b.scalar(`SELECT applied::text || ' ' || duplicates::text || ' ' || dropped::text FROM webhook_batches WHERE id = $1`, id); got != "2 0 0" {
		t.Fatalf("batch counts (applied duplicates dropped) %s", got)
	}
	if got := b.scalar(`SELECT string_agg(tenant_id || ':' || delivery_status, ',' ORDER BY tenant_id) FROM sends`); got != "ten_a:delivered,ten_b:bounced" {
		t.Fatalf("sends %s", got)
	}
	if got := b.scalar(`SELECT suppressed FROM contacts WHERE tenant_id = 'ten_b'`); got != "true" {
		t.Fatal("hard bounce did not suppress")
	}

	// A signed body that is not a batch is accepted (no 5xx) and marked
	// applied without an error.
	for _, garbage := range []string{"not json", `{"a":1}`, `[1]`, ""} {
		g := b.raw("POST", "/webhooks/sendgrid", garbage, b.signed([]byte(garbage), now))
		if g.status != http.StatusNoContent {
			t.Fatalf("garbage %q: %d %s", garbage, g.status, g.raw)
		}
	}
	var ids []int64
	rows, err := b.db.Pool.Query(context.Background(), `SELECT id FROM webhook_batches WHERE applied_at IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n int64
		_ = rows.Scan(&n)
		ids = append(ids, n)
	}
	rows.Close()
	for _, n := range ids {
		p, _ := json.Marshal(map[string]int64{"batchId": n})
		if err := h.ProcessTask(context.Background(), asynq.NewTask(tasks.TypeWebhookBatch, p)); err != nil {
			t.Fatalf("garbage batch %d: %v", n, err)
		}
	}
}

// Without SENDGRID_WEBHOOK_PUBLIC_KEY every webhook is refused, signed or not.
func TestSendgridWebhookWithoutKey(t *testing.T) {
	t.Parallel()
	b := setupOutcomeAPI(t, false)
	body := []byte(`[]`)
	b.expectErrorRaw("POST", "/webhooks/sendgrid", string(body), b.signed(body, time.Now()), 403, "FORBIDDEN")
}

func (b *outcomeBundle) expectErrorRaw(method, path, body string, headers map[string]string, status int, code string) {
	b.t.Helper()
	r := b.raw(method, path, body, headers)
	if r.status != status || r.code() != code {
		b.t.Fatalf("%s %s: %d %s, want %d %s", method, path, r.status, r.raw, status, code)
	}
}

// expectTooLarge posts a body over the app's limit to path on a real
// listener (the server answers 413 from Content-Length, before the body).
func (b *outcomeBundle) expectTooLarge(path string) {
	b.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.t.Fatal(err)
	}
	go func() { _ = b.app.Listener(ln) }()
	b.t.Cleanup(func() { _ = b.app.Shutdown() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.t.Fatal(err)
	}
	defer conn.Close()
	// The server answers once it has the header and the first two bytes
	// of the body (it streams bodies; streamPrefetch).
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[{", path, bodyLimit+100)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(data), "PAYLOAD_TOO_LARGE") {
		b.t.Fatalf("too large: %d %s", res.StatusCode, data)
	}
}

// ADDENDUM 12: opt-outs never depend on a record's timing. A one-click
// unsubscribe whose send has no record (refused, never committed, or the
// event raced it) unsubscribes the token's contact, once; a token naming a
// contact the tenant does not have stays 404.
func TestOneClickUnsubscribeWithoutARecord(t *testing.T) {
	t.Parallel()
	b := setupOutcomeAPI(t, true)
	b.sql(`UPDATE tenants SET name = '<b>Acme</b> & Co' WHERE id = 'ten_a'`)
	gone := b.token(tracking.KindUnsubscribe, "ten_a", "snd_gone", "")
	if page := b.raw("GET", "/t/u/"+gone, "", nil); page.status != 200 || !strings.Contains(string(page.raw), "<form") ||
		!strings.Contains(string(page.raw), "from &lt;b&gt;Acme&lt;/b&gt; &amp; Co at ann@example.com") {
		t.Fatalf("page without a record: %d\n%s", page.status, page.raw)
	}
	oneClick := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for range 2 {
		if r := b.raw("POST", "/t/u/"+gone, "List-Unsubscribe=One-Click", oneClick); r.status != 200 {
			t.Fatalf("one-click without a record: %d\n%s", r.status, r.raw)
		}
	}
	if got := b.scalar(`SELECT subscribed FROM contacts WHERE tenant_id = 'ten_a'`); got != "false" {
		t.Fatal("the contact is still subscribed")
	}
	if got := b.scalar(`SELECT count(*)::text || ' ' || min(properties->>'sendId') FROM events
		WHERE tenant_id = 'ten_a' AND name = 'email.unsubscribed'`); got != "1 snd_gone" {
		t.Fatalf("email.unsubscribed events: %s", got)
	}
	if got := b.scalar(`SELECT subscribed FROM contacts WHERE tenant_id = 'ten_b'`); got != "true" {
		t.Fatal("another tenant's contact changed")
	}
	b.sql(`DELETE FROM contacts WHERE tenant_id = 'ten_a'`)
	b.expectInvalidLink("POST", "/t/u/"+gone)
	b.expectInvalidLink("GET", "/t/u/"+gone)
}

// expectInvalidLink checks a tracking page's answer to a link that does not
// verify: 404 as a small HTML page (a person reads it in a browser), never
// the API's JSON, echoing nothing of the token.
func (b *outcomeBundle) expectInvalidLink(method, path string) {
	b.t.Helper()
	r := b.raw(method, path, "", nil)
	if r.status != 404 || r.header.Get("Content-Type") != "text/html; charset=utf-8" ||
		!strings.Contains(string(r.raw), "This link is not valid") || strings.Contains(string(r.raw), path[5:]) ||
		r.header.Get("Location") != "" || r.header.Get("Content-Security-Policy") == "" {
		b.t.Fatalf("%s %s: %d %v\n%s", method, path, r.status, r.header, r.raw)
	}
}
