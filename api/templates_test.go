package api

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"tidings/internal/config"
)

const newsletterMJML = `<mjml>
  <mj-head><mj-style>.h { color: #123456; }</mj-style></mj-head>
  <mj-body>
    <mj-section><mj-column>
      <mj-text css-class="h">Hello {{ contact.properties.firstName }}!</mj-text>
      <mj-text>{% for item in items %}<p>{{ item.name | upcase }}</p>{% endfor %}</mj-text>
      <mj-button href="{{ resetUrl }}">Reset</mj-button>
    </mj-column></mj-section>
  </mj-body>
</mjml>`

func TestTemplateCreateUpdateVersions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_tpl"))
	body := map[string]any{"name": "Welcome", "subject": "Hi {{ contact.properties.firstName }}", "content": newsletterMJML}
	r := b.expect("PUT", "/api/templates/welcome", tok, body, 201)
	if r.body["templateId"] != "welcome" || r.body["currentVersion"] != 1.0 || r.body["enabled"] != true {
		t.Fatalf("%s", r.raw)
	}
	if _, ok := r.body["content"]; ok {
		t.Fatal("PUT must not echo content")
	}
	if got := fmt.Sprint(r.body["requiredVariables"]); got != "[contact.properties.firstName items resetUrl]" {
		t.Fatalf("requiredVariables %s", got)
	}
	// The same body again changes nothing.
	r = b.expect("PUT", "/api/templates/welcome", tok, body, 200)
	if r.body["currentVersion"] != 1.0 {
		t.Fatalf("no-op PUT made a version: %s", r.raw)
	}
	r = b.expect("PUT", "/api/templates/welcome", tok, map[string]any{"subject": "Welcome aboard"}, 200)
	if r.body["currentVersion"] != 2.0 || r.body["subject"] != "Welcome aboard" {
		t.Fatalf("%s", r.raw)
	}
	g := b.expect("GET", "/api/templates/welcome", tok, nil, 200)
	if g.body["content"] != newsletterMJML {
		t.Fatalf("content must come back exactly as given: %s", g.raw)
	}
	v := b.expect("GET", "/api/templates/welcome/versions", tok, nil, 200)
	items := v.items()
	if len(items) != 2 || items[0].(map[string]any)["version"] != 2.0 || items[1].(map[string]any)["subject"] != "Hi {{ contact.properties.firstName }}" {
		t.Fatalf("versions newest first: %s", v.raw)
	}
	// Disable with a reason: state, not a new version.
	r = b.expect("PUT", "/api/templates/welcome", tok, map[string]any{"enabled": false, "disableReason": "rebrand"}, 200)
	if r.body["enabled"] != false || r.body["disableReason"] != "rebrand" || r.body["currentVersion"] != 2.0 {
		t.Fatalf("%s", r.raw)
	}
	l := b.expect("GET", "/api/templates", tok, nil, 200)
	if len(l.items()) != 1 || l.items()[0].(map[string]any)["content"] != nil {
		t.Fatalf("list is metadata only: %s", l.raw)
	}
	b.expect("DELETE", "/api/templates/welcome", tok, nil, 204)
	b.expectError("GET", "/api/templates/welcome", tok, nil, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("DELETE", "/api/templates/welcome", tok, nil, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("GET", "/api/templates/welcome/versions", tok, nil, 404, "TEMPLATE_NOT_FOUND")
}

func TestTemplateValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_tplv"))
	tests := []struct {
		desc  string
		body  map[string]any
		field string
	}{
		{"missing name", map[string]any{"subject": "s", "content": "<p>x</p>"}, "name"},
		{"missing subject", map[string]any{"name": "n", "content": "<p>x</p>"}, "subject"},
		{"missing content", map[string]any{"name": "n", "subject": "s"}, "content"},
		{"unknown mj element", map[string]any{"name": "n", "subject": "s", "content": "<mjml><mj-body><mj-bogus>x</mj-bogus></mj-body></mjml>"}, "content"},
		{"bad liquid content", map[string]any{"name": "n", "subject": "s", "content": "<p>{% if x %}</p>"}, "content"},
		{"bad liquid subject", map[string]any{"name": "n", "subject": "{% if x %}hi", "content": "<p>x</p>"}, "subject"},
		{"unterminated liquid output", map[string]any{"name": "n", "subject": "s", "content": "<p>{{ name </p>"}, "content"},
		{"enabled on create", map[string]any{"name": "n", "subject": "s", "content": "<p>x</p>", "enabled": false}, "enabled"},
		{"NUL in content", map[string]any{"name": "n", "subject": "s", "content": "<p>a\x00b</p>"}, "content"},
	}
	for _, tt := range tests {
		r := b.expectError("PUT", "/api/templates/t1", tok, tt.body, 400, "VALIDATION_ERROR")
		if _, ok := r.fields()[tt.field]; !ok {
			t.Errorf("%s: no details.fields[%q]: %s", tt.desc, tt.field, r.raw)
		}
	}
	b.expectError("PUT", "/api/templates/bad%20id", tok, map[string]any{"name": "n", "subject": "s", "content": "x"}, 400, "VALIDATION_ERROR")
	if l := b.expect("GET", "/api/templates", tok, nil, 200); len(l.items()) != 0 {
		t.Fatalf("invalid templates stored: %s", l.raw)
	}
	b.expect("PUT", "/api/templates/t1", tok, map[string]any{"name": "n", "subject": "s", "content": "<p>x</p>"}, 201)
	b.expectError("PUT", "/api/templates/t1", tok, map[string]any{}, 400, "VALIDATION_ERROR")
	b.expectError("PUT", "/api/templates/t1", tok, map[string]any{"content": "<mjml><mj-body><mj-bogus/></mj-body></mjml>"}, 400, "VALIDATION_ERROR")
	if g := b.expect("GET", "/api/templates/t1", tok, nil, 200); g.body["content"] != "<mjml><mj-body><mj-raw><p>x</p></mj-raw></mj-body></mjml>" || g.body["currentVersion"] != 1.0 {
		t.Fatalf("failed update changed the template: %s", g.raw)
	}
}

