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

// auditStep is one successful request of a write route of the table and
// what its entries must say.
type auditStep struct {
	route  string // "METHOD path" as the route table names it
	action string
	// do sends the request, checks it succeeded and returns the ids of the
	// resources its entries name (one entry each).
	do func() (resp, []string)
	// nothing: the route writes nothing to the database, so its entry is
	// written after it rather than in its transaction.
	nothing bool
}

// TestAuditEveryWriteRoute walks the route table: every POST, PUT, PATCH
// and DELETE under /api must have a step below (a new write route fails
// the test until it has one), and each step, a write that succeeds, must
// leave its entries: the action, the resource type and id, the actor, the
// request id answered and the client address, written in the write's own
// transaction (no warning that it was written after). One subtest per
// resource type.
func TestAuditEveryWriteRoute(t *testing.T) {
	t.Parallel()
	b, warned := auditSetup(t)
	const org = "org_audit_walk"
	sess := b.tenant(org)
	key := b.apiKey(sess)
	keyID := keyIDOf(t, b, key)
	ann := b.expect("POST", "/api/contacts", key, map[string]any{"email": "ann@example.com",
		"properties": map[string]any{"firstName": "Ann"}}, 201).body["contactId"].(string)
	mjml := `<mjml><mj-body><mj-section><mj-column><mj-text>Hi</mj-text></mj-column></mj-section></mj-body></mjml>`
	b.expect("PUT", "/api/templates/welcome", key, map[string]any{"name": "Welcome", "subject": "Hi", "content": mjml}, 201)
	b.expect("POST", "/api/tenant/sandbox-whitelist", key, map[string]any{"email": "ann@example.com"}, 200)
	b.expect("PUT", "/api/sequences/kept", key, map[string]any{"content": "name: Kept\ntrigger: {event: kept}\nsteps: [{send: welcome}]\n"}, 201)
	audience := b.expect("POST", "/api/segments", key, map[string]any{"name": "Audience", "rules": rule("firstName", "exists", nil)}, 201).body["segmentId"].(string)
	draft := b.expect("POST", "/api/broadcasts", key, map[string]any{"name": "Draft", "templateId": "welcome", "segmentId": audience}, 201).body["broadcastId"].(string)

	// ok sends a JSON request (a string body goes as it is) and checks it
	// succeeded; field names the response's id of the resource ("" when
	// the caller knows it).
	ok := func(method, path, token string, body any) resp {
		t.Helper()
		r := b.do(method, path, token, body)
		if r.status/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, r.status, r.raw)
		}
		return r
	}
	fixed := func(method, path, token string, body any, ids ...string) func() (resp, []string) {
		return func() (resp, []string) { return ok(method, path, token, body), ids }
	}
	field := func(method, path, token string, body any, name string) func() (resp, []string) {
		return func() (resp, []string) {
			r := ok(method, path, token, body)
			id, _ := r.body[name].(string)
			return r, []string{id}
		}
	}
	var (
		newKey, carl, dora, seg, cmp, brd, whk string
	)
	esc := url.PathEscape
	steps := []auditStep{
		{route: "POST /api/tenant", action: "tenant.create", do: fixed("POST", "/api/tenant", b.session("org_audit_walk_new"),
			map[string]any{"name": "New"}, "org_audit_walk_new")},
		{route: "PATCH /api/tenant", action: "tenant.update", do: fixed("PATCH", "/api/tenant", key, map[string]any{"name": "Renamed"}, org)},

		{route: "POST /api/tenant/sandbox-whitelist", action: "sandboxWhitelist.add",
			do: fixed("POST", "/api/tenant/sandbox-whitelist", key, map[string]any{"email": " Zed@Example.com "}, "zed@example.com")},
		{route: "DELETE /api/tenant/sandbox-whitelist/:email", action: "sandboxWhitelist.remove",
			do: fixed("DELETE", "/api/tenant/sandbox-whitelist/"+esc("zed@example.com"), key, nil, "zed@example.com")},

		{route: "POST /api/api-keys", action: "apiKey.create", do: func() (resp, []string) {
			r := ok("POST", "/api/api-keys", sess, map[string]any{"name": "second"})
			newKey = r.body["keyId"].(string)
			return r, []string{newKey}
		}},
		{route: "DELETE /api/api-keys/:keyId", action: "apiKey.revoke", do: func() (resp, []string) {
			return ok("DELETE", "/api/api-keys/"+newKey, sess, nil), []string{newKey}
		}},

		{route: "POST /api/contacts", action: "contact.create", do: func() (resp, []string) {
			r := ok("POST", "/api/contacts", key, map[string]any{"email": "carl@example.com"})
			carl = r.body["contactId"].(string)
			return r, []string{carl}
		}},
		{route: "PUT /api/contacts", action: "contact.upsert", do: func() (resp, []string) {
			r := ok("PUT", "/api/contacts", key, map[string]any{"email": "dora@example.com"})
			dora = r.body["contactId"].(string)
			return r, []string{dora}
		}},
		{route: "PATCH /api/contacts/:id", action: "contact.update", do: func() (resp, []string) {
			return ok("PATCH", "/api/contacts/"+carl, key, map[string]any{"userId": "c1"}), []string{carl}
		}},
		{route: "DELETE /api/contacts/:id", action: "contact.delete", do: func() (resp, []string) {
			return ok("DELETE", "/api/contacts/"+dora, key, nil), []string{dora}
		}},

		{route: "POST /api/contacts/import", action: "contactImport.create", do: func() (resp, []string) {
			r := b.upload("POST", "/api/contacts/import", key, "text/csv", strings.NewReader("email\nerin@example.com\n"))
			if r.status != 202 {
				t.Fatalf("import: %d %s", r.status, r.raw)
			}
			return r, []string{r.body["importId"].(string)}
		}},

		{route: "POST /api/send", action: "send.create", do: field("POST", "/api/send", key,
			map[string]any{"to": "ann@example.com", "template": "welcome"}, "sendId")},
		{route: "POST /api/send/batch", action: "send.create", do: func() (resp, []string) {
			one := map[string]any{"to": "ann@example.com", "template": "welcome"}
			r := ok("POST", "/api/send/batch", key, map[string]any{"messages": []any{one, one}})
			var ids []string
			for _, it := range r.items() {
				ids = append(ids, it.(map[string]any)["sendId"].(string))
			}
			slices.Sort(ids)
			return r, ids
		}},

		{route: "POST /api/events", action: "event.create", do: func() (resp, []string) {
			r := ok("POST", "/api/events", key, map[string]any{"email": "ann@example.com", "name": "joined"})
			return r, []string{r.body["event"].(map[string]any)["eventId"].(string)}
		}},

		{route: "PUT /api/templates/:id", action: "template.put", do: fixed("PUT", "/api/templates/promo", key,
			map[string]any{"name": "Promo", "subject": "Promo", "content": mjml}, "promo")},
		{route: "POST /api/templates/:id/preview", action: "template.preview", nothing: true,
			do: fixed("POST", "/api/templates/promo/preview", key, map[string]any{"variables": map[string]any{}}, "promo")},
		{route: "PUT /api/templates/:id/locales/:locale", action: "template.putLocale", do: fixed("PUT", "/api/templates/promo/locales/de", key,
			map[string]any{"subject": "Aktion", "content": mjml}, "promo")},
		{route: "DELETE /api/templates/:id/locales/:locale", action: "template.deleteLocale", do: fixed("DELETE", "/api/templates/promo/locales/de", key, nil, "promo")},
		{route: "PUT /api/partials/:id", action: "partial.put", do: fixed("PUT", "/api/partials/footer", key,
			map[string]any{"content": "<p>Footer</p>"}, "footer")},
		{route: "DELETE /api/partials/:id", action: "partial.delete", do: fixed("DELETE", "/api/partials/footer", key, nil, "footer")},
		{route: "DELETE /api/templates/:id", action: "template.delete", do: fixed("DELETE", "/api/templates/promo", key, nil, "promo")},

		{route: "PUT /api/sequences/:id", action: "sequence.put", do: fixed("PUT", "/api/sequences/onboard", key,
			map[string]any{"content": "name: Onboard\ntrigger: {event: signed}\nsteps: [{delay: 1d}, {send: welcome}]\n"}, "onboard")},
		{route: "PATCH /api/sequences/:id", action: "sequence.update", do: fixed("PATCH", "/api/sequences/onboard", key, map[string]any{"name": "Onboarding"}, "onboard")},
		{route: "POST /api/sequences/:id/contacts", action: "sequence.enrol", do: func() (resp, []string) {
			return ok("POST", "/api/sequences/onboard/contacts", key, map[string]any{"contactId": ann}), []string{"onboard"}
		}},
		{route: "POST /api/sequences/:id/dry-run", action: "sequence.dryRun", nothing: true, do: func() (resp, []string) {
			return ok("POST", "/api/sequences/onboard/dry-run", key, map[string]any{"contactId": ann}), []string{"onboard"}
		}},
		{route: "DELETE /api/sequences/:id/contacts/:contactId", action: "sequence.unenrol", do: func() (resp, []string) {
			return ok("DELETE", "/api/sequences/onboard/contacts/"+ann, key, nil), []string{"onboard"}
		}},
		{route: "DELETE /api/sequences/:id", action: "sequence.delete", do: fixed("DELETE", "/api/sequences/onboard", key, nil, "onboard")},

		{route: "POST /api/segments", action: "segment.create", do: func() (resp, []string) {
			r := ok("POST", "/api/segments", key, map[string]any{"name": "Pro", "rules": rule("plan", "equals", "pro")})
			seg = r.body["segmentId"].(string)
			return r, []string{seg}
		}},
		{route: "PATCH /api/segments/:id", action: "segment.update", do: func() (resp, []string) {
			return ok("PATCH", "/api/segments/"+seg, key, map[string]any{"name": "Pros"}), []string{seg}
		}},
		{route: "POST /api/segments/:id/compute", action: "segment.compute", do: func() (resp, []string) {
			return ok("POST", "/api/segments/"+seg+"/compute", key, nil), []string{seg}
		}},
		{route: "DELETE /api/segments/:id", action: "segment.delete", do: func() (resp, []string) {
			return ok("DELETE", "/api/segments/"+seg, key, nil), []string{seg}
		}},

		{route: "POST /api/campaigns", action: "campaign.create", do: func() (resp, []string) {
			r := ok("POST", "/api/campaigns", key, map[string]any{"name": "Launch"})
			cmp = r.body["campaignId"].(string)
			return r, []string{cmp}
		}},
		{route: "PATCH /api/campaigns/:campaignId", action: "campaign.update", do: func() (resp, []string) {
			return ok("PATCH", "/api/campaigns/"+cmp, key, map[string]any{"name": "Relaunch"}), []string{cmp}
		}},
		{route: "POST /api/campaigns/:campaignId/sequences/:ref", action: "campaign.addSequence", do: func() (resp, []string) {
			return ok("POST", "/api/campaigns/"+cmp+"/sequences/kept", key, nil), []string{cmp}
		}},
		{route: "DELETE /api/campaigns/:campaignId/sequences/:ref", action: "campaign.removeSequence", do: func() (resp, []string) {
			return ok("DELETE", "/api/campaigns/"+cmp+"/sequences/kept", key, nil), []string{cmp}
		}},
		{route: "POST /api/campaigns/:campaignId/templates/:ref", action: "campaign.addTemplate", do: func() (resp, []string) {
			return ok("POST", "/api/campaigns/"+cmp+"/templates/welcome", key, nil), []string{cmp}
		}},
		{route: "DELETE /api/campaigns/:campaignId/templates/:ref", action: "campaign.removeTemplate", do: func() (resp, []string) {
			return ok("DELETE", "/api/campaigns/"+cmp+"/templates/welcome", key, nil), []string{cmp}
		}},
		{route: "DELETE /api/campaigns/:campaignId", action: "campaign.delete", do: func() (resp, []string) {
			return ok("DELETE", "/api/campaigns/"+cmp, key, nil), []string{cmp}
		}},

		{route: "POST /api/broadcasts", action: "broadcast.create", do: func() (resp, []string) {
			r := ok("POST", "/api/broadcasts", key, map[string]any{"name": "News", "templateId": "welcome", "segmentId": audience})
			brd = r.body["broadcastId"].(string)
			return r, []string{brd}
		}},
		{route: "PATCH /api/broadcasts/:id", action: "broadcast.update", do: func() (resp, []string) {
			return ok("PATCH", "/api/broadcasts/"+brd, key, map[string]any{"name": "Big news"}), []string{brd}
		}},
		{route: "POST /api/broadcasts/:id/send", action: "broadcast.send", do: func() (resp, []string) {
			return ok("POST", "/api/broadcasts/"+brd+"/send", key, nil), []string{brd}
		}},
		{route: "POST /api/broadcasts/:id/pause", action: "broadcast.pause", do: func() (resp, []string) {
			return ok("POST", "/api/broadcasts/"+brd+"/pause", key, nil), []string{brd}
		}},
		{route: "POST /api/broadcasts/:id/resume", action: "broadcast.resume", do: func() (resp, []string) {
			return ok("POST", "/api/broadcasts/"+brd+"/resume", key, nil), []string{brd}
		}},
		{route: "POST /api/broadcasts/:id/cancel", action: "broadcast.cancel", do: func() (resp, []string) {
			return ok("POST", "/api/broadcasts/"+brd+"/cancel", key, nil), []string{brd}
		}},
		{route: "DELETE /api/broadcasts/:id", action: "broadcast.delete", do: fixed("DELETE", "/api/broadcasts/"+draft, key, nil, draft)},
		{route: "POST /api/broadcasts/:id/winner", action: "broadcast.pickWinner", do: func() (resp, []string) {
			// An A/B broadcast, started (its audience written), then its
			// winner picked by hand.
			r := ok("POST", "/api/broadcasts", key, map[string]any{"name": "AB", "templateId": "welcome", "segmentId": audience,
				"experiment": map[string]any{"variants": []any{map[string]any{"name": "A", "subject": "A"}, map[string]any{"name": "B", "subject": "B"}},
					"metric": "opened", "waitFor": "1h", "autoWinner": false}})
			ab := r.body["broadcastId"].(string)
			variant := r.body["experiment"].(map[string]any)["variants"].([]any)[1].(map[string]any)["variantId"].(string)
			ok("POST", "/api/broadcasts/"+ab+"/send", key, nil)
			tid := ok("GET", "/api/tenant", key, nil).body["tenantId"].(string)
			if err := b.svc.Broadcasts.Start(context.Background(), tid, ab); err != nil {
				t.Fatal(err)
			}
			return ok("POST", "/api/broadcasts/"+ab+"/winner", key, map[string]any{"variantId": variant}), []string{ab}
		}},

		{route: "POST /api/suppressions", action: "suppression.create", do: fixed("POST", "/api/suppressions", key,
			map[string]any{"email": "Spam@Example.com"}, "spam@example.com")},
		{route: "DELETE /api/suppressions/:email", action: "suppression.delete",
			do: fixed("DELETE", "/api/suppressions/"+esc("spam@example.com"), key, nil, "spam@example.com")},

		{route: "POST /api/topics", action: "topic.create", do: fixed("POST", "/api/topics", key,
			map[string]any{"topicId": "news", "name": "News", "default": "opt_in"}, "news")},
		{route: "PATCH /api/topics/:id", action: "topic.update", do: fixed("PATCH", "/api/topics/news", key, map[string]any{"name": "Newsletter"}, "news")},
		{route: "DELETE /api/topics/:id", action: "topic.delete", do: fixed("DELETE", "/api/topics/news", key, nil, "news")},

		{route: "POST /api/webhooks", action: "webhook.create", do: func() (resp, []string) {
			r := ok("POST", "/api/webhooks", key, map[string]any{"url": "https://8.8.8.8/hook"})
			whk = r.body["webhookId"].(string)
			return r, []string{whk}
		}},
		{route: "POST /api/webhooks/:id/test", action: "webhook.test", do: func() (resp, []string) {
			return ok("POST", "/api/webhooks/"+whk+"/test", key, nil), []string{whk}
		}},
		{route: "POST /api/webhooks/:id/deliveries/:messageId/retry", action: "webhook.retryDelivery", do: func() (resp, []string) {
			var msg string
			if err := b.db.Pool.QueryRow(t.Context(), `SELECT message_id FROM webhook_deliveries WHERE endpoint_id = $1`, whk).Scan(&msg); err != nil {
				t.Fatal(err)
			}
			return ok("POST", "/api/webhooks/"+whk+"/deliveries/"+msg+"/retry", key, nil), []string{whk}
		}},
		{route: "POST /api/webhooks/:id/rotate-secret", action: "webhook.rotateSecret", do: func() (resp, []string) {
			return ok("POST", "/api/webhooks/"+whk+"/rotate-secret", key, nil), []string{whk}
		}},
		{route: "PATCH /api/webhooks/:id", action: "webhook.update", do: func() (resp, []string) {
			return ok("PATCH", "/api/webhooks/"+whk, key, map[string]any{"enabled": false}), []string{whk}
		}},
		{route: "DELETE /api/webhooks/:id", action: "webhook.delete", do: func() (resp, []string) {
			return ok("DELETE", "/api/webhooks/"+whk, key, nil), []string{whk}
		}},

		{route: "POST /api/domains", action: "domain.create", do: fixed("POST", "/api/domains", key, map[string]any{"domain": "Mail.Example.com"}, "mail.example.com")},
		{route: "POST /api/domains/:domain/verify", action: "domain.verify", do: fixed("POST", "/api/domains/mail.example.com/verify", key, nil, "mail.example.com")},
		{route: "PATCH /api/domains/:domain", action: "domain.update", do: fixed("PATCH", "/api/domains/mail.example.com", key, map[string]any{"sendingEnabled": false}, "mail.example.com")},
		{route: "DELETE /api/domains/:domain", action: "domain.delete", do: fixed("DELETE", "/api/domains/mail.example.com", key, nil, "mail.example.com")},
	}

	// Every write route of the table has a step, and every step a route.
	stepped := map[string]bool{}
	for _, s := range steps {
		stepped[s.route] = true
	}
	table := map[string]bool{}
	for _, r := range b.app.GetRoutes(true) {
		switch r.Method {
		case "POST", "PUT", "PATCH", "DELETE":
			if strings.HasPrefix(r.Path, "/api/") {
				table[r.Method+" "+r.Path] = true
			}
		}
	}
	for route := range table {
		if !stepped[route] {
			t.Errorf("write route %s has no audit step: add one", route)
		}
	}
	for route := range stepped {
		if !table[route] {
			t.Errorf("audit step for %s, which is not a write route", route)
		}
	}

	var types []string
	for _, s := range steps {
		typ, _, _ := strings.Cut(s.action, ".")
		if !slices.Contains(types, typ) {
			types = append(types, typ)
		}
	}
	for _, typ := range types {
		t.Run(typ, func(t *testing.T) {
			for _, s := range steps {
				if !strings.HasPrefix(s.action, typ+".") {
					continue
				}
				r, ids := s.do()
				rid := r.header.Get("X-Request-Id")
				got := entriesOf(t, b, rid)
				actorType, actorID, tenant := "apiKey", keyID, org
				if s.route == "POST /api/tenant" {
					actorType, actorID, tenant = "session", "user-1", "org_audit_walk_new"
				} else if strings.Contains(s.route, "/api-keys") {
					actorType, actorID = "session", "user-1"
				}
				var want []auditRow
				for _, id := range ids {
					want = append(want, auditRow{tenant: tenant, actorType: actorType, actorID: actorID, action: s.action,
						resourceType: typ, resourceID: id, ip: appTestIP})
				}
				if rid == "" || !slices.Equal(got, want) {
					t.Errorf("%s: entries %+v, want %+v", s.route, got, want)
				}
				if w := warned.about(rid); len(w) > 0 && !s.nothing {
					t.Errorf("%s: the entry was not written in the write's transaction: %v", s.route, w)
				}
			}
		})
	}
}

