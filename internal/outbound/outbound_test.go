package outbound_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/events"
	"tidings/internal/outbound"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const tenant = "ten_wh"

type fixture struct {
	t   *testing.T
	ctx context.Context
	svc *app.Services
}

func newFixture(t *testing.T, allowPrivate bool) *fixture {
	t.Helper()
	cfg := apptest.Config(t)
	cfg.WebhookAllowPrivateTargets = allowPrivate
	cfg.WebhookRetrySchedule = []time.Duration{time.Millisecond, time.Millisecond}
	f := &fixture{t: t, ctx: context.Background(), svc: apptest.Services(t, app.Infra{Config: cfg})}
	f.exec(`INSERT INTO tenants (id, name) VALUES ($1, 'W'), ('ten_other', 'O')`, tenant)
	return f
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.svc.DB.Pool.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// receiver is a local endpoint that records what it is sent and answers
// with the statuses queued (200 when none is).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies [][]byte
	answer []int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got, r.bodies = append(r.got, req), append(r.bodies, b)
		code := 200
		if len(r.answer) > 0 {
			code, r.answer = r.answer[0], r.answer[1:]
		}
		r.mu.Unlock()
		if code == http.StatusFound {
			w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(strings.Repeat("x", 4096)))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.got) }

// deliver runs the deliverer until nothing is due.
func (f *fixture) deliver() {
	f.t.Helper()
	for range 20 {
		n, err := f.svc.Deliverer.Run(f.ctx)
		if err != nil {
			f.t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

func TestEndpointValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	s := f.svc.Outbound
	for name, in := range map[string]outbound.Input{
		"no url":        {},
		"ftp":           {URL: ptr("ftp://example.com/x")},
		"loopback":      {URL: ptr("https://127.0.0.1/hook")},
		"private":       {URL: ptr("https://10.0.0.8/hook")},
		"localhost":     {URL: ptr("http://localhost:8080/hook")},
		"metadata":      {URL: ptr("http://169.254.169.254/latest")},
		"ipv6 loopback": {URL: ptr("https://[::1]/hook")},
		"credentials":   {URL: ptr("https://user:pw@8.8.8.8/hook")},
		"unknown event": {URL: ptr("https://8.8.8.8/hook"), Events: &[]string{"email.sent", "email.exploded"}},
	} {
		if _, err := s.Create(f.ctx, tenant, in); !apperr.IsCode(err, "VALIDATION_ERROR") {
			t.Errorf("%s: %v", name, err)
		}
	}
	e, err := s.Create(f.ctx, tenant, outbound.Input{URL: ptr("https://8.8.8.8/hook"), Events: &[]string{"email.sent", "email.sent"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.ID, "whk_") || !strings.HasPrefix(e.Secret, "whsec_") || len(e.Events) != 1 || !e.Enabled {
		t.Fatalf("%+v", e)
	}
	for range outbound.MaxEndpoints - 1 {
		if _, err := s.Create(f.ctx, tenant, outbound.Input{URL: ptr("https://8.8.8.8/x")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(f.ctx, tenant, outbound.Input{URL: ptr("https://8.8.8.8/x")}); !apperr.IsCode(err, "VALIDATION_ERROR") {
		t.Fatalf("an 11th endpoint: %v", err)
	}
	// Another tenant sees none of them.
	if _, err := s.Get(f.ctx, "ten_other", e.ID); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("%v", err)
	}
	if _, err := s.Update(f.ctx, "ten_other", e.ID, outbound.Input{Enabled: ptr(false)}); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("%v", err)
	}
	if err := s.Delete(f.ctx, "ten_other", e.ID); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("%v", err)
	}
	if _, err := s.Rotate(f.ctx, "ten_other", e.ID); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("%v", err)
	}
	if _, _, err := s.Deliveries(f.ctx, "ten_other", e.ID, "", page.Params{Limit: 10}); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("%v", err)
	}
	if rows, _, err := s.List(f.ctx, "ten_other", page.Params{Limit: 10}); err != nil || len(rows) != 0 {
		t.Fatalf("%d %v", len(rows), err)
	}
}

// Each fact with an event type writes its message in its own
// transaction, for the endpoints that want it; a counter moving is not a
// contact update.
func TestEmission(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	rcv := newReceiver(t)
	all, err := f.svc.Outbound.Create(f.ctx, tenant, outbound.Input{URL: ptr(rcv.srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	onlySent, err := f.svc.Outbound.Create(f.ctx, tenant, outbound.Input{URL: ptr(rcv.srv.URL), Events: &[]string{"email.sent"}})
	if err != nil {
		t.Fatal(err)
	}
	// types fans the outbox out (as the worker does before each claim)
	// and lists the types of the endpoint's messages.
	types := func(endpoint string) []string {
		if _, err := f.svc.Deliverer.FanOut(f.ctx); err != nil {
			t.Fatal(err)
		}
		rows, err := f.svc.DB.Pool.Query(f.ctx, `SELECT m.type FROM webhook_deliveries d JOIN webhook_messages m
			ON m.tenant_id = d.tenant_id AND m.id = d.message_id WHERE d.endpoint_id = $1 ORDER BY m.created_at, m.type`, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			out = append(out, s)
		}
		return out
	}
	c, err := f.svc.Contacts.Create(f.ctx, tenant, contacts.Input{Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE contacts SET properties = '{"plan":"pro"}' WHERE tenant_id = $1`, tenant)
	f.exec(`UPDATE contacts SET total_sends = total_sends + 1, last_event_at = now() WHERE tenant_id = $1`, tenant) // not an update
	err = f.svc.DB.InTx(f.ctx, func(q *store.Tx) error {
		for _, name := range []string{events.Sent, events.Delivered, events.Opened, events.Clicked, events.Bounced, events.Complained, events.Unsubscribed} {
			if _, err := f.svc.Events.RecordSystem(f.ctx, q, events.System{TenantID: tenant, ContactID: c.ID, Name: name,
				Properties: map[string]any{"sendId": "snd_1"}, Timestamp: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The fan-out names the contact of an email.* fact.
	types(all.ID)
	var email string
	if err := f.svc.DB.Pool.QueryRow(f.ctx, `SELECT data->>'email' FROM webhook_messages WHERE tenant_id = $1 AND type = 'email.sent'`,
		tenant).Scan(&email); err != nil || email != "ann@example.com" {
		t.Fatalf("email.sent data names %q (%v), want ann@example.com", email, err)
	}
	f.exec(`INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data) VALUES
		($1, 'tle_1', $2, 'sequence_entered', now(), '{"sequenceId":"s"}'),
		($1, 'tle_2', $2, 'sequence_exited', now(), '{"sequenceId":"s","reason":"manual"}'),
		($1, 'tle_3', $2, 'sequence_completed', now(), '{"sequenceId":"s"}'),
		($1, 'tle_4', $2, 'scheduled', now(), '{}'),
		($1, 'tle_5', $2, 'segment_entered', now(), '{"segmentId":"seg_1"}'),
		($1, 'tle_6', $2, 'segment_exited', now(), '{"segmentId":"seg_1"}')`, tenant, c.ID)
	f.exec(`UPDATE contacts SET subscribed = false WHERE tenant_id = $1`, tenant)
	f.exec(`UPDATE contacts SET suppressed = true WHERE tenant_id = $1`, tenant)
	f.exec(`INSERT INTO broadcasts (tenant_id, id, name, template_id, segment_id, status) VALUES ($1, 'brd_1', 'B', 't', 's', 'sending')`, tenant)
	f.exec(`UPDATE broadcasts SET status = 'sent' WHERE tenant_id = $1`, tenant)
	f.exec(`UPDATE tenants SET sending_status = 'paused' WHERE id = $1`, tenant)
	f.exec(`DELETE FROM contacts WHERE tenant_id = $1`, tenant)
	// A fact that rolls back writes nothing.
	tx, _ := f.svc.DB.Pool.Begin(f.ctx)
	_, _ = tx.Exec(f.ctx, `INSERT INTO contacts (tenant_id, id, email) VALUES ($1, 'cnt_rb', 'rb@example.com')`, tenant)
	_ = tx.Rollback(f.ctx)

	want := []string{"contact.created", "contact.updated", "email.bounced", "email.clicked", "email.complained",
		"email.delivered", "email.opened", "email.sent", "email.unsubscribed", "sequence.completed", "sequence.entered",
		"sequence.exited", "segment.entered", "segment.exited", "contact.unsubscribed", "contact.suppressed",
		"broadcast.sent", "tenant.paused", "contact.deleted"}
	got := types(all.ID)
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		if seen[w] != 1 {
			t.Errorf("%s: %d messages, want 1 (all: %v)", w, seen[w], got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d messages, want %d: %v", len(got), len(want), got)
	}
	if g := types(onlySent.ID); len(g) != 1 || g[0] != "email.sent" {
		t.Errorf("the email.sent endpoint got %v", g)
	}
	// Another tenant's facts reach none of them.
	f.exec(`INSERT INTO contacts (tenant_id, id, email) VALUES ('ten_other', 'cnt_o', 'o@example.com')`)
	if n := len(types(all.ID)); n != len(want) {
		t.Fatalf("another tenant's contact reached this endpoint")
	}
	// Every message goes out once, signed.
	f.deliver()
	if rcv.count() != len(want)+1 {
		t.Fatalf("receiver got %d, want %d", rcv.count(), len(want)+1)
	}
}

// The statement triggers that write facts (new contacts, email.* events,
// sequence timeline entries) judge each row by its own tenant: a
// statement whose rows belong to several tenants writes the facts of the
// tenant that has an endpoint, and only those; a tenant whose only
// endpoint is disabled gets none.
func TestEmissionInAStatementOfManyTenants(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	rcv := newReceiver(t)
	if _, err := f.svc.Outbound.Create(f.ctx, tenant, outbound.Input{URL: ptr(rcv.srv.URL)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Outbound.Create(f.ctx, "ten_other", outbound.Input{URL: ptr(rcv.srv.URL), Enabled: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	f.exec(`INSERT INTO tenants (id, name) VALUES ('ten_none', 'N')`)
	tenants := []string{"ten_none", "ten_other", tenant}
	f.exec(`INSERT INTO contacts (tenant_id, id, email) SELECT t, 'cnt_' || t, 'a@example.com' FROM unnest($1::text[]) t`, tenants)
	f.exec(`INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
		SELECT t, 'evt_' || t, 'cnt_' || t, 'email.sent', '{}', now() FROM unnest($1::text[]) t`, tenants)
	f.exec(`INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
		SELECT t, 'tle_' || t, 'cnt_' || t, 'sequence_entered', now(), '{}' FROM unnest($1::text[]) t`, tenants)
	rows, err := f.svc.DB.Pool.Query(f.ctx, `SELECT tenant_id || ' ' || type FROM webhook_outbox ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if want := []string{tenant + " contact.created", tenant + " email.sent", tenant + " sequence.entered"}; err != nil ||
		strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("outbox %v (%v), want %v", got, err, want)
	}
}

// A delivery is signed with the endpoint's secret (checked with the
// Standard Webhooks reference library), keeps its webhook-id across
// retries, follows the schedule, and fails for good past it; during a
// rotation both secrets sign.
func TestDelivery(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	rcv := newReceiver(t)
	e, err := f.svc.Outbound.Create(f.ctx, tenant, outbound.Input{URL: ptr(rcv.srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	rcv.answer = []int{500, http.StatusFound} // a failure, then a redirect (not followed: a failure)
	if err := f.svc.Outbound.Test(f.ctx, tenant, e.ID); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		f.deliver()
		time.Sleep(5 * time.Millisecond) // the test schedule's 1 ms waits
	}
	if rcv.count() != 3 {
		t.Fatalf("%d attempts, want 3", rcv.count())
	}
	wh, err := standardwebhooks.NewWebhook(e.Secret)
	if err != nil {
		t.Fatal(err)
	}
	id := rcv.got[0].Header.Get("webhook-id")
	for i, r := range rcv.got {
		if err := wh.Verify(rcv.bodies[i], r.Header); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		if r.Header.Get("webhook-id") != id || !strings.HasPrefix(id, "msg_") {
			t.Fatalf("attempt %d: webhook-id %q, first %q", i, r.Header.Get("webhook-id"), id)
		}
	}
	var body outbound.Body
	if err := json.Unmarshal(rcv.bodies[0], &body); err != nil || body.Type != "webhook.test" || body.Timestamp == "" {
		t.Fatalf("%s %v", rcv.bodies[0], err)
	}
	ds, _, err := f.svc.Outbound.Deliveries(f.ctx, tenant, e.ID, "", page.Params{Limit: 10})
	if err != nil || len(ds) != 1 || ds[0].Status != "succeeded" || ds[0].Attempts != 3 {
		t.Fatalf("%+v %v", ds, err)
	}

	// Past the schedule (two waits): failed; a manual retry is one more
	// attempt of the same message.
	rcv.answer = []int{500, 500, 500}
	if err := f.svc.Outbound.Test(f.ctx, tenant, e.ID); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		f.deliver()
		time.Sleep(5 * time.Millisecond)
	}
	ds, _, _ = f.svc.Outbound.Deliveries(f.ctx, tenant, e.ID, "failed", page.Params{Limit: 10})
	if len(ds) != 1 || ds[0].Attempts != 3 || ds[0].LastStatusCode == nil || *ds[0].LastStatusCode != 500 ||
		ds[0].LastError == nil || len(*ds[0].LastError) > len("HTTP 500: ")+256 {
		t.Fatalf("%+v", ds)
	}
	before := rcv.count()
	if err := f.svc.Outbound.Retry(f.ctx, tenant, e.ID, ds[0].MessageID); err != nil {
		t.Fatal(err)
	}
	f.deliver()
	ds, _, _ = f.svc.Outbound.Deliveries(f.ctx, tenant, e.ID, "succeeded", page.Params{Limit: 10})
	if rcv.count() != before+1 || len(ds) != 2 {
		t.Fatalf("retry: %d attempts, %d succeeded", rcv.count()-before, len(ds))
	}

	// Rotation: two signatures, each verifies with its secret.
	rot, err := f.svc.Outbound.Rotate(f.ctx, tenant, e.ID)
	if err != nil || rot.Secret == e.Secret {
		t.Fatal(err)
	}
	if err := f.svc.Outbound.Test(f.ctx, tenant, e.ID); err != nil {
		t.Fatal(err)
	}
	f.deliver()
	last := rcv.got[len(rcv.got)-1]
	if n := len(strings.Fields(last.Header.Get("webhook-signature"))); n != 2 {
		t.Fatalf("%d signatures during a rotation", n)
	}
	for _, secret := range []string{e.Secret, rot.Secret} {
		wh, _ := standardwebhooks.NewWebhook(secret)
		if err := wh.Verify(rcv.bodies[len(rcv.bodies)-1], last.Header); err != nil {
			t.Fatalf("secret %s…: %v", secret[:10], err)
		}
	}
}

// Failing for 5 days disables the endpoint with a reason; re-enabling it
// starts afresh.
func TestAutoDisable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	rcv := newReceiver(t)
	rcv.answer = []int{500}
	e, err := f.svc.Outbound.Create(f.ctx, tenant, outbound.Input{URL: ptr(rcv.srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE webhook_endpoints SET failing_since = now() - interval '5 days 1 minute' WHERE id = $1`, e.ID)
	if err := f.svc.Outbound.Test(f.ctx, tenant, e.ID); err != nil {
		t.Fatal(err)
	}
	f.deliver()
	got, _ := f.svc.Outbound.Get(f.ctx, tenant, e.ID)
	if got.Enabled || got.DisabledReason == nil {
		t.Fatalf("%+v", got)
	}
	got, err = f.svc.Outbound.Update(f.ctx, tenant, e.ID, outbound.Input{Enabled: ptr(true)})
	if err != nil || !got.Enabled || got.DisabledReason != nil || got.FailingSince != nil {
		t.Fatalf("%+v %v", got, err)
	}
}

// Every delivery checks the address it dials: an endpoint stored with a
// loopback target (as a name that resolved elsewhere at create time
// would, DNS rebinding) is refused when it is delivered to.
func TestDeliveryRefusesPrivateTargets(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	rcv := newReceiver(t)
	f.exec(`INSERT INTO webhook_endpoints (tenant_id, id, url, secret) VALUES ($1, 'whk_r', $2, $3)`, tenant,
		rcv.srv.URL, outbound.NewSecret())
	if err := f.svc.Outbound.Test(f.ctx, tenant, "whk_r"); err != nil {
		t.Fatal(err)
	}
	f.deliver()
	if rcv.count() != 0 {
		t.Fatal("a loopback target was reached")
	}
	ds, _, _ := f.svc.Outbound.Deliveries(f.ctx, tenant, "whk_r", "", page.Params{Limit: 10})
	if len(ds) != 1 || ds[0].LastError == nil || !strings.Contains(*ds[0].LastError, "public") {
		t.Fatalf("%+v", ds)
	}
}

// Fan-outs running side by side (two worker slots) turn each outbox row
// into exactly one message, and a fan-out that rolls back leaves its rows
// for the next: a message is neither lost nor doubled.
func TestFanOutOnceEach(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	rcv := newReceiver(t)
	if _, err := f.svc.Outbound.Create(f.ctx, tenant, outbound.Input{URL: ptr(rcv.srv.URL)}); err != nil {
		t.Fatal(err)
	}
	const n = 5000
	f.exec(`INSERT INTO webhook_outbox (tenant_id, type, data)
		SELECT $1, 'email.delivered', jsonb_build_object('contactId', 'cnt_gone', 'sendId', 'snd_' || g) FROM generate_series(1, $2::int) g`, tenant, n)
	// A fan-out whose transaction rolls back.
	tx, err := f.svc.DB.Pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := queries.New(tx).WebhookFanOut(f.ctx, 100); err != nil || n != 100 {
		t.Fatalf("%d %v", n, err)
	}
	_ = tx.Rollback(f.ctx)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := f.svc.Deliverer.FanOut(f.ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var msgs, distinct, left int
	if err := f.svc.DB.Pool.QueryRow(f.ctx, `SELECT count(*), count(DISTINCT data->>'sendId'),
		(SELECT count(*) FROM webhook_outbox) FROM webhook_messages WHERE tenant_id = $1`, tenant).Scan(&msgs, &distinct, &left); err != nil {
		t.Fatal(err)
	}
	if msgs != n || distinct != n || left != 0 {
		t.Fatalf("%d messages (%d distinct) for %d facts, %d left in the outbox", msgs, distinct, n, left)
	}
}

// addressLike matches an IPv4 address or an IPv6 one (two groups around a
// colon, or "::"), as a resolver's, a resolved or a dialled address would
// appear in an error.
var addressLike = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|[0-9a-fA-F]{1,4}::?[0-9a-fA-F]{1,4}:|::[0-9a-fA-F]|\[::`)

// What a failed delivery stores (and GET .../deliveries answers) says what
// failed without the resolver's address, the addresses a name resolved to,
// or the address dialled; so does the create-time refusal of a name.
func TestDeliveryErrorsNameNoAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	rcv := newReceiver(t)
	_, port, _ := strings.Cut(strings.TrimPrefix(rcv.srv.URL, "http://"), ":")
	for id, url := range map[string]string{
		"whk_literal":  rcv.srv.URL,                          // 127.0.0.1: refused as it is dialled
		"whk_resolved": "http://localhost:" + port + "/hook", // resolves to loopback
		"whk_nohost":   "http://nonexistent.invalid:8080/x",  // the resolver's answer
	} {
		f.exec(`INSERT INTO webhook_endpoints (tenant_id, id, url, secret) VALUES ($1, $2, $3, $4)`, tenant, id, url,
			outbound.NewSecret())
		if err := f.svc.Outbound.Test(f.ctx, tenant, id); err != nil {
			t.Fatal(err)
		}
	}
	f.deliver()
	want := map[string]string{"whk_literal": "public", "whk_resolved": "public", "whk_nohost": "resolve"}
	for id, w := range want {
		ds, _, err := f.svc.Outbound.Deliveries(f.ctx, tenant, id, "", page.Params{Limit: 10})
		if err != nil || len(ds) != 1 || ds[0].LastError == nil {
			t.Fatalf("%s: %+v %v", id, ds, err)
		}
		msg := *ds[0].LastError
		if addressLike.MatchString(msg) || strings.Contains(msg, "lookup") || !strings.Contains(msg, w) {
			t.Errorf("%s: stored error %q names an address (or not what failed: want %q)", id, msg, w)
		}
	}
	if rcv.count() != 0 {
		t.Fatal("a loopback target was reached")
	}
	_, err := f.svc.Outbound.Create(f.ctx, tenant, outbound.Input{URL: ptr("https://nonexistent.invalid/hook")})
	if !apperr.IsCode(err, "VALIDATION_ERROR") || addressLike.MatchString(err.Error()) ||
		addressLike.MatchString(fmt.Sprintf("%+v", err)) {
		t.Fatalf("create of a name that does not resolve: %+v", err)
	}
}

// A webhook URL's port is 80, 443 or 1024-65535, on create and PATCH, and
// again as a delivery dials (an endpoint stored before the rule): any other
// would let a webhook read the banner of an SSH or SMTP server.
func TestEndpointPorts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	s := f.svc.Outbound
	for _, u := range []string{"https://8.8.8.8:22/x", "http://8.8.8.8:25/x", "https://8.8.8.8:0/x", "https://8.8.8.8:1023/x",
		"http://8.8.8.8:6/x", "https://8.8.8.8:65536/x"} {
		if _, err := s.Create(f.ctx, tenant, outbound.Input{URL: ptr(u)}); !apperr.IsCode(err, "VALIDATION_ERROR") {
			t.Errorf("create %s: %v", u, err)
		}
	}
	var e queries.WebhookEndpoint
	for _, u := range []string{"https://8.8.8.8/x", "http://8.8.8.8/x", "http://8.8.8.8:80/x", "https://8.8.8.8:443/x",
		"https://8.8.8.8:1024/x", "https://8.8.8.8:8443/x", "https://8.8.8.8:65535/x"} {
		var err error
		if e, err = s.Create(f.ctx, tenant, outbound.Input{URL: ptr(u)}); err != nil {
			t.Errorf("create %s: %v", u, err)
		}
	}
	if _, err := s.Update(f.ctx, tenant, e.ID, outbound.Input{URL: ptr("https://8.8.8.8:25/x")}); !apperr.IsCode(err, "VALIDATION_ERROR") {
		t.Errorf("PATCH to port 25: %v", err)
	}
	if got, _ := s.Get(f.ctx, tenant, e.ID); got.Url != "https://8.8.8.8:65535/x" {
		t.Errorf("a refused PATCH changed the URL to %s", got.Url)
	}
	// Stored before the rule: refused as it is dialled, and said so.
	f.exec(`INSERT INTO webhook_endpoints (tenant_id, id, url, secret) VALUES ($1, 'whk_ssh', 'http://127.0.0.1:22/', $2)`,
		tenant, outbound.NewSecret())
	if err := s.Test(f.ctx, tenant, "whk_ssh"); err != nil {
		t.Fatal(err)
	}
	f.deliver()
	ds, _, _ := s.Deliveries(f.ctx, tenant, "whk_ssh", "", page.Params{Limit: 10})
	if len(ds) != 1 || ds[0].LastError == nil || !strings.Contains(*ds[0].LastError, "port") {
		t.Fatalf("%+v", ds)
	}
}

// An attempt is signed at the time it is sent (its webhook-timestamp), not
// at the message's creation: a receiver checking the timestamp's tolerance
// (5 minutes in the reference library) accepts a retry made hours after
// the fact. The body's timestamp stays the fact's.
func TestSignedAtSendTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	rcv := newReceiver(t)
	e, err := f.svc.Outbound.Create(f.ctx, tenant, outbound.Input{URL: ptr(rcv.srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Outbound.Test(f.ctx, tenant, e.ID); err != nil {
		t.Fatal(err)
	}
	created := time.Now().Add(-3 * time.Hour).Truncate(time.Millisecond)
	f.exec(`UPDATE webhook_messages SET created_at = $2 WHERE tenant_id = $1`, tenant, created)
	before := time.Now().Unix()
	f.deliver()
	if rcv.count() != 1 {
		t.Fatalf("%d attempts", rcv.count())
	}
	h := rcv.got[0].Header
	ts, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	if err != nil || ts < before {
		t.Fatalf("webhook-timestamp %q, sent at or after %d", h.Get("webhook-timestamp"), before)
	}
	wh, _ := standardwebhooks.NewWebhook(e.Secret)
	if err := wh.Verify(rcv.bodies[0], h); err != nil {
		t.Fatalf("a delivery of a 3-hour-old message does not verify: %v", err)
	}
	var body outbound.Body
	if err := json.Unmarshal(rcv.bodies[0], &body); err != nil || body.Timestamp != created.UTC().Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("body timestamp %q (%v), want the message's %s", body.Timestamp, err, created.UTC())
	}
}

// One tenant's hanging endpoints do not delay another tenant's delivery:
// a claim takes at most a tenant's share of deliveries in flight (counted
// across every deliverer, in the database), and each outcome is written
// as its attempt ends, not when the batch's slowest does. Tenant A's four
// endpoints hang until released; tenant B's delivery, due after all of
// A's, is delivered and recorded while they hang.
func TestHangingTenantDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	release := make(chan struct{})
	var mu sync.Mutex
	started, ended := 0, 0
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		started++
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		ended++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	fast := newReceiver(t)
	for range 4 {
		if _, err := f.svc.Outbound.Create(f.ctx, tenant, outbound.Input{URL: ptr(hang.URL)}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := f.svc.Outbound.Create(f.ctx, "ten_other", outbound.Input{URL: ptr(fast.srv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	f.exec(`INSERT INTO contacts (tenant_id, id, email) SELECT $1, 'cnt_' || g, 'c' || g || '@example.com'
		FROM generate_series(1, 60) g`, tenant)
	if _, err := f.svc.Deliverer.FanOut(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE webhook_deliveries SET next_attempt_at = now() - interval '1 minute' WHERE tenant_id = $1`, tenant)
	if err := f.svc.Outbound.Test(f.ctx, "ten_other", b.ID); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	go func() { _, err := f.svc.Deliverer.Run(f.ctx); done <- err }()
	for {
		ds, _, err := f.svc.Outbound.Deliveries(f.ctx, "ten_other", b.ID, "succeeded", page.Params{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 1 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the batch ended (%v) before tenant B's delivery was recorded: it waited for A's hanging endpoints", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	mu.Lock()
	e := ended
	mu.Unlock()
	if e != 0 {
		t.Fatalf("%d of A's attempts ended before B's was recorded", e)
	}
	// A's share is in flight: another deliverer (another worker) takes
	// none of A's 200 due deliveries.
	var inFlight int
	if err := f.svc.DB.Pool.QueryRow(f.ctx, `SELECT count(*) FROM webhook_deliveries WHERE tenant_id = $1 AND leased_until > now()`,
		tenant).Scan(&inFlight); err != nil {
		t.Fatal(err)
	}
	if inFlight == 0 || inFlight > outbound.DefaultPerTenant {
		t.Fatalf("%d of A's deliveries in flight, want 1 to %d", inFlight, outbound.DefaultPerTenant)
	}
	if n, err := f.svc.Deliverer.Run(f.ctx); err != nil || n != 0 {
		t.Fatalf("a second deliverer claimed %d (%v) while A's share was in flight", n, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if started != inFlight {
		t.Fatalf("A's receiver saw %d attempts, %d were claimed", started, inFlight)
	}
}
