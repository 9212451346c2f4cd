package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tidings/internal/app"
	"tidings/internal/auth"
	"tidings/internal/config"
	"tidings/internal/testenv"
)

// The audit log (ADDENDUM 25): every write under /api that succeeded has
// one entry, written in the write's own transaction.

// warnings records the warnings an app logs, by message.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, line)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// about returns the warnings that mention s.
func (w *warnings) about(s string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, m := range w.msgs {
		if strings.Contains(m, s) {
			out = append(out, m)
		}
	}
	return out
}

// auditSetup is setup with an in-test DNS server (domain checks) and the
// app's warnings recorded.
func auditSetup(t *testing.T) (*bundle, *warnings) {
	t.Helper()
	z := testenv.DNS(t)
	cfg, err := config.FromLookup(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.DashboardJWTSecret = testSecret
	cfg.RateLimitPerMinute = 10000
	cfg.ArchiveDir = t.TempDir()
	cfg.DNSResolver, cfg.DKIMCNAMESuffix = z.Addr, testDKIMSuffix
	db := testenv.DB(t)
	rdb, prefix := testenv.Redis(t)
	sg, prov := fakeProvider(t, cfg)
	w := &warnings{}
	a, svc := newAppServices(t, app.Infra{Config: cfg, DB: db, Redis: rdb, RedisPrefix: prefix, Provider: prov,
		Log: slog.New(w)}, Deps{Sessions: auth.NewSessionVerifier(cfg.DashboardJWTSecret, "", "")})
	return &bundle{t: t, app: a, svc: svc, db: db, cfg: cfg, rdb: rdb, prefix: prefix, sg: sg, provider: prov}, w
}

// auditRow is an entry as stored.
type auditRow struct {
	tenant, actorType, actorID, action, resourceType, resourceID, ip string
}

// entriesOf reads the entries of one request (by its X-Request-Id).
func entriesOf(t *testing.T, b *bundle, requestID string) []auditRow {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT tenant_id, actor_type, actor_id, action, resource_type,
		resource_id, ip FROM audit_log WHERE request_id = $1 ORDER BY resource_id`, requestID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var r auditRow
		if err := rows.Scan(&r.tenant, &r.actorType, &r.actorID, &r.action, &r.resourceType, &r.resourceID, &r.ip); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// countEntries is how many entries the tenant has.
func countEntries(t *testing.T, b *bundle, tenant string) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE tenant_id = $1`, tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// keyIDOf is the keyId of the tenant's only key.
func keyIDOf(t *testing.T, b *bundle, key string) string {
	t.Helper()
	items := b.expect("GET", "/api/api-keys", key, nil, 200).items()
	return items[0].(map[string]any)["keyId"].(string)
}

// appTestIP is the client address fiber's app.Test gives every request.
const appTestIP = "0.0.0.0"

// TestAuditLogRecordsEachKindOfWrite: a create, an update, a delete, a
// state change and a session-only write each leave one entry naming the
// actor, the action, the resource, the request id answered and the
// client's address; the list shows them newest first.
func TestAuditLogRecordsEachKindOfWrite(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_audit_kinds")
	b := f.b
	keyID := keyIDOf(t, b, f.key)
	sess := b.session("org_audit_kinds")
	seg := b.expect("POST", "/api/segments", f.key, map[string]any{"name": "All", "rules": rule("firstName", "exists", nil)}, 201).body["segmentId"].(string)
	brd := b.expect("POST", "/api/broadcasts", f.key, map[string]any{"name": "News", "templateId": "welcome", "segmentId": seg}, 201).body["broadcastId"].(string)

	created := b.expect("POST", "/api/contacts", f.key, map[string]any{"email": "bob@example.com"}, 201)
	bob := created.body["contactId"].(string)
	updated := b.expect("PATCH", "/api/contacts/"+bob, f.key, map[string]any{"properties": map[string]any{"plan": "pro"}}, 200)
	deleted := b.expect("DELETE", "/api/contacts/"+bob, f.key, nil, 204)
	sent := b.expect("POST", "/api/broadcasts/"+brd+"/send", f.key, nil, 200)
	minted := b.expect("POST", "/api/api-keys", sess, map[string]any{"name": "second"}, 201)

	byKey := auditRow{tenant: "org_audit_kinds", actorType: "apiKey", actorID: keyID, ip: appTestIP}
	bySession := auditRow{tenant: "org_audit_kinds", actorType: "session", actorID: "user-1", ip: appTestIP}
	with := func(r auditRow, action, typ, id string) auditRow {
		r.action, r.resourceType, r.resourceID = action, typ, id
		return r
	}
	tests := []struct {
		desc string
		res  resp
		want auditRow
	}{
		{desc: "create", res: created, want: with(byKey, "contact.create", "contact", bob)},
		{desc: "update", res: updated, want: with(byKey, "contact.update", "contact", bob)},
		{desc: "delete", res: deleted, want: with(byKey, "contact.delete", "contact", bob)},
		{desc: "state change", res: sent, want: with(byKey, "broadcast.send", "broadcast", brd)},
		{desc: "session-only write", res: minted, want: with(bySession, "apiKey.create", "apiKey", minted.body["keyId"].(string))},
	}
	for _, tt := range tests {
		rid := tt.res.header.Get("X-Request-Id")
		got := entriesOf(t, b, rid)
		if rid == "" || len(got) != 1 || got[0] != tt.want {
			t.Errorf("%s: entries of request %q = %+v, want [%+v]", tt.desc, rid, got, tt.want)
		}
	}

	// The list: newest first, in the shape of ADDENDUM 25.
	l := b.expect("GET", "/api/audit-log?limit=5", f.key, nil, 200)
	items := l.items()
	if len(items) != 5 {
		t.Fatalf("%s", l.raw)
	}
	first := items[0].(map[string]any)
	actor := first["actor"].(map[string]any)
	if first["action"] != "apiKey.create" || first["resourceType"] != "apiKey" || first["resourceId"] != minted.body["keyId"] ||
		first["requestId"] != minted.header.Get("X-Request-Id") || first["ip"] != appTestIP ||
		actor["type"] != "session" || actor["id"] != "user-1" || !strings.HasPrefix(first["auditId"].(string), "aud_") ||
		!timestampRE.MatchString(first["at"].(string)) {
		t.Fatalf("newest entry: %v", first)
	}
	var actions []string
	for _, it := range items {
		actions = append(actions, it.(map[string]any)["action"].(string))
	}
	if want := []string{"apiKey.create", "broadcast.send", "contact.delete", "contact.update", "contact.create"}; !slices.Equal(actions, want) {
		t.Fatalf("actions %v, want %v", actions, want)
	}
}

// TestAuditLogRefusedWritesLeaveNone: a write refused for its input, for
// a missing resource, for a conflict or for its credential leaves no
// entry, and so does a replayed Idempotency-Key answer.
func TestAuditLogRefusedWritesLeaveNone(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_audit_refused")
	b := f.b
	before := countEntries(t, b, f.org)
	b.expectError("POST", "/api/contacts", f.key, map[string]any{"email": "not-an-email"}, 400, "VALIDATION_ERROR")
	b.expectError("POST", "/api/contacts", f.key, map[string]any{"email": "ann@example.com"}, 409, "CONTACT_EXISTS")
	b.expectError("PATCH", "/api/contacts/cnt_unknown", f.key, map[string]any{"properties": map[string]any{"a": 1}}, 404, "CONTACT_NOT_FOUND")
	b.expectError("DELETE", "/api/contacts/cnt_unknown", f.key, nil, 404, "CONTACT_NOT_FOUND")
	b.expectError("POST", "/api/api-keys", f.key, map[string]any{"name": "x"}, 403, "FORBIDDEN")
	b.expectError("POST", "/api/events", f.key, map[string]any{"email": "nobody@example.com", "name": "x"}, 404, "CONTACT_NOT_FOUND")
	b.expectError("POST", "/api/segments", f.key, map[string]any{"name": "S", "rules": segRef("seg_none", "memberOf")}, 400, "VALIDATION_ERROR")
	// The provider refuses the message: its record goes, and no entry.
	b.sg.FailNext(1, http.StatusBadRequest, 0)
	b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome"}, 502)
	if n := countEntries(t, b, f.org); n != before {
		t.Fatalf("refused writes left %d entries", n-before)
	}
	// A replayed answer is no new write.
	first := b.upload("POST", "/api/topics", f.key, "application/json",
		strings.NewReader(`{"topicId":"news","name":"News","default":"opt_in"}`), "Idempotency-Key: k1")
	again := b.upload("POST", "/api/topics", f.key, "application/json",
		strings.NewReader(`{"topicId":"news","name":"News","default":"opt_in"}`), "Idempotency-Key: k1")
	if first.status != 201 || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("%d %s / %s", first.status, first.raw, again.header)
	}
	if n := countEntries(t, b, f.org); n != before+1 {
		t.Fatalf("a write and its replay left %d entries, want 1", n-before)
	}
}

// TestAuditLogFiltersAndPages: actor, action, resourceType and since
// narrow the list; pages follow the cursor; bad parameters are
// VALIDATION_ERROR.
func TestAuditLogFiltersAndPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sess := b.tenant("org_audit_list")
	key := b.apiKey(sess)
	keyID := keyIDOf(t, b, key)
	var contactIDs []string
	for i := range 5 {
		r := b.expect("POST", "/api/contacts", key, map[string]any{"email": fmt.Sprintf("c%d@example.com", i)}, 201)
		contactIDs = append(contactIDs, r.body["contactId"].(string))
	}
	mid := time.Now()
	b.expect("PATCH", "/api/contacts/"+contactIDs[0], key, map[string]any{"userId": "u0"}, 200)
	b.expect("PUT", "/api/templates/t1", sess, map[string]any{"name": "T", "subject": "S", "content": "<p>x</p>"}, 201)

	ids := func(path string) []string {
		t.Helper()
		var out []string
		for _, it := range b.expect("GET", path, key, nil, 200).items() {
			e := it.(map[string]any)
			out = append(out, e["action"].(string)+" "+e["resourceId"].(string))
		}
		return out
	}
	tests := []struct {
		desc, query string
		want        []string
	}{
		{desc: "action", query: "action=contact.update", want: []string{"contact.update " + contactIDs[0]}},
		{desc: "resource type", query: "resourceType=template", want: []string{"template.put t1"}},
		{desc: "actor: the session's subject", query: "actor=user-1", want: []string{"template.put t1", "apiKey.create " + keyID, "tenant.create org_audit_list"}},
		{desc: "actor and action", query: "actor=" + keyID + "&action=contact.create&limit=2",
			want: []string{"contact.create " + contactIDs[4], "contact.create " + contactIDs[3]}},
		{desc: "since", query: "since=" + url.QueryEscape(mid.UTC().Format(time.RFC3339Nano)),
			want: []string{"template.put t1", "contact.update " + contactIDs[0]}},
		{desc: "unknown action", query: "action=contact.explode", want: nil},
	}
	for _, tt := range tests {
		if got := ids("/api/audit-log?" + tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.desc, got, tt.want)
		}
	}

	// Pages of 3 cover the 9 entries once each, newest first.
	var all []string
	path := "/api/audit-log?limit=3"
	for page := 0; ; page++ {
		r := b.expect("GET", path, key, nil, 200)
		for _, it := range r.items() {
			all = append(all, it.(map[string]any)["auditId"].(string))
		}
		next, _ := r.body["nextCursor"].(string)
		if next == "" {
			break
		}
		if page > 5 {
			t.Fatal("pages never end")
		}
		path = "/api/audit-log?limit=3&cursor=" + url.QueryEscape(next)
	}
	if len(all) != 9 || len(slices.Compact(slices.Clone(all))) != 9 {
		t.Fatalf("pages: %v", all)
	}

	for _, q := range []string{"limit=0", "limit=101", "cursor=forged", "since=yesterday", "actorId=x", "action=" + strings.Repeat("a", 300)} {
		b.expectError("GET", "/api/audit-log?"+q, key, nil, 400, "VALIDATION_ERROR")
	}
}

