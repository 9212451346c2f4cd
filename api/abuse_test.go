package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The abuse suite (issue 15): what one tenant can do to another's data
// through every route, tracking links tampered with, CR/LF aimed at
// headers. Other files hold the rest of it: hostile_test.go (NUL, bad
// UTF-8, numbers, sizes, rule trees), internal/render's XSS corpus, the
// fuzz targets.

// probe is one request an attacker tenant makes with the victim's ids.
type probe struct {
	method, path string
	body         any
	// ok lists the statuses allowed besides 404. A route that writes into
	// the caller's own namespace (PUT /api/templates/{id} with an id the
	// victim also uses) may succeed: it touches only the caller's rows.
	ok []int
}

// TestAbuseCrossTenantEveryRoute gives a victim tenant one of everything,
// then probes every /api route of the app's route table as another tenant
// with the victim's ids. Every probe must answer 404 (or, where listed, a
// status about the caller's own rows), never a 5xx, never a body that
// mentions the victim's data; afterwards every victim row is unchanged. A
// route without a probe fails the test, so new routes join the suite.
func TestAbuseCrossTenantEveryRoute(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_abuse_victim")
	b := f.b

	// The victim: contact, templates (fixture), a domain, a sequence with a
	// pending scheduled send, a send, a segment, a campaign, an API key.
	f.domain("victim.example", "verified", true)
	b.putYAML("/api/sequences/vseq", f.key, "text/yaml",
		"name: Victim\ntrigger: {event: victim_signed_up}\nsteps: [{delay: 1h}, {send: welcome}]\n", 201)
	f.event("victim_signed_up", nil)
	sched := f.scheduled("status=pending")
	if len(sched) != 1 {
		t.Fatalf("%v", sched)
	}
	schID, schFor := sched[0]["scheduledSendId"].(string), sched[0]["scheduledFor"].(string)
	send := b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome"}, 200)
	sendID := send.body["sendId"].(string)
	seg := b.expect("POST", "/api/segments", f.key, map[string]any{"name": "Victims",
		"rules": rule("firstName", "equals", "Ann")}, 201).body["segmentId"].(string)
	cmp := b.expect("POST", "/api/campaigns", f.key, map[string]any{"name": "Victim launch"}, 201).body["campaignId"].(string)
	whk := b.expect("POST", "/api/webhooks", f.key, map[string]any{"url": "https://8.8.8.8/victim-hook"}, 201).body["webhookId"].(string)
	b.expect("POST", "/api/webhooks/"+whk+"/test", f.key, nil, 202)
	var whMsg string
	if err := b.db.Pool.QueryRow(t.Context(), `SELECT message_id FROM webhook_deliveries WHERE endpoint_id = $1`, whk).Scan(&whMsg); err != nil {
		t.Fatal(err)
	}
	brd := b.expect("POST", "/api/broadcasts", f.key, map[string]any{"name": "Victim news", "templateId": "welcome",
		"segmentId": seg}, 201).body["broadcastId"].(string)
	b.expect("POST", "/api/topics", f.key, map[string]any{"topicId": "vtopic", "name": "Victim topic", "default": "opt_in"}, 201)
	b.expect("POST", "/api/suppressions", f.key, map[string]any{"email": "victim-listed@example.com", "note": "Victim note"}, 201)
	// An archived month: an old event, archived by the retention run.
	b.expect("POST", "/api/events", f.key, map[string]any{"email": "ann@example.com", "name": "victim_archived_event",
		"timestamp": "2020-03-04T05:06:07Z"}, 201)
	if _, err := b.svc.Archiver.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A contact import, staged (its worker has not run).
	vimp := b.importFile(f.key, "text/csv", "email,firstName\nann@example.com,Victim import\n")
	// A partial and a locale version (ADDENDUM 24).
	b.expect("PUT", "/api/partials/vpartial", f.key, map[string]any{"content": "<p>Victim partial</p>"}, 201)
	b.expect("PUT", "/api/templates/tips/locales/de", f.key, map[string]any{"subject": "Victim locale", "content": "<p>x</p>"}, 201)
	keys := b.expect("GET", "/api/api-keys", f.key, nil, 200).items()
	keyID := keys[0].(map[string]any)["keyId"].(string)
	victim := f.org
	contact := f.contactID
	// What must never appear in an attacker's response. Ids chosen by the
	// caller (welcome, vseq) are not secret: the attacker may use them too.
	markers := []string{contact, "ann@example.com", sendID, schID, seg, cmp, brd, whk, whMsg, "victim-hook", keyID, "victim.example", "Victim launch", "Victim news",
		"victim_archived_event", "Victim topic", "victim-listed@example.com", "Victim note", vimp, "Victim import",
		"Victim partial", "Victim locale"}

	// The attacker, with a campaign and a sequence of its own for the
	// routes that join two ids.
	atk := b.apiKey(b.tenant("org_abuse_attacker"))
	b.putYAML("/api/sequences/aseq", atk, "text/yaml", "name: A\ntrigger: {event: a}\nsteps: [{send: own}]\n", 404) // no template "own" yet: TEMPLATE_NOT_FOUND
	b.expect("PUT", "/api/templates/own", atk, map[string]any{"name": "Own", "subject": "Own",
		"content": "<mjml><mj-body><mj-section><mj-column><mj-text>own</mj-text></mj-column></mj-section></mj-body></mjml>"}, 201)
	b.putYAML("/api/sequences/aseq", atk, "text/yaml", "name: A\ntrigger: {event: a}\nsteps: [{send: own}]\n", 201)
	acmp := b.expect("POST", "/api/campaigns", atk, map[string]any{"name": "Mine"}, 201).body["campaignId"].(string)

	before := tenantSnapshot(t, b, victim)

	esc := url.PathEscape
	at := url.QueryEscape(schFor)
	probes := map[string][]probe{
		"GET /api/tenant":                             {{"GET", "/api/tenant", nil, []int{200}}},
		"PATCH /api/tenant":                           {{"PATCH", "/api/tenant", map[string]any{"name": "x"}, []int{200}}},
		"POST /api/tenant":                            {{"POST", "/api/tenant", map[string]any{"name": "x"}, []int{403}}},
		"GET /api/tenant/sandbox-whitelist":           {{"GET", "/api/tenant/sandbox-whitelist", nil, []int{200}}},
		"POST /api/tenant/sandbox-whitelist":          {{"POST", "/api/tenant/sandbox-whitelist", map[string]any{"email": "ann@example.com"}, []int{200}}},
		"DELETE /api/tenant/sandbox-whitelist/:email": {{"DELETE", "/api/tenant/sandbox-whitelist/" + esc("ann@example.com"), nil, []int{200}}},
		"POST /api/api-keys":                          {{"POST", "/api/api-keys", map[string]any{"name": "x"}, []int{403}}},
		"GET /api/api-keys":                           {{"GET", "/api/api-keys", nil, []int{200}}},
		"DELETE /api/api-keys/:keyId":                 {{"DELETE", "/api/api-keys/" + keyID, nil, []int{403}}},
		"POST /api/contacts":                          {{"POST", "/api/contacts", map[string]any{"email": "mallory@example.com"}, []int{201}}},
		"PUT /api/contacts":                           {{"PUT", "/api/contacts", map[string]any{"email": "ann@example.com", "properties": map[string]any{"firstName": "Mallory"}}, []int{201}}},
		"GET /api/contacts":                           {{"GET", "/api/contacts", nil, []int{200}}},
		"GET /api/contacts/stats":                     {{"GET", "/api/contacts/stats", nil, []int{200}}},
		// The probe sends JSON, which an import refuses (400); an
		// attacker's own import is its own (TestImportNotFound).
		"POST /api/contacts/import":           {{"POST", "/api/contacts/import", map[string]any{"email": "ann@example.com"}, []int{400}}},
		"GET /api/contacts/import/:id":        {{"GET", "/api/contacts/import/" + vimp, nil, nil}},
		"GET /api/contacts/import/:id/errors": {{"GET", "/api/contacts/import/" + vimp + "/errors", nil, nil}},
		"GET /api/contacts/:id":               {{"GET", "/api/contacts/" + contact, nil, nil}},
		"PATCH /api/contacts/:id":             {{"PATCH", "/api/contacts/" + contact, map[string]any{"subscribed": false}, nil}},
		"DELETE /api/contacts/:id":            {{"DELETE", "/api/contacts/" + contact, nil, nil}},
		"GET /api/contacts/:id/sends":         {{"GET", "/api/contacts/" + contact + "/sends", nil, nil}},
		"GET /api/contacts/:id/scheduled":     {{"GET", "/api/contacts/" + contact + "/scheduled", nil, nil}},
		"GET /api/contacts/:id/sequences":     {{"GET", "/api/contacts/" + contact + "/sequences", nil, nil}},
		"GET /api/contacts/:id/segments":      {{"GET", "/api/contacts/" + contact + "/segments", nil, nil}},
		"GET /api/contacts/:id/timeline":      {{"GET", "/api/contacts/" + contact + "/timeline", nil, nil}},
		"POST /api/send": {
			{"POST", "/api/send", map[string]any{"to": "ann@example.com", "template": "welcome"}, nil},
			{"POST", "/api/send", map[string]any{"to": "ann@example.com", "template": "own", "from": "x@victim.example"}, []int{400}},
		},
		"POST /api/send/batch": {
			{"POST", "/api/send/batch", map[string]any{"messages": []any{map[string]any{"to": "ann@example.com", "template": "welcome"}}}, []int{200}},
		},
		"GET /api/sends": {
			{"GET", "/api/sends", nil, []int{200}},
			{"GET", "/api/sends?contactId=" + contact, nil, nil},
			{"GET", "/api/sends?templateId=welcome", nil, []int{200}},
			{"GET", "/api/sends?broadcastId=" + brd, nil, []int{200}},
		},
		"GET /api/sends/:sendId":          {{"GET", "/api/sends/" + sendID, nil, nil}},
		"POST /api/events":                {{"POST", "/api/events", map[string]any{"email": "ann@example.com", "name": "victim_signed_up"}, []int{201}}},
		"GET /api/events":                 {{"GET", "/api/events", nil, []int{200}}},
		"GET /api/events/contacts/:id":    {{"GET", "/api/events/contacts/" + contact, nil, nil}},
		"GET /api/events/archive":         {{"GET", "/api/events/archive", nil, []int{200}}},
		"GET /api/topics":                 {{"GET", "/api/topics", nil, []int{200}}},
		"GET /api/suppressions":           {{"GET", "/api/suppressions", nil, []int{200}}},
		"DELETE /api/suppressions/:email": {{"DELETE", "/api/suppressions/victim-listed@example.com", nil, nil}},
		"POST /api/suppressions":          {{"POST", "/api/suppressions", map[string]any{"email": "victim-listed@example.com"}, []int{201}}},
		"GET /api/topics/:id":             {{"GET", "/api/topics/vtopic", nil, nil}},
		"PATCH /api/topics/:id":           {{"PATCH", "/api/topics/vtopic", map[string]any{"name": "Stolen"}, nil}},
		"DELETE /api/topics/:id":          {{"DELETE", "/api/topics/vtopic", nil, nil}},
		"POST /api/topics":                {{"POST", "/api/topics", map[string]any{"topicId": "vtopic", "name": "Mine", "default": "opt_out"}, []int{201}}},
		"GET /api/events/archive/:month":  {{"GET", "/api/events/archive/2020-03", nil, nil}},
		"POST /api/sequences/:id/contacts": {
			{"POST", "/api/sequences/vseq/contacts", map[string]any{"contactId": contact}, nil},
			{"POST", "/api/sequences/aseq/contacts", map[string]any{"contactId": contact}, nil},
		},
		"GET /api/sequences/:id/contacts": {{"GET", "/api/sequences/vseq/contacts", nil, nil}},
		"DELETE /api/sequences/:id/contacts/:contactId": {
			{"DELETE", "/api/sequences/vseq/contacts/" + contact, nil, nil},
			{"DELETE", "/api/sequences/aseq/contacts/" + contact, nil, nil},
		},
		"GET /api/sequences/:id/status":     {{"GET", "/api/sequences/vseq/status", nil, nil}},
		"GET /api/sequences/:id/experiment": {{"GET", "/api/sequences/vseq/experiment", nil, nil}},
		"POST /api/sequences/:id/dry-run": {
			{"POST", "/api/sequences/vseq/dry-run", map[string]any{"contactId": contact}, nil},
			{"POST", "/api/sequences/aseq/dry-run", map[string]any{"contactId": contact}, nil},
		},
		"GET /api/scheduled": {
			// A filter, not a sub-resource: an unknown contact lists nothing.
			{"GET", "/api/scheduled?contactId=" + contact, nil, []int{200}},
			{"GET", "/api/scheduled?status=pending", nil, []int{200}},
		},
		"GET /api/scheduled/:id":                    {{"GET", "/api/scheduled/" + schID + "?scheduledFor=" + at, nil, nil}},
		"PUT /api/templates/:id":                    {{"PUT", "/api/templates/welcome", map[string]any{"name": "Mine", "subject": "Mine", "content": "<p>mine</p>"}, []int{201}}},
		"GET /api/templates":                        {{"GET", "/api/templates", nil, []int{200}}},
		"GET /api/templates/:id":                    {{"GET", "/api/templates/tips", nil, nil}},
		"DELETE /api/templates/:id":                 {{"DELETE", "/api/templates/tips", nil, nil}},
		"GET /api/templates/:id/versions":           {{"GET", "/api/templates/tips/versions", nil, nil}},
		"POST /api/templates/:id/preview":           {{"POST", "/api/templates/tips/preview", map[string]any{"variables": map[string]any{}}, nil}},
		"PUT /api/templates/:id/locales/:locale":    {{"PUT", "/api/templates/tips/locales/de", map[string]any{"subject": "s", "content": "<p>x</p>"}, nil}},
		"GET /api/templates/:id/locales":            {{"GET", "/api/templates/tips/locales", nil, nil}},
		"GET /api/templates/:id/locales/:locale":    {{"GET", "/api/templates/tips/locales/de", nil, nil}},
		"DELETE /api/templates/:id/locales/:locale": {{"DELETE", "/api/templates/tips/locales/de", nil, nil}},
		"PUT /api/partials/:id":                     {{"PUT", "/api/partials/vpartial", map[string]any{"content": "<p>mine</p>"}, []int{201}}},
		"GET /api/partials":                         {{"GET", "/api/partials", nil, []int{200}}},
		"GET /api/partials/:id":                     {{"GET", "/api/partials/vpartial", nil, []int{200}}},
		"DELETE /api/partials/:id":                  {{"DELETE", "/api/partials/vpartial", nil, []int{204}}},
		"PUT /api/sequences/:id":                    {{"PUT", "/api/sequences/vseq", map[string]any{"content": "name: Mine\ntrigger: {event: m}\nsteps: [{send: own}]\n"}, []int{201}}},
		"GET /api/sequences":                        {{"GET", "/api/sequences", nil, []int{200}}},
		"GET /api/sequences/:id":                    {{"GET", "/api/sequences/vseq", nil, []int{200}}}, // the attacker's own vseq, made above
		"PATCH /api/sequences/:id":                  {{"PATCH", "/api/sequences/vseq", map[string]any{"enabled": false}, []int{200}}},
		"DELETE /api/sequences/:id":                 {{"DELETE", "/api/sequences/vseq", nil, []int{204}}},
		"GET /api/sequences/:id/sends":              {{"GET", "/api/sequences/vseq/sends", nil, nil}},
		"POST /api/segments":                        {{"POST", "/api/segments", map[string]any{"name": "S", "rules": map[string]any{"operator": "and", "conditions": []any{map[string]any{"type": "segment", "segmentId": seg}}}}, []int{400}}},
		"GET /api/segments":                         {{"GET", "/api/segments", nil, []int{200}}},
		"GET /api/segments/:id":                     {{"GET", "/api/segments/" + seg, nil, nil}},
		"PATCH /api/segments/:id":                   {{"PATCH", "/api/segments/" + seg, map[string]any{"name": "x"}, nil}},
		"DELETE /api/segments/:id":                  {{"DELETE", "/api/segments/" + seg, nil, nil}},
		"GET /api/segments/:id/members":             {{"GET", "/api/segments/" + seg + "/members", nil, nil}},
		"GET /api/segments/:id/explain":             {{"GET", "/api/segments/" + seg + "/explain?contactId=" + contact, nil, nil}},
		"POST /api/segments/:id/compute":            {{"POST", "/api/segments/" + seg + "/compute", nil, nil}},
		"POST /api/campaigns":                       {{"POST", "/api/campaigns", map[string]any{"name": "C", "sequenceIds": []string{"tips-none"}, "segmentId": seg}, []int{400}}},
		"GET /api/campaigns":                        {{"GET", "/api/campaigns", nil, []int{200}}},
		"GET /api/campaigns/:campaignId":            {{"GET", "/api/campaigns/" + cmp, nil, nil}},
		"PATCH /api/campaigns/:campaignId":          {{"PATCH", "/api/campaigns/" + cmp, map[string]any{"name": "x"}, nil}},
		"DELETE /api/campaigns/:campaignId":         {{"DELETE", "/api/campaigns/" + cmp, nil, nil}},
		"POST /api/campaigns/:campaignId/sequences/:ref": {
			{"POST", "/api/campaigns/" + cmp + "/sequences/aseq", nil, nil},
			{"POST", "/api/campaigns/" + acmp + "/sequences/" + "tips-none", nil, []int{400}},
		},
		"DELETE /api/campaigns/:campaignId/sequences/:ref": {{"DELETE", "/api/campaigns/" + cmp + "/sequences/aseq", nil, nil}},
		"POST /api/campaigns/:campaignId/templates/:ref": {
			{"POST", "/api/campaigns/" + cmp + "/templates/own", nil, nil},
			{"POST", "/api/campaigns/" + acmp + "/templates/tips", nil, []int{400}},
		},
		"DELETE /api/campaigns/:campaignId/templates/:ref": {{"DELETE", "/api/campaigns/" + cmp + "/templates/own", nil, nil}},
		"POST /api/broadcasts": {
			{"POST", "/api/broadcasts", map[string]any{"name": "B", "templateId": "own", "segmentId": seg}, []int{404}},
			{"POST", "/api/broadcasts", map[string]any{"name": "B", "templateId": "own", "segmentId": "seg_none", "campaignId": cmp}, []int{404}},
		},
		"GET /api/broadcasts":                                {{"GET", "/api/broadcasts", nil, []int{200}}},
		"GET /api/broadcasts/:id":                            {{"GET", "/api/broadcasts/" + brd, nil, nil}},
		"POST /api/broadcasts/:id/winner":                    {{"POST", "/api/broadcasts/" + brd + "/winner", map[string]any{"variantId": "var_x"}, nil}},
		"PATCH /api/broadcasts/:id":                          {{"PATCH", "/api/broadcasts/" + brd, map[string]any{"name": "x"}, nil}},
		"DELETE /api/broadcasts/:id":                         {{"DELETE", "/api/broadcasts/" + brd, nil, nil}},
		"POST /api/broadcasts/:id/send":                      {{"POST", "/api/broadcasts/" + brd + "/send", nil, nil}},
		"POST /api/broadcasts/:id/pause":                     {{"POST", "/api/broadcasts/" + brd + "/pause", nil, nil}},
		"POST /api/broadcasts/:id/resume":                    {{"POST", "/api/broadcasts/" + brd + "/resume", nil, nil}},
		"POST /api/broadcasts/:id/cancel":                    {{"POST", "/api/broadcasts/" + brd + "/cancel", nil, nil}},
		"GET /api/broadcasts/:id/recipients":                 {{"GET", "/api/broadcasts/" + brd + "/recipients", nil, nil}},
		"POST /api/webhooks":                                 {{"POST", "/api/webhooks", map[string]any{"url": "https://8.8.4.4/mine"}, []int{201}}},
		"GET /api/webhooks":                                  {{"GET", "/api/webhooks", nil, []int{200}}},
		"GET /api/webhooks/:id":                              {{"GET", "/api/webhooks/" + whk, nil, nil}},
		"PATCH /api/webhooks/:id":                            {{"PATCH", "/api/webhooks/" + whk, map[string]any{"enabled": false}, nil}},
		"DELETE /api/webhooks/:id":                           {{"DELETE", "/api/webhooks/" + whk, nil, nil}},
		"POST /api/webhooks/:id/rotate-secret":               {{"POST", "/api/webhooks/" + whk + "/rotate-secret", nil, nil}},
		"POST /api/webhooks/:id/test":                        {{"POST", "/api/webhooks/" + whk + "/test", nil, nil}},
		"GET /api/webhooks/:id/deliveries":                   {{"GET", "/api/webhooks/" + whk + "/deliveries", nil, nil}},
		"POST /api/webhooks/:id/deliveries/:messageId/retry": {{"POST", "/api/webhooks/" + whk + "/deliveries/" + whMsg + "/retry", nil, nil}},
		// The attacker's own entries only: filtering by the victim's key
		// finds none (an entry of the victim's names its resources).
		"GET /api/audit-log":             {{"GET", "/api/audit-log?actor=" + keyID, nil, []int{200}}},
		"GET /api/metrics":               {{"GET", "/api/metrics", nil, []int{200}}},
		"GET /api/metrics/sequences":     {{"GET", "/api/metrics/sequences", nil, []int{200}}},
		"GET /api/metrics/sequences/:id": {{"GET", "/api/metrics/sequences/vseq", nil, nil}},
		"GET /api/metrics/templates":     {{"GET", "/api/metrics/templates", nil, []int{200}}},
		"GET /api/metrics/templates/:id": {{"GET", "/api/metrics/templates/tips", nil, nil}},
		"POST /api/domains":              {{"POST", "/api/domains", map[string]any{"domain": "victim.example"}, []int{201, 409}}},
		"GET /api/domains":               {{"GET", "/api/domains", nil, []int{200}}},
		// The document is the same for every caller and holds no tenant's data.
		"GET /api/openapi.json":            {{"GET", "/api/openapi.json", nil, []int{200}}},
		"GET /api/domains/:domain":         {{"GET", "/api/domains/victim.example", nil, []int{200}}},
		"PATCH /api/domains/:domain":       {{"PATCH", "/api/domains/victim.example", map[string]any{"sendingEnabled": true}, []int{400, 422}}},
		"DELETE /api/domains/:domain":      {{"DELETE", "/api/domains/victim.example", nil, []int{204}}},
		"POST /api/domains/:domain/verify": {{"POST", "/api/domains/victim.example/verify", nil, []int{200, 503}}},
	}
	// The domain probes run in order after POST /api/domains: the
	// attacker's own claim on the name is what they may touch.
	order := []string{"POST /api/domains", "GET /api/domains/:domain", "PATCH /api/domains/:domain",
		"POST /api/domains/:domain/verify", "DELETE /api/domains/:domain"}

	var routes []string
	for _, r := range b.app.GetRoutes(true) {
		if strings.HasPrefix(r.Path, "/api/") && r.Method != "HEAD" {
			routes = append(routes, r.Method+" "+r.Path)
		}
	}
	slices.Sort(routes)
	routes = slices.Compact(routes)
	routes = slices.DeleteFunc(routes, func(r string) bool { return slices.Contains(order, r) })
	routes = append(routes, order...)
	for _, route := range routes {
		ps, ok := probes[route]
		if !ok {
			t.Errorf("route %s has no cross-tenant probe: add one", route)
			continue
		}
		for _, p := range ps {
			r := b.do(p.method, p.path, atk, p.body)
			if r.status >= 500 || (r.status != 404 && !slices.Contains(p.ok, r.status)) {
				t.Errorf("%s %s as another tenant: status %d, want 404 or %v; body %s", p.method, p.path, r.status, p.ok, r.raw)
			}
			if r.status == 404 && r.code() == "" {
				t.Errorf("%s %s: 404 outside the error envelope: %s", p.method, p.path, r.raw)
			}
			in, _ := json.Marshal(p.body)
			if p.path == "/api/openapi.json" {
				continue // one document for every caller; its examples are the examples test's tenant's
			}
			for _, m := range markers {
				// What the attacker sent may come back (its own contact
				// with that email, "unknown segment <id>"); anything else
				// of the victim's may not.
				if strings.Contains(string(r.raw), m) && !strings.Contains(p.path+string(in), m) {
					t.Errorf("%s %s as another tenant: the response shows the victim's %q: %s", p.method, p.path, m, r.raw)
				}
			}
		}
	}
	for route := range probes {
		if !slices.Contains(routes, route) {
			t.Errorf("probe for %s, which is not a route", route)
		}
	}
	if after := tenantSnapshot(t, b, victim); after != before {
		t.Fatalf("the victim's rows changed:\n%s", diffLines(before, after))
	}
	// The victim still sees its own data.
	b.expect("GET", "/api/contacts/"+contact, f.key, nil, 200)
	b.expect("GET", "/api/scheduled/"+schID+"?scheduledFor="+at, f.key, nil, 200)
}