func TestTemplateSanitising(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_tpls"))
	dirty := `<p onclick="steal()">Hi</p><script>alert(1)</script><a href="javascript:alert(1)">x</a><iframe src="https://x"></iframe>`
	b.expect("PUT", "/api/templates/d", tok, map[string]any{"name": "n", "subject": "s", "content": dirty}, 201)
	g := b.expect("GET", "/api/templates/d", tok, nil, 200)
	stored := strings.ToLower(g.body["content"].(string))
	p := b.expect("POST", "/api/templates/d/preview", tok, map[string]any{}, 200)
	html := strings.ToLower(p.body["html"].(string))
	for _, bad := range []string{"<script", "onclick", "javascript:", "<iframe"} {
		if strings.Contains(stored, bad) || strings.Contains(html, bad) {
			t.Errorf("%q survived", bad)
		}
	}
	if !strings.Contains(html, "hi") {
		t.Fatal("content lost")
	}
}

func TestTemplatePreview(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_tplp"))
	b.expect("PUT", "/api/templates/news", tok, map[string]any{"name": "News", "subject": "Hi {{ contact.properties.firstName }}{{ missing }}", "content": newsletterMJML}, 201)
	r := b.expect("POST", "/api/templates/news/preview", tok, map[string]any{"variables": map[string]any{
		"contact":  map[string]any{"properties": map[string]any{"firstName": "Ann"}},
		"items":    []any{map[string]any{"name": "socks"}, map[string]any{"name": "hat"}},
		"resetUrl": "https://example.com/reset",
	}}, 200)
	if r.body["subject"] != "Hi Ann" || r.body["templateVersion"] != 1.0 {
		t.Fatalf("%s", r.raw)
	}
	// The one variable not given is named (it renders empty).
	if w, _ := r.body["warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "missing") {
		t.Fatalf("warnings %v", r.body["warnings"])
	}
	html := r.body["html"].(string)
	for _, want := range []string{"Hello Ann!", "SOCKS", "HAT", "https://example.com/reset", "<html", "#123456"} {
		if !strings.Contains(html, want) {
			t.Errorf("html lacks %q", want)
		}
	}
	if text := r.body["text"].(string); !strings.Contains(text, "Hello Ann!") || strings.Contains(text, "<p") || strings.Contains(text, "<html") {
		t.Fatalf("text part: %q", text)
	}
	// Without variables everything missing renders empty.
	r = b.expect("POST", "/api/templates/news/preview", tok, nil, 200)
	if r.body["subject"] != "Hi" && r.body["subject"] != "Hi " {
		t.Fatalf("%s", r.raw)
	}
	b.expectError("POST", "/api/templates/nope/preview", tok, nil, 404, "TEMPLATE_NOT_FOUND")
}