// TestAuditLogTenantsApart: another tenant never sees the entries, not
// even filtering by the first tenant's actor or resource.
func TestAuditLogTenantsApart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.apiKey(b.tenant("org_audit_a"))
	keyID := keyIDOf(t, b, key)
	c := b.expect("POST", "/api/contacts", key, map[string]any{"email": "a@example.com"}, 201).body["contactId"].(string)
	other := b.apiKey(b.tenant("org_audit_b"))
	for _, q := range []string{"", "?actor=" + keyID, "?actor=user-1", "?resourceType=contact", "?action=contact.create"} {
		r := b.expect("GET", "/api/audit-log"+q, other, nil, 200)
		if strings.Contains(string(r.raw), c) || strings.Contains(string(r.raw), keyID) || strings.Contains(string(r.raw), "org_audit_a") {
			t.Fatalf("%s: tenant b sees tenant a's entries: %s", q, r.raw)
		}
	}
	if n := len(b.expect("GET", "/api/audit-log?actor=user-1", key, nil, 200).items()); n != 2 { // tenant.create, apiKey.create
		t.Fatalf("tenant a sees %d of its session's entries", n)
	}
}

// TestAuditLogReadOnly: no route writes or deletes an entry.
func TestAuditLogReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.apiKey(b.tenant("org_audit_ro"))
	id := b.expect("GET", "/api/audit-log", key, nil, 200).items()[0].(map[string]any)["auditId"].(string)
	before := countEntries(t, b, "org_audit_ro")
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		for _, p := range []string{"/api/audit-log", "/api/audit-log/" + id} {
			r := b.do(m, p, key, map[string]any{"action": "x"})
			if r.status != 404 && r.status != 405 {
				t.Errorf("%s %s: %d %s", m, p, r.status, r.raw)
			}
		}
	}
	if n := countEntries(t, b, "org_audit_ro"); n != before {
		t.Fatalf("entries %d, want %d", n, before)
	}
}