// tenantSnapshot is every row of the tenant in every table that has a
// tenant_id (and its tenants row), one line per table, so a change shows
// which table moved.
func tenantSnapshot(t *testing.T, b *bundle, tenantID string) string {
	t.Helper()
	ctx := context.Background()
	rows, err := b.db.Pool.Query(ctx, `SELECT table_name FROM information_schema.columns
		WHERE column_name = 'tenant_id' AND table_schema = 'public' ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var out []string
	for _, tbl := range append(tables, "tenants") {
		col := "tenant_id"
		if tbl == "tenants" {
			col = "id"
		}
		var sum string
		q := fmt.Sprintf(`SELECT count(*) || ':' || md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), ''))
			FROM %q x WHERE %s = $1`, tbl, col)
		if err := b.db.Pool.QueryRow(ctx, q, tenantID).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		out = append(out, tbl+" "+sum)
	}
	return strings.Join(out, "\n")
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			out = append(out, al[i]+"  ->  "+bl[i])
		}
	}
	return strings.Join(out, "\n")
}

// TestAbuseCRLFNeverReachesAHeader aims CR, LF and NUL at every field that
// can end up in a message header or an HTTP response header: it is
// refused where it is stored, or cleaned before it leaves; the provider
// never sees a line break in a header and a redirect never carries one.
func TestAbuseCRLFNeverReachesAHeader(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_abuse_crlf")
	b := f.b
	f.domain("acme.example", "verified", true)
	for _, bad := range []string{"\r\nBcc: v@example.com", "\nBcc: v@example.com", "\rBcc: v@example.com", "\x00"} {
		name := fmt.Sprintf("%q", bad)
		// Stored fields that become headers: refused.
		b.expectError("PATCH", "/api/tenant", f.key, map[string]any{"defaultFromAddress": "Acme" + bad + " <news@acme.example>"}, 400, "VALIDATION_ERROR")
		b.expectError("POST", "/api/contacts", f.key, map[string]any{"email": "x" + bad + "@example.com"}, 400, "VALIDATION_ERROR")
		b.expectError("POST", "/api/tenant/sandbox-whitelist", f.key, map[string]any{"email": "x@example.com" + bad}, 400, "VALIDATION_ERROR")
		b.expectError("POST", "/api/domains", f.key, map[string]any{"domain": "acme" + bad + ".example"}, 400, "VALIDATION_ERROR")
		yamlFrom := strings.NewReplacer("\r", `\r`, "\n", `\n`, "\x00", `\0`).Replace(bad)
		r := b.putYAML("/api/sequences/crlf", f.key, "text/yaml",
			"name: C\nfrom: \"Acme"+yamlFrom+" <news@acme.example>\"\ntrigger: {event: c}\nsteps: [{send: welcome}]\n", 400)
		if r.code() != "VALIDATION_ERROR" {
			t.Errorf("%s: sequence from: %s", name, r.raw)
		}
		b.expectError("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome",
			"from": "Acme" + bad + " <news@acme.example>"}, 400, "VALIDATION_ERROR")
		// A template subject may hold anything Liquid makes of it; what
		// leaves has no line break, or the send is refused.
		b.do("PUT", "/api/templates/crlf", f.key, map[string]any{"name": "C", "subject": "Hi" + bad + "{{ x }}",
			"content": "<p>hi</p>"})
		b.do("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "crlf",
			"variables": map[string]any{"x": bad}})
	}
	for _, m := range b.sg.Messages() {
		if strings.ContainsAny(m.Mail.Subject, "\r\n\x00") || strings.ContainsAny(m.Mail.From.Name, "\r\n\x00") {
			t.Errorf("a line break reached the provider: subject %q from %q", m.Mail.Subject, m.Mail.From.Name)
		}
		for k, v := range m.Mail.Headers {
			if strings.ContainsAny(k+v, "\r\n\x00") {
				t.Errorf("header %q: %q", k, v)
			}
		}
	}

	// A link whose href holds a line break (raw or percent-encoded) is
	// tracked; its redirect carries no line break in Location.
	b.expect("PUT", "/api/templates/links", f.key, map[string]any{"name": "L", "subject": "Links",
		"content": "<p><a href=\"https://example.com/a\r\nSet-Cookie: x=1\">raw</a> " +
			"<a href=\"https://example.com/b%0d%0aSet-Cookie:%20x=1\">encoded</a></p>"}, 201)
	n := len(b.sg.Messages())
	b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "links"}, 200)
	html := b.sg.Messages()[n].Mail.Content[1].Value
	clicks := regexp.MustCompile(regexp.QuoteMeta(b.cfg.PublicBaseURL)+`(/t/c/[A-Za-z0-9_-]+)`).FindAllStringSubmatch(html, -1)
	if len(clicks) == 0 {
		t.Fatalf("no tracked links in %s", html)
	}
	for _, c := range clicks {
		r := b.do("GET", c[1], "", nil)
		loc := r.header.Get("Location")
		if r.status >= 500 || strings.ContainsAny(loc, "\r\n\x00") || r.header.Get("Set-Cookie") != "" {
			t.Errorf("click %s: %d Location %q Set-Cookie %q", c[1], r.status, loc, r.header.Get("Set-Cookie"))
		}
	}
}