// TestTemplatePreviewOverBudget previews the two templates of issue 11:
// three nested loops in the subject, and a string doubled by assign in the
// content. Each is saved, and its preview stops with VALIDATION_ERROR
// naming the field and the limit (it used to run 57 s, or build 256 MiB).
func TestTemplatePreviewOverBudget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_tplbudget"))
	loops := `{% for a in (1..100000) %}{% for b in (1..100000) %}{% for c in (1..100000) %}{{ a }}{{ b }}{{ c }}{% endfor %}{% endfor %}{% endfor %}`
	doubling := `<p>{% assign s = "ab" %}` + strings.Repeat(`{% assign s = s | append: s %}`, 27) + `{{ s | size }}</p>`
	tests := []struct {
		desc, subject, content, field, limit string
	}{
		{"nested loops", loops, "<p>x</p>", "subject", "loop iterations"},
		{"doubling", "s", doubling, "content", "bytes of strings"},
	}
	for i, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			id := fmt.Sprintf("hostile%d", i)
			b.expect("PUT", "/api/templates/"+id, tok, map[string]any{"name": "n", "subject": tt.subject, "content": tt.content}, 201)
			r := b.expectError("POST", "/api/templates/"+id+"/preview", tok, nil, 400, "VALIDATION_ERROR")
			fields, _ := r.body["error"].(map[string]any)["details"].(map[string]any)["fields"].(map[string]any)
			msgs, _ := fields[tt.field].([]any)
			if len(fields) != 1 || len(msgs) != 1 || !strings.Contains(msgs[0].(string), tt.limit) {
				t.Fatalf("want %s naming %q: %s", tt.field, tt.limit, r.raw)
			}
		})
	}
}

func TestTemplatePlanLimitAndConcurrentCreate(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.PlanFreeTemplates = 2 })
	tok := b.apiKey(b.tenant("org_tplplan"))
	body := map[string]any{"name": "n", "subject": "s", "content": "<p>x</p>"}
	var wg sync.WaitGroup
	codes := make(chan int, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- b.do("PUT", "/api/templates/same", tok, body).status
		}()
	}
	wg.Wait()
	close(codes)
	created := 0
	for c := range codes {
		if c == 201 {
			created++
		} else if c != 200 {
			t.Fatalf("status %d", c)
		}
	}
	if created != 1 {
		t.Fatalf("%d creates of one id", created)
	}
	b.expect("PUT", "/api/templates/second", tok, body, 201)
	b.expectError("PUT", "/api/templates/third", tok, body, 402, "PLAN_LIMIT_EXCEEDED")
	b.expect("PUT", "/api/templates/second", tok, map[string]any{"name": "updates still work"}, 200)
}

func TestTemplateTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.apiKey(b.tenant("org_tia"))
	other := b.apiKey(b.tenant("org_tib"))
	b.expect("PUT", "/api/templates/mine", a, map[string]any{"name": "n", "subject": "s", "content": "<p>secret</p>"}, 201)
	b.expectError("GET", "/api/templates/mine", other, nil, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("GET", "/api/templates/mine/versions", other, nil, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("POST", "/api/templates/mine/preview", other, nil, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("DELETE", "/api/templates/mine", other, nil, 404, "TEMPLATE_NOT_FOUND")
	if l := b.expect("GET", "/api/templates", other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}
	// The same id in another tenant is another template.
	b.expect("PUT", "/api/templates/mine", other, map[string]any{"name": "theirs", "subject": "s", "content": "<p>x</p>"}, 201)
	if g := b.expect("GET", "/api/templates/mine", a, nil, 200); g.body["content"] != "<mjml><mj-body><mj-raw><p>secret</p></mj-raw></mj-body></mjml>" {
		t.Fatalf("%s", g.raw)
	}
}

// Raw HTML is stored as the MJML that wraps it (ADDENDUM 5); sending the
// raw HTML again, or the wrapped form GET returned, makes no new version.
func TestTemplateRawHTMLStoredWrapped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_tplraw"))
	raw := `<p>Hi {{ name }}</p>`
	b.expect("PUT", "/api/templates/raw", tok, map[string]any{"name": "n", "subject": "s", "content": raw}, 201)
	g := b.expect("GET", "/api/templates/raw", tok, nil, 200)
	wrapped := "<mjml><mj-body><mj-raw>" + raw + "</mj-raw></mj-body></mjml>"
	if g.body["content"] != wrapped {
		t.Fatalf("content %q, want %q", g.body["content"], wrapped)
	}
	for _, c := range []string{raw, wrapped} {
		if r := b.expect("PUT", "/api/templates/raw", tok, map[string]any{"content": c}, 200); r.body["currentVersion"] != 1.0 {
			t.Fatalf("re-PUT of %q made a new version: %s", c, r.raw)
		}
	}
}
