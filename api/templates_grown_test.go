package api

import (
	"fmt"
	"strings"
	"testing"
)

// ADDENDUM 24 at the HTTP contract: whole documents, well-formed MJML,
// warnings and strictVariables, partials, locales.

const editorDocument = `<!DOCTYPE html>
<html>
<head><title>Spring sale</title><style>.promo { color: #c0ffee; }</style></head>
<body><p class="promo">Hello {{ contact.properties.firstName }}</p></body>
</html>`

func TestTemplateWholeDocumentIsNotWrapped(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_tpldoc")
	b := f.b
	b.expect("PUT", "/api/templates/sale", f.key, map[string]any{"name": "Sale", "subject": "Sale", "content": editorDocument}, 201)
	g := b.expect("GET", "/api/templates/sale", f.key, nil, 200)
	if g.body["content"] != editorDocument {
		t.Fatalf("a whole document is stored as given: %s", g.raw)
	}
	b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "sale"}, 200)
	html := b.sg.Messages()[0].Mail.Content[1].Value
	lower := strings.ToLower(html)
	for _, tag := range []string{"<!doctype", "<html", "<head", "<body"} {
		if n := strings.Count(lower, tag); n != 1 {
			t.Fatalf("%s appears %d times in the message:\n%s", tag, n, html)
		}
	}
	if !strings.Contains(html, "<title>Spring sale</title>") || !strings.Contains(html, ".promo { color: #c0ffee; }") ||
		!strings.Contains(html, "Hello Ann") {
		t.Fatalf("head or body lost:\n%s", html)
	}
}

func TestTemplateMJMLNotWellFormed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_tplwf"))
	content := "<mjml>\n<mj-body>\n<mj-section>\n<mj-column>\n<mj-text>Hello\n</mj-column>\n</mj-section>\n</mj-body>\n</mjml>"
	r := b.expectError("PUT", "/api/templates/broken", tok, map[string]any{"name": "B", "subject": "s", "content": content}, 400, "VALIDATION_ERROR")
	if got := fmt.Sprint(r.fields()["content"]); !strings.Contains(got, "line 5") || !strings.Contains(got, "mj-text") {
		t.Fatalf("want the unclosed mj-text's line named: %s", r.raw)
	}
	b.expectError("GET", "/api/templates/broken", tok, nil, 404, "TEMPLATE_NOT_FOUND")
}

func TestSendWarningsAndStrictVariables(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_sendwarn")
	b := f.b
	// The fixture's template reads name, which this send lacks.
	r := b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome"}, 200)
	if got := fmt.Sprint(r.body["warnings"]); !strings.Contains(got, "name") {
		t.Fatalf("want a warning naming the variable: %s", r.raw)
	}
	r = b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome",
		"variables": map[string]any{"name": "Ada"}}, 200)
	if w, ok := r.body["warnings"].([]any); !ok || len(w) != 0 {
		t.Fatalf("want no warnings: %s", r.raw)
	}
	p := b.expect("PUT", "/api/templates/welcome", f.key, map[string]any{"strictVariables": true}, 200)
	if p.body["strictVariables"] != true || p.body["currentVersion"] != 1.0 {
		t.Fatalf("%s", p.raw)
	}
	before := b.sg.Count()
	e := b.expectError("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome"}, 400, "VALIDATION_ERROR")
	if !strings.Contains(string(e.raw), "name") || b.sg.Count() != before {
		t.Fatalf("a strict template sent without its variable: %s", e.raw)
	}
	b.expect("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome",
		"variables": map[string]any{"name": "Ada"}}, 200)
}

