package api

import (
	"net/url"
	"strings"
	"testing"
)

// walkExamples calls every operation of the table once with a request a
// reader would write, in the order a new user meets them; the recorder
// keeps each answer as the operation's example. A route added to the
// table needs a step here (TestOpenAPIExamples names the missing ones).
func walkExamples(t *testing.T, b *bundle, rec *exampleRecorder) {
	sess := b.tenant("org_examples")
	ok := func(method, path, token string, body any) resp {
		t.Helper()
		r := b.do(method, path, token, body)
		if r.status/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, r.status, r.raw)
		}
		return r
	}
	str := func(r resp, field string) string {
		t.Helper()
		s, _ := r.body[field].(string)
		if s == "" {
			t.Fatalf("no %s in %s", field, r.raw)
		}
		return s
	}
	esc := url.PathEscape

	// The service.
	ok("GET", "/healthz", "", nil)
	ok("GET", "/readyz", "", nil)

	// The tenant and its keys.
	ok("POST", "/api/tenant", b.session("org_examples_new"), map[string]any{"name": "Acme Newsletters"})
	ok("GET", "/api/tenant", sess, nil)
	keyResp := ok("POST", "/api/api-keys", sess, map[string]any{"name": "production"})
	key := str(keyResp, "rawKey")
	ok("GET", "/api/api-keys", key, nil)
	spare := str(ok("POST", "/api/api-keys", sess, map[string]any{"name": "ci"}), "keyId")
	ok("DELETE", "/api/api-keys/"+spare, sess, nil)
	ok("PATCH", "/api/tenant", key, map[string]any{"name": "Acme Newsletters", "timezone": "Europe/Amsterdam"})
	ok("POST", "/api/tenant/sandbox-whitelist", key, map[string]any{"email": "ann@example.com"})
	ok("POST", "/api/tenant/sandbox-whitelist", key, map[string]any{"email": "zed@example.com"})
	ok("GET", "/api/tenant/sandbox-whitelist", key, nil)
	ok("DELETE", "/api/tenant/sandbox-whitelist/"+esc("zed@example.com"), key, nil)
	b.do("DELETE", "/api/tenant/sandbox-whitelist/not-an-address", key, nil) // not an email address: 400

	// Topics, then contacts.
	ok("POST", "/api/topics", key, map[string]any{"topicId": "news", "name": "News", "description": "Monthly product news", "default": "opt_in"})
	ok("GET", "/api/topics", key, nil)
	ok("GET", "/api/topics/news", key, nil)
	ok("PATCH", "/api/topics/news", key, map[string]any{"name": "Newsletter"})
	ok("POST", "/api/topics", key, map[string]any{"topicId": "offers", "name": "Offers", "default": "opt_out"})
	ok("DELETE", "/api/topics/offers", key, nil)

	ann := str(ok("POST", "/api/contacts", key, map[string]any{"email": "ann@example.com", "userId": "u-1001",
		"properties": map[string]any{"firstName": "Ann", "plan": "pro", "locale": "en"}}), "contactId")
	b.do("POST", "/api/contacts", key, map[string]any{"email": "ann@example.com"}) // CONTACT_EXISTS
	bob := str(ok("PUT", "/api/contacts", key, map[string]any{"email": "bob@example.com", "properties": map[string]any{"firstName": "Bob"}}), "contactId")
	ok("GET", "/api/contacts", key, nil)
	ok("GET", "/api/contacts/stats", key, nil)
	ok("GET", "/api/contacts/"+ann, key, nil)
	ok("PATCH", "/api/contacts/"+bob, key, map[string]any{"properties": map[string]any{"plan": "free"}, "topics": map[string]any{"news": false}})
	imp := b.upload("POST", "/api/contacts/import", key, "text/csv", strings.NewReader("email,firstName\ncarl@example.com,Carl\n"))
	if imp.status != 202 {
		t.Fatalf("import: %d %s", imp.status, imp.raw)
	}
	impID := str(imp, "importId")
	if err := b.svc.Imports.Run(t.Context(), "org_examples", impID); err != nil {
		t.Fatal(err)
	}
	ok("GET", "/api/contacts/import/"+impID, key, nil)

	// Templates, partials, locales.
	mjml := `<mjml><mj-body><mj-section><mj-column><mj-text>Hello {{ contact.properties.firstName }}! <a href="{{ unsubscribeUrl }}">Unsubscribe</a></mj-text></mj-column></mj-section></mj-body></mjml>`
	ok("PUT", "/api/partials/footer", key, map[string]any{"content": "<mj-text>Acme, 1 Main St</mj-text>"})
	ok("GET", "/api/partials", key, nil)
	ok("GET", "/api/partials/footer", key, nil)
	ok("PUT", "/api/templates/welcome", key, map[string]any{"name": "Welcome", "subject": "Welcome, {{ contact.properties.firstName }}", "content": mjml})
	ok("PUT", "/api/templates/welcome", key, map[string]any{"subject": "Welcome aboard, {{ contact.properties.firstName }}"})
	ok("GET", "/api/templates", key, nil)
	ok("GET", "/api/templates/welcome", key, nil)
	ok("GET", "/api/templates/welcome/versions", key, nil)
	ok("POST", "/api/templates/welcome/preview", key, map[string]any{"variables": map[string]any{"contact": map[string]any{"properties": map[string]any{"firstName": "Ann"}}}})
	ok("PUT", "/api/templates/welcome/locales/de", key, map[string]any{"subject": "Willkommen, {{ contact.properties.firstName }}", "content": mjml})
	ok("GET", "/api/templates/welcome/locales", key, nil)
	ok("GET", "/api/templates/welcome/locales/de", key, nil)
	ok("DELETE", "/api/templates/welcome/locales/de", key, nil)
	ok("PUT", "/api/templates/old", key, map[string]any{"name": "Old", "subject": "Old", "content": mjml})
	ok("DELETE", "/api/templates/old", key, nil)
	ok("DELETE", "/api/partials/footer", key, nil)

	// Sending.
	sent := ok("POST", "/api/send", key, map[string]any{"to": "ann@example.com", "template": "welcome", "variables": map[string]any{"orderId": "1042"}})
	b.do("POST", "/api/send", key, map[string]any{"to": "ann@example.com", "template": "missing"}) // TEMPLATE_NOT_FOUND
	b.do("POST", "/api/send", key, map[string]any{"to": "nobody@example.com", "template": "welcome"})
	ok("POST", "/api/send/batch", key, map[string]any{"messages": []any{
		map[string]any{"to": "ann@example.com", "template": "welcome"},
		map[string]any{"to": "nobody@example.com", "template": "welcome"}}})
	sendID := str(sent, "sendId")
	ok("GET", "/api/sends", key, nil)
	ok("GET", "/api/sends/"+sendID, key, nil)
	ok("GET", "/api/contacts/"+ann+"/sends", key, nil)

	// Events and sequences.
	ok("PUT", "/api/sequences/onboarding", key, map[string]any{"content": "name: Onboarding\ntrigger:\n  event: signed_up\nsteps:\n  - delay: 1d\n  - send: welcome\n"})
	ok("GET", "/api/sequences", key, nil)
	ok("GET", "/api/sequences/onboarding", key, nil)
	ok("PATCH", "/api/sequences/onboarding", key, map[string]any{"name": "Onboarding (v2)"})
	ok("POST", "/api/events", key, map[string]any{"email": "ann@example.com", "name": "signed_up", "properties": map[string]any{"source": "landing"}})
	ok("GET", "/api/events", key, nil)
	ok("GET", "/api/events/contacts/"+ann, key, nil)
	ok("GET", "/api/events/archive", key, nil)
	b.do("GET", "/api/events/archive/2001-01", key, nil) // a month never archived: its 404
	ok("POST", "/api/sequences/onboarding/contacts", key, map[string]any{"contactId": bob})
	ok("GET", "/api/sequences/onboarding/contacts", key, nil)
	ok("GET", "/api/sequences/onboarding/status", key, nil)
	ok("GET", "/api/sequences/onboarding/experiment", key, nil)
	ok("GET", "/api/sequences/onboarding/sends", key, nil)
	ok("POST", "/api/sequences/onboarding/dry-run", key, map[string]any{"contactId": ann})
	ok("GET", "/api/contacts/"+ann+"/sequences", key, nil)
	sched := ok("GET", "/api/contacts/"+ann+"/scheduled", key, nil)
	ok("GET", "/api/scheduled?contactId="+ann, key, nil)
	if items := sched.items(); len(items) > 0 {
		s := items[0].(map[string]any)
		ok("GET", "/api/scheduled/"+s["scheduledSendId"].(string)+"?scheduledFor="+url.QueryEscape(s["scheduledFor"].(string)), key, nil)
	} else {
		t.Fatalf("no scheduled send for ann: %s", sched.raw)
	}
	ok("GET", "/api/contacts/"+ann+"/timeline", key, nil)
	ok("DELETE", "/api/sequences/onboarding/contacts/"+bob, key, nil)

	// Segments, campaigns, broadcasts.
	seg := str(ok("POST", "/api/segments", key, map[string]any{"name": "Pro plan", "description": "Contacts on the pro plan",
		"rules": map[string]any{"operator": "and", "conditions": []any{
			map[string]any{"type": "property", "field": "plan", "operator": "equals", "value": "pro"}}}}), "segmentId")
	ok("GET", "/api/segments", key, nil)
	ok("GET", "/api/segments/"+seg, key, nil)
	ok("PATCH", "/api/segments/"+seg, key, map[string]any{"description": "Paying contacts"})
	ok("POST", "/api/segments/"+seg+"/compute", key, nil)
	ok("GET", "/api/segments/"+seg+"/members", key, nil)
	ok("GET", "/api/segments/"+seg+"/explain?contactId="+ann, key, nil)
	ok("GET", "/api/contacts/"+ann+"/segments", key, nil)

	cmp := str(ok("POST", "/api/campaigns", key, map[string]any{"name": "Spring launch", "description": "Onboarding and the launch mail",
		"segmentId": seg, "goals": []any{"purchase.completed"}}), "campaignId")
	ok("GET", "/api/campaigns", key, nil)
	ok("GET", "/api/campaigns/"+cmp, key, nil)
	ok("PATCH", "/api/campaigns/"+cmp, key, map[string]any{"status": "active"})
	ok("POST", "/api/campaigns/"+cmp+"/sequences/onboarding", key, nil)
	ok("POST", "/api/campaigns/"+cmp+"/templates/welcome", key, nil)
	ok("DELETE", "/api/campaigns/"+cmp+"/sequences/onboarding", key, nil)
	ok("DELETE", "/api/campaigns/"+cmp+"/templates/welcome", key, nil)

	brd := str(ok("POST", "/api/broadcasts", key, map[string]any{"name": "April news", "templateId": "welcome", "segmentId": seg}), "broadcastId")
	ok("GET", "/api/broadcasts", key, nil)
	ok("GET", "/api/broadcasts/"+brd, key, nil)
	ok("PATCH", "/api/broadcasts/"+brd, key, map[string]any{"name": "April newsletter"})
	ok("POST", "/api/broadcasts/"+brd+"/send", key, map[string]any{"sendAt": "2030-04-01T09:00:00Z"})
	ok("POST", "/api/broadcasts/"+brd+"/pause", key, nil)
	ok("POST", "/api/broadcasts/"+brd+"/resume", key, nil)
	ok("POST", "/api/broadcasts/"+brd+"/cancel", key, nil)
	ok("GET", "/api/broadcasts/"+brd+"/recipients", key, nil)
	ab := str(ok("POST", "/api/broadcasts", key, map[string]any{"name": "Subject test", "templateId": "welcome", "segmentId": seg,
		"experiment": map[string]any{"variants": []any{map[string]any{"name": "Short", "subject": "News"},
			map[string]any{"name": "Long", "subject": "What is new this April"}}, "metric": "opened", "waitFor": "4h"}}), "broadcastId")
	ok("POST", "/api/broadcasts/"+ab+"/send", key, map[string]any{})
	if err := b.svc.Broadcasts.Start(t.Context(), "org_examples", ab); err != nil {
		t.Fatal(err)
	}
	abv := ok("GET", "/api/broadcasts/"+ab, key, nil).body["experiment"].(map[string]any)["variants"].([]any)[0].(map[string]any)
	ok("POST", "/api/broadcasts/"+ab+"/winner", key, map[string]any{"variantId": abv["variantId"]})
	draft := str(ok("POST", "/api/broadcasts", key, map[string]any{"name": "Draft", "templateId": "welcome", "segmentId": seg}), "broadcastId")
	ok("DELETE", "/api/broadcasts/"+draft, key, nil)

	// Consent.
	ok("POST", "/api/suppressions", key, map[string]any{"email": "bounced@example.com", "note": "asked by phone"})
	ok("GET", "/api/suppressions", key, nil)
	ok("DELETE", "/api/suppressions/"+esc("bounced@example.com"), key, nil)

	// Webhooks.
	whk := str(ok("POST", "/api/webhooks", key, map[string]any{"url": "https://8.8.8.8/hooks/tidings",
		"events": []any{"email.delivered", "email.bounced"}, "description": "CRM sync"}), "webhookId")
	ok("GET", "/api/webhooks", key, nil)
	ok("GET", "/api/webhooks/"+whk, key, nil)
	ok("PATCH", "/api/webhooks/"+whk, key, map[string]any{"description": "CRM sync (EU)"})
	ok("POST", "/api/webhooks/"+whk+"/test", key, nil)
	deliveries := ok("GET", "/api/webhooks/"+whk+"/deliveries", key, nil)
	if items := deliveries.items(); len(items) > 0 {
		msg := items[0].(map[string]any)["messageId"].(string)
		ok("POST", "/api/webhooks/"+whk+"/deliveries/"+msg+"/retry", key, nil)
	} else {
		t.Fatalf("no delivery: %s", deliveries.raw)
	}
	ok("POST", "/api/webhooks/"+whk+"/rotate-secret", key, nil)
	ok("DELETE", "/api/webhooks/"+whk, key, nil)

	// Domains.
	ok("POST", "/api/domains", key, map[string]any{"domain": "mail.example.com"})
	ok("GET", "/api/domains", key, nil)
	ok("GET", "/api/domains/mail.example.com", key, nil)
	ok("POST", "/api/domains/mail.example.com/verify", key, nil)
	ok("PATCH", "/api/domains/mail.example.com", key, map[string]any{"sendingEnabled": false})
	ok("DELETE", "/api/domains/mail.example.com", key, nil)

	// Metrics and the audit log.
	ok("GET", "/api/metrics", key, nil)
	ok("GET", "/api/metrics/sequences", key, nil)
	ok("GET", "/api/metrics/sequences/onboarding", key, nil)
	ok("GET", "/api/metrics/templates", key, nil)
	ok("GET", "/api/metrics/templates/welcome", key, nil)
	ok("GET", "/api/audit-log?limit=2", key, nil)

	// Deletes last.
	ok("DELETE", "/api/campaigns/"+cmp, key, nil)
	ok("DELETE", "/api/segments/"+seg, key, nil)
	ok("DELETE", "/api/sequences/onboarding", key, nil)
	ok("DELETE", "/api/contacts/"+bob, key, nil)
	ok("DELETE", "/api/topics/news", key, nil)
	ok("DELETE", "/api/templates/welcome", key, nil)
	_ = rec
}
