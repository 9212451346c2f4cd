package api

import (
	"strings"
	"testing"

	"tidings/internal/config"
)

// The outbound webhook routes: create (secret once), read without it,
// update, rotate, test, deliveries, retry, delete; another tenant sees
// none of it.
func TestWebhookRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.WebhookAllowPrivateTargets = true })
	tok := b.apiKey(b.tenant("org_whk"))
	r := b.expect("POST", "/api/webhooks", tok, map[string]any{"url": "http://127.0.0.1:1025/hook",
		"events": []string{"email.bounced", "contact.unsubscribed"}, "description": "CRM"}, 201)
	id, secret := r.body["webhookId"].(string), r.body["secret"].(string)
	if !strings.HasPrefix(id, "whk_") || !strings.HasPrefix(secret, "whsec_") || r.body["enabled"] != true ||
		len(r.body["events"].([]any)) != 2 {
		t.Fatalf("%s", r.raw)
	}
	g := b.expect("GET", "/api/webhooks/"+id, tok, nil, 200)
	if _, ok := g.body["secret"]; ok {
		t.Fatalf("GET shows the secret: %s", g.raw)
	}
	if l := b.expect("GET", "/api/webhooks", tok, nil, 200); len(l.items()) != 1 || strings.Contains(string(l.raw), secret) {
		t.Fatalf("%s", l.raw)
	}
	u := b.expect("PATCH", "/api/webhooks/"+id, tok, map[string]any{"events": nil, "enabled": false}, 200)
	if u.body["enabled"] != false || len(u.body["events"].([]any)) != 0 {
		t.Fatalf("%s", u.raw)
	}
	b.expectError("PATCH", "/api/webhooks/"+id, tok, map[string]any{"events": []string{"email.nope"}}, 400, "VALIDATION_ERROR")
	b.expectError("PATCH", "/api/webhooks/"+id, tok, map[string]any{"enabeld": true}, 400, "VALIDATION_ERROR")
	b.expectError("PATCH", "/api/webhooks/"+id, tok, map[string]any{"url": "http://127.0.0.1:22/"}, 400, "VALIDATION_ERROR")
	rot := b.expect("POST", "/api/webhooks/"+id+"/rotate-secret", tok, nil, 200)
	if s, _ := rot.body["secret"].(string); !strings.HasPrefix(s, "whsec_") || s == secret {
		t.Fatalf("%s", rot.raw)
	}
	b.expect("POST", "/api/webhooks/"+id+"/test", tok, nil, 202)
	d := b.expect("GET", "/api/webhooks/"+id+"/deliveries?status=pending", tok, nil, 200)
	items := d.items()
	if len(items) != 1 || items[0].(map[string]any)["eventType"] != "webhook.test" {
		t.Fatalf("%s", d.raw)
	}
	msg := items[0].(map[string]any)["messageId"].(string)
	b.expect("POST", "/api/webhooks/"+id+"/deliveries/"+msg+"/retry", tok, nil, 202)
	b.expectError("POST", "/api/webhooks/"+id+"/deliveries/msg_nope/retry", tok, nil, 404, "NOT_FOUND")
	b.expectError("GET", "/api/webhooks/"+id+"/deliveries?status=lost", tok, nil, 400, "VALIDATION_ERROR")

	other := b.apiKey(b.tenant("org_whk2"))
	b.expectError("GET", "/api/webhooks/"+id, other, nil, 404, "NOT_FOUND")
	b.expectError("DELETE", "/api/webhooks/"+id, other, nil, 404, "NOT_FOUND")
	b.expectError("POST", "/api/webhooks/"+id+"/test", other, nil, 404, "NOT_FOUND")
	b.expectError("GET", "/api/webhooks/"+id+"/deliveries", other, nil, 404, "NOT_FOUND")
	b.expect("DELETE", "/api/webhooks/"+id, tok, nil, 204)
	b.expectError("GET", "/api/webhooks/"+id, tok, nil, 404, "NOT_FOUND")
}

// Without WEBHOOK_ALLOW_PRIVATE_TARGETS a private or loopback target is
// refused with the field named; so is a port outside 80, 443 and
// 1024-65535, whatever the address.
func TestWebhookPrivateTargetRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_whkp"))
	for _, u := range []string{"http://127.0.0.1/x", "https://10.1.2.3/x", "http://[::1]/x", "http://169.254.169.254/x", "ftp://8.8.8.8/",
		"https://8.8.8.8:22/x", "http://[fec0::1]/x", "http://[2001::1]/x"} {
		r := b.expectError("POST", "/api/webhooks", tok, map[string]any{"url": u}, 400, "VALIDATION_ERROR")
		if _, ok := r.fields()["url"]; !ok {
			t.Errorf("%s: %s", u, r.raw)
		}
	}
}