// TestAuditLogOddRequestID: a client's X-Request-Id is answered back and
// recorded; one PostgreSQL cannot hold (invalid UTF-8) or too long is
// replaced by a fresh one, answered and recorded alike, and the write
// still succeeds.
func TestAuditLogOddRequestID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.apiKey(b.tenant("org_audit_rid"))
	tests := []struct {
		desc, sent string
		kept       bool
	}{
		{desc: "the client's own", sent: "client-req-1", kept: true},
		{desc: "invalid UTF-8", sent: "bad-\xff-id"},
		{desc: "too long", sent: strings.Repeat("r", 300)},
	}
	for i, tt := range tests {
		r := b.upload("POST", "/api/contacts", key, "application/json",
			strings.NewReader(fmt.Sprintf(`{"email":"r%d@example.com"}`, i)), "X-Request-Id: "+tt.sent)
		rid := r.header.Get("X-Request-Id")
		if r.status != 201 || rid == "" || (rid == tt.sent) != tt.kept {
			t.Fatalf("%s: %d, answered X-Request-Id %q; %s", tt.desc, r.status, rid, r.raw)
		}
		if got := entriesOf(t, b, rid); len(got) != 1 || got[0].resourceID != r.body["contactId"] {
			t.Fatalf("%s: entries %+v", tt.desc, got)
		}
	}
}