func TestPartialsContract(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_partials")
	b := f.b
	key := f.key
	r := b.expect("PUT", "/api/partials/footer", key, map[string]any{"content": "<p>Bye {{ contact.properties.firstName }}</p>"}, 201)
	if r.body["partialId"] != "footer" || r.body["content"] != "<p>Bye {{ contact.properties.firstName }}</p>" ||
		r.body["createdAt"] == nil || r.body["updatedAt"] == nil {
		t.Fatalf("%s", r.raw)
	}
	b.expect("PUT", "/api/partials/footer", key, map[string]any{"content": "<p>Bye {{ contact.properties.firstName }}!</p>"}, 200)
	b.expect("PUT", "/api/partials/frame", key, map[string]any{"content": `<div class="frame">{{ content }}{% include 'footer' %}</div>`}, 201)
	b.expectError("PUT", "/api/partials/bad", key, map[string]any{}, 400, "VALIDATION_ERROR")
	b.expectError("PUT", "/api/partials/bad", key, map[string]any{"content": "x", "contnet": "y"}, 400, "VALIDATION_ERROR")
	b.expectError("PUT", "/api/partials/bad%20id", key, map[string]any{"content": "x"}, 400, "VALIDATION_ERROR")

	g := b.expect("GET", "/api/partials/footer", key, nil, 200)
	if g.body["content"] != "<p>Bye {{ contact.properties.firstName }}!</p>" {
		t.Fatalf("%s", g.raw)
	}
	l := b.expect("GET", "/api/partials?limit=1", key, nil, 200)
	if len(l.items()) != 1 || l.body["nextCursor"] == nil {
		t.Fatalf("%s", l.raw)
	}
	l2 := b.expect("GET", "/api/partials?limit=1&cursor="+l.body["nextCursor"].(string), key, nil, 200)
	if len(l2.items()) != 1 || l2.items()[0].(map[string]any)["partialId"] == l.items()[0].(map[string]any)["partialId"] {
		t.Fatalf("%s", l2.raw)
	}
	b.expectError("GET", "/api/partials?cursor=nope", key, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/partials/nope", key, nil, 404, "NOT_FOUND")

	// A template in the layout, with the include inside it.
	t1 := b.expect("PUT", "/api/templates/framed", key, map[string]any{"name": "Framed", "subject": "Hi",
		"content": "<p>Body</p>", "layout": "frame"}, 201)
	if t1.body["layout"] != "frame" {
		t.Fatalf("%s", t1.raw)
	}
	b.expect("POST", "/api/send", key, map[string]any{"to": "ann@example.com", "template": "framed"}, 200)
	if html := b.sg.Messages()[0].Mail.Content[1].Value; !strings.Contains(html, `<div class="frame"><p>Body</p><p>Bye Ann!</p></div>`) {
		t.Fatalf("%s", html)
	}
	pv := b.expect("POST", "/api/templates/framed/preview", key, map[string]any{}, 200)
	if !strings.Contains(pv.body["html"].(string), "Bye !") {
		t.Fatalf("%s", pv.raw)
	}
	// Used: not deleted.
	d := b.expectError("DELETE", "/api/partials/footer", key, nil, 409, "PARTIAL_REFERENCED")
	if !strings.Contains(string(d.raw), "frame") {
		t.Fatalf("%s", d.raw)
	}
	b.expectError("DELETE", "/api/partials/frame", key, nil, 409, "PARTIAL_REFERENCED")

	// A template naming a partial that does not exist yet: saved; its
	// preview and sends are VALIDATION_ERROR naming it.
	b.expect("PUT", "/api/templates/early", key, map[string]any{"name": "Early", "subject": "Hi",
		"content": "<p>Top</p>{% include 'signature' %}"}, 201)
	e := b.expectError("POST", "/api/templates/early/preview", key, map[string]any{}, 400, "VALIDATION_ERROR")
	if !strings.Contains(string(e.raw), "signature") {
		t.Fatalf("%s", e.raw)
	}
	before := b.sg.Count()
	e = b.expectError("POST", "/api/send", key, map[string]any{"to": "ann@example.com", "template": "early"}, 400, "VALIDATION_ERROR")
	if !strings.Contains(string(e.raw), "signature") || b.sg.Count() != before {
		t.Fatalf("%s", e.raw)
	}
	b.expect("PUT", "/api/partials/signature", key, map[string]any{"content": "<p>Sig</p>"}, 201)
	b.expect("POST", "/api/send", key, map[string]any{"to": "ann@example.com", "template": "early"}, 200)

	// Layout null clears it and frees the partial.
	b.expect("PUT", "/api/templates/framed", key, map[string]any{"layout": nil}, 200)
	b.expect("PUT", "/api/templates/early", key, map[string]any{"content": "<p>Top</p>"}, 200)
	b.expectError("DELETE", "/api/partials/footer", key, nil, 409, "PARTIAL_REFERENCED") // frame includes it
	b.expect("DELETE", "/api/partials/frame", key, nil, 204)
	b.expect("DELETE", "/api/partials/footer", key, nil, 204)
	b.expectError("DELETE", "/api/partials/footer", key, nil, 404, "NOT_FOUND")

	// Another tenant can neither see nor touch them.
	other := b.apiKey(b.tenant("org_partials_other"))
	b.expectError("GET", "/api/partials/signature", other, nil, 404, "NOT_FOUND")
	b.expectError("DELETE", "/api/partials/signature", other, nil, 404, "NOT_FOUND")
	if l := b.expect("GET", "/api/partials", other, nil, 200); len(l.items()) != 0 {
		t.Fatalf("%s", l.raw)
	}
	b.expect("PUT", "/api/partials/signature", other, map[string]any{"content": "<p>Theirs</p>"}, 201)
	if g := b.expect("GET", "/api/partials/signature", key, nil, 200); g.body["content"] != "<p>Sig</p>" {
		t.Fatalf("another tenant's PUT changed ours: %s", g.raw)
	}
}

func TestTemplateLocalesContract(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_locales")
	b := f.b
	key := f.key
	r := b.expect("PUT", "/api/templates/welcome/locales/de", key, map[string]any{"subject": "Hallo {{ contact.properties.firstName }}",
		"content": "<p>Hallo {{ name }}</p>"}, 201)
	if r.body["locale"] != "de" || r.body["subject"] != "Hallo {{ contact.properties.firstName }}" || r.body["content"] != "<mjml><mj-body><mj-raw><p>Hallo {{ name }}</p></mj-raw></mj-body></mjml>" || r.body["updatedAt"] == nil {
		t.Fatalf("%s", r.raw)
	}
	b.expect("PUT", "/api/templates/welcome/locales/de", key, map[string]any{"subject": "Hallo {{ contact.properties.firstName }}!",
		"content": "<p>Hallo {{ name }}</p>"}, 200)
	if r := b.expect("PUT", "/api/templates/welcome/locales/pt-br", key, map[string]any{"subject": "Olá", "content": "<p>Olá</p>"}, 201); r.body["locale"] != "pt-BR" {
		t.Fatalf("%s", r.raw)
	}
	b.expectError("PUT", "/api/templates/welcome/locales/not%20a%20tag", key, map[string]any{"subject": "s", "content": "<p>x</p>"}, 400, "VALIDATION_ERROR")
	b.expectError("PUT", "/api/templates/welcome/locales/de", key, map[string]any{"content": "<p>x</p>"}, 400, "VALIDATION_ERROR")
	b.expectError("PUT", "/api/templates/nope/locales/de", key, map[string]any{"subject": "s", "content": "<p>x</p>"}, 404, "TEMPLATE_NOT_FOUND")
	l := b.expect("GET", "/api/templates/welcome/locales", key, nil, 200)
	items := l.items()
	if len(items) != 2 || items[0].(map[string]any)["locale"] != "de" || items[1].(map[string]any)["locale"] != "pt-BR" {
		t.Fatalf("%s", l.raw)
	}
	if _, ok := items[0].(map[string]any)["content"]; ok {
		t.Fatalf("the list carries no content: %s", l.raw)
	}

	// A de-AT contact gets de; the record says so. Ann (no locale) gets
	// the template's own, with a null locale.
	b.expect("PATCH", "/api/contacts/"+f.contactID, key, map[string]any{"properties": map[string]any{"locale": "de-AT"}}, 200)
	s := b.expect("POST", "/api/send", key, map[string]any{"to": "ann@example.com", "template": "welcome", "variables": map[string]any{"name": "Ada"}}, 200)
	if m := b.sg.Messages()[0].Mail; m.Subject != "Hallo Ann!" || !strings.Contains(m.Content[1].Value, "Hallo Ada") {
		t.Fatalf("subject %q", m.Subject)
	}
	rec := b.expect("GET", "/api/sends/"+s.body["sendId"].(string), key, nil, 200)
	if rec.body["locale"] != "de" {
		t.Fatalf("%s", rec.raw)
	}
	b.expect("PATCH", "/api/contacts/"+f.contactID, key, map[string]any{"properties": map[string]any{"locale": nil}}, 200)
	s = b.expect("POST", "/api/send", key, map[string]any{"to": "ann@example.com", "template": "welcome", "variables": map[string]any{"name": "Ada"}}, 200)
	rec = b.expect("GET", "/api/sends/"+s.body["sendId"].(string), key, nil, 200)
	if v, ok := rec.body["locale"]; !ok || v != nil || b.sg.Messages()[1].Mail.Subject != "Hi Ann" {
		t.Fatalf("%s", rec.raw)
	}
	// Preview takes a locale.
	pv := b.expect("POST", "/api/templates/welcome/preview", key, map[string]any{"locale": "pt-BR"}, 200)
	if pv.body["subject"] != "Olá" || pv.body["locale"] != "pt-BR" {
		t.Fatalf("%s", pv.raw)
	}
	b.expectError("POST", "/api/templates/welcome/preview", key, map[string]any{"locale": "??"}, 400, "VALIDATION_ERROR")

	// Another tenant can neither see nor touch them.
	other := b.apiKey(b.tenant("org_locales_other"))
	b.expectError("GET", "/api/templates/welcome/locales", other, nil, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("DELETE", "/api/templates/welcome/locales/de", other, nil, 404, "TEMPLATE_NOT_FOUND")
	b.expectError("PUT", "/api/templates/welcome/locales/de", other, map[string]any{"subject": "s", "content": "<p>x</p>"}, 404, "TEMPLATE_NOT_FOUND")

	g := b.expect("GET", "/api/templates/welcome/locales/DE", key, nil, 200)
	if g.body["content"] == nil {
		t.Fatalf("%s", g.raw)
	}
	b.expect("DELETE", "/api/templates/welcome/locales/de", key, nil, 204)
	b.expectError("DELETE", "/api/templates/welcome/locales/de", key, nil, 404, "NOT_FOUND")
	b.expectError("GET", "/api/templates/welcome/locales/de", key, nil, 404, "NOT_FOUND")
}
