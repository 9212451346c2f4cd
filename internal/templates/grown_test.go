package templates_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	xhtml "golang.org/x/net/html"

	"tidings/internal/render"
	"tidings/internal/templates"
)

// ADDENDUM 24: layouts, partials, locales, whole documents, strict checks.

const editorExport = `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Spring sale</title>
  <style>.promo { color: #c0ffee; }</style>
</head>
<body>
  <p class="promo">Hello {{ contact.firstName }}</p>
</body>
</html>`

// documentShape counts, as the tokenizer reads the message, the doctypes
// and the html, head and body start tags: a document nested in another
// has two of each.
func documentShape(t *testing.T, h string) map[string]int {
	t.Helper()
	n := map[string]int{}
	z := xhtml.NewTokenizer(strings.NewReader(h))
	for {
		switch z.Next() {
		case xhtml.ErrorToken:
			return n
		case xhtml.DoctypeToken:
			n["doctype"]++
		case xhtml.StartTagToken:
			if name, _ := z.TagName(); slices.Contains([]string{"html", "head", "body"}, string(name)) {
				n[string(name)]++
			}
		}
	}
}

// headOf returns the children of the parsed document's head, as
// "element" or "element:text".
func headOf(t *testing.T, h string) []string {
	t.Helper()
	doc, err := xhtml.Parse(strings.NewReader(h))
	if err != nil {
		t.Fatal(err)
	}
	var head *xhtml.Node
	var find func(*xhtml.Node)
	find = func(n *xhtml.Node) {
		if n.Type == xhtml.ElementNode && n.Data == "head" && head == nil {
			head = n
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			find(c)
		}
	}
	find(doc)
	var out []string
	for c := head.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != xhtml.ElementNode {
			continue
		}
		s := c.Data
		if c.FirstChild != nil && c.FirstChild.Type == xhtml.TextNode {
			s += ":" + strings.TrimSpace(c.FirstChild.Data)
		}
		out = append(out, s)
	}
	return out
}

func TestWholeDocumentIsSentAsOneDocument(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.put(t, b.tenant, "sale", create("Sale", "Sale", editorExport))
	if got := b.get(t, b.tenant, "sale").Content; got != editorExport {
		t.Fatalf("a whole document is stored as given, got:\n%s", got)
	}
	m, err := b.renderer.Preview(ctx, b.tenant, "sale", map[string]any{"contact": map[string]any{"firstName": "Ann"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := documentShape(t, m.HTML); got["doctype"] != 1 || got["html"] != 1 || got["head"] != 1 || got["body"] != 1 {
		t.Fatalf("want exactly one doctype, html, head and body, got %v:\n%s", got, m.HTML)
	}
	head := headOf(t, m.HTML)
	if !slices.Contains(head, "title:Spring sale") || !slices.Contains(head, "style:.promo { color: #c0ffee; }") {
		t.Fatalf("the head keeps its title and style: %q", head)
	}
	if !strings.Contains(m.HTML, "Hello Ann") {
		t.Fatalf("the Liquid renders: %s", m.HTML)
	}
	// Sanitised as any content.
	b.put(t, b.tenant, "evil", create("Evil", "x", "<!doctype html><html><head><script>alert(1)</script></head><body onload=\"x()\"><p>hi</p></body></html>"))
	if got := b.get(t, b.tenant, "evil").Content; strings.Contains(got, "script") || strings.Contains(got, "onload") {
		t.Fatalf("not sanitised: %s", got)
	}
}

func TestMJMLNotWellFormedIsRefusedNamingItsLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		desc, content, want string
	}{
		{"unclosed mj-text", "<mjml>\n<mj-body>\n<mj-section><mj-column>\n<mj-text>Hello\n</mj-column></mj-section>\n</mj-body>\n</mjml>", "line 4"},
		{"misplaced end tag", "<mjml>\n<mj-body>\n<mj-section>\n<mj-column>\n</mj-section>\n</mj-column>\n</mj-body>\n</mjml>", "line 5"},
		{"unclosed section", "<mjml>\n<mj-body>\n<mj-section>\n<mj-column><mj-text>x</mj-text></mj-column>\n</mj-body>\n</mjml>", "line 3"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, _, err := b.store.Put(t.Context(), b.tenant, "broken", create("B", "s", tt.content))
			e := wantErr(t, err, "VALIDATION_ERROR")
			msgs := fmt.Sprint(e.Details["fields"].(map[string]any)["content"])
			if !strings.Contains(msgs, tt.want) {
				t.Fatalf("want a message naming %s, got %s", tt.want, msgs)
			}
		})
	}
	// Well-formed MJML with self-closing and ending tags passes.
	b.put(t, b.tenant, "fine", create("F", "s", "<mjml><mj-head><mj-attributes><mj-all font-family=\"Arial\" /></mj-attributes></mj-head><mj-body><mj-section><mj-column><mj-image src=\"https://example.com/a.png\" /><mj-text><p>a</p><br></mj-text><mj-divider /></mj-column></mj-section></mj-body></mjml>"))
}

func TestPartialsIncludeAndLayout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	layout := "<mjml><mj-body><mj-section><mj-column><mj-text>HEADER</mj-text></mj-column></mj-section>{{ content }}{% include 'footer' %}</mj-body></mjml>"
	if _, created, err := b.store.PutPartial(ctx, b.tenant, "base", layout); err != nil || !created {
		t.Fatalf("created %v, %v", created, err)
	}
	if _, _, err := b.store.PutPartial(ctx, b.tenant, "footer", "<mj-section><mj-column><mj-text>Bye {{ contact.firstName }} {% include 'legal' %}</mj-text></mj-column></mj-section>"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.PutPartial(ctx, b.tenant, "legal", "<small>ACME Inc.</small>"); err != nil {
		t.Fatal(err)
	}
	content := "<mj-section><mj-column><mj-text>Body for {{ contact.firstName }}</mj-text></mj-column></mj-section>"
	p := create("News", "News", content)
	p.Layout, p.SetLayout = ptr("base"), true
	tpl := b.put(t, b.tenant, "news", p)
	if tpl.Content != content || !slices.Equal(tpl.RequiredVariables, []string{"contact.firstName"}) {
		t.Fatalf("content %q vars %v", tpl.Content, tpl.RequiredVariables)
	}
	vars := map[string]any{"contact": map[string]any{"firstName": "Ann"}}
	m, err := b.renderer.Preview(ctx, b.tenant, "news", vars, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HEADER", "Body for Ann", "Bye Ann", "ACME Inc."} {
		if !strings.Contains(m.HTML, want) {
			t.Fatalf("missing %q in:\n%s", want, m.HTML)
		}
	}
	if strings.Index(m.HTML, "HEADER") > strings.Index(m.HTML, "Body for") || strings.Index(m.HTML, "Body for") > strings.Index(m.HTML, "Bye") {
		t.Fatal("layout order not kept")
	}
	// A partial change takes effect at the next render, with no new version.
	if _, created, err := b.store.PutPartial(ctx, b.tenant, "legal", "<small>ACME GmbH</small>"); err != nil || created {
		t.Fatalf("update: created %v, %v", created, err)
	}
	m, err = b.renderer.Preview(ctx, b.tenant, "news", vars, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.HTML, "ACME GmbH") || strings.Contains(m.HTML, "ACME Inc.") || m.Version != 1 {
		t.Fatalf("partial change not seen (version %d):\n%s", m.Version, m.HTML)
	}
	// A partial that is used is not deleted; one no one uses is.
	wantErr(t, b.store.DeletePartial(ctx, b.tenant, "legal"), "PARTIAL_REFERENCED")
	wantErr(t, b.store.DeletePartial(ctx, b.tenant, "base"), "PARTIAL_REFERENCED")
	if _, _, err := b.store.PutPartial(ctx, b.tenant, "spare", "<p>x</p>"); err != nil {
		t.Fatal(err)
	}
	if err := b.store.DeletePartial(ctx, b.tenant, "spare"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, b.store.DeletePartial(ctx, b.tenant, "spare"), "NOT_FOUND")
	// Clearing the layout frees it.
	b.put(t, b.tenant, "news", templates.Put{Content: ptr("<mjml><mj-body>" + content + "</mj-body></mjml>"), SetLayout: true})
	if err := b.store.DeletePartial(ctx, b.tenant, "base"); err != nil {
		t.Fatal(err)
	}
}

func TestPartialMissingAndCycles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	// Saved naming a partial that does not exist yet.
	b.put(t, b.tenant, "early", create("Early", "Hi", "<p>Top</p>{% include 'sig' %}"))
	_, err := b.renderer.Preview(ctx, b.tenant, "early", nil, "")
	e := wantErr(t, err, "VALIDATION_ERROR")
	var refused *templates.Refused
	if !errors.As(err, &refused) || refused.Reason != "partial_missing" || !slices.Equal(refused.Names, []string{"sig"}) ||
		!strings.Contains(e.Message, "sig") {
		t.Fatalf("want partial_missing naming sig, got %v", err)
	}
	if got := templates.FailureMessage(err); got != "partial_missing: sig" {
		t.Fatalf("a failed message records %q", got)
	}
	// Once it exists, the next render has it.
	if _, _, err := b.store.PutPartial(ctx, b.tenant, "sig", "<p>Signed {{ who }}</p>"); err != nil {
		t.Fatal(err)
	}
	m, err := b.renderer.Preview(ctx, b.tenant, "early", map[string]any{"who": "Bo"}, "")
	if err != nil || !strings.Contains(m.HTML, "Signed Bo") {
		t.Fatalf("%v\n%s", err, m.HTML)
	}
	// A missing layout too.
	p := create("Lay", "Hi", "<p>in a layout</p>")
	p.Layout, p.SetLayout = ptr("shell"), true
	b.put(t, b.tenant, "lay", p)
	_, err = b.renderer.Preview(ctx, b.tenant, "lay", nil, "")
	if !errors.As(err, &refused) || !slices.Equal(refused.Names, []string{"shell"}) {
		t.Fatalf("want partial_missing naming shell, got %v", err)
	}
	// A layout without {{ content }} is refused when it would be used.
	_, _, err = b.store.PutPartial(ctx, b.tenant, "shell", "<div>no slot</div>")
	wantErr(t, err, "VALIDATION_ERROR")
	if _, _, err := b.store.PutPartial(ctx, b.tenant, "shell", "<div class=\"shell\">{{ content }}</div>"); err != nil {
		t.Fatal(err)
	}
	if m, err := b.renderer.Preview(ctx, b.tenant, "lay", nil, ""); err != nil || !strings.Contains(m.HTML, `<div class="shell"><p>in a layout</p></div>`) {
		t.Fatalf("%v\n%s", err, m.HTML)
	}
	// Cycles, direct and through another partial, are refused.
	_, _, err = b.store.PutPartial(ctx, b.tenant, "self", "<p>{% include 'self' %}</p>")
	wantErr(t, err, "VALIDATION_ERROR")
	if _, _, err := b.store.PutPartial(ctx, b.tenant, "a", "<p>{% include 'b' %}</p>"); err != nil {
		t.Fatal(err)
	}
	_, _, err = b.store.PutPartial(ctx, b.tenant, "b", "<p>{% include 'a' %}</p>")
	if e := wantErr(t, err, "VALIDATION_ERROR"); !strings.Contains(e.Error(), "cycle") {
		t.Fatalf("want a cycle named: %v", e)
	}
	// Depth is bounded: a chain of partials grows one at a time, from its
	// end or from its start, and the one past MaxIncludeDepth is refused.
	for i := range render.MaxIncludeDepth - 1 {
		if _, _, err := b.store.PutPartial(ctx, b.tenant, fmt.Sprintf("d%d", i+1), fmt.Sprintf("<p>{%% include 'd%d' %%}</p>", i+2)); err != nil {
			t.Fatalf("d%d: %v", i+1, err)
		}
	}
	b.put(t, b.tenant, "deep", create("Deep", "s", "<p>{% include 'd1' %}</p>")) // d1 ... d8 (missing): 8 deep
	_, _, err = b.store.PutPartial(ctx, b.tenant, "d0", "<p>{% include 'd1' %}</p>")
	if e := wantErr(t, err, "VALIDATION_ERROR"); !strings.Contains(e.Error(), "deeper than 8") {
		t.Fatalf("a chain deeper than MaxIncludeDepth at its start: %v", e)
	}
	_, _, err = b.store.PutPartial(ctx, b.tenant, "d8", "<p>{% include 'd9' %}</p>")
	if e := wantErr(t, err, "VALIDATION_ERROR"); !strings.Contains(e.Error(), "deeper than 8") {
		t.Fatalf("a chain deeper than MaxIncludeDepth at its end: %v", e)
	}
	if _, _, err := b.store.PutPartial(ctx, b.tenant, "d8", "<p>end</p>"); err != nil {
		t.Fatal(err)
	}
	if m, err := b.renderer.Preview(ctx, b.tenant, "deep", nil, ""); err != nil || !strings.Contains(m.HTML, "end") {
		t.Fatalf("%v", err)
	}
	// An include that does not name a partial.
	_, _, err = b.store.Put(ctx, b.tenant, "badinc", create("X", "s", "<p>{% include footer %}</p>"))
	wantErr(t, err, "VALIDATION_ERROR")
	// MJML and HTML do not mix in a layout.
	if _, _, err := b.store.PutPartial(ctx, b.tenant, "mjbase", "<mjml><mj-body>{{ content }}</mj-body></mjml>"); err != nil {
		t.Fatal(err)
	}
	p = create("Mixed", "s", "<mjml><mj-body></mj-body></mjml>")
	p.Layout, p.SetLayout = ptr("mjbase"), true
	_, _, err = b.store.Put(ctx, b.tenant, "mixed", p)
	wantErr(t, err, "VALIDATION_ERROR")
	// Another tenant does not see the partials.
	other := b.newTenant(t, "org_other")
	_, err = b.store.GetPartial(ctx, other, "sig")
	wantErr(t, err, "NOT_FOUND")
	wantErr(t, b.store.DeletePartial(ctx, other, "sig"), "NOT_FOUND")
	b.put(t, other, "theirs", create("T", "s", "<p>{% include 'sig' %}</p>"))
	if _, err := b.renderer.Preview(ctx, other, "theirs", nil, ""); !errors.As(err, &refused) {
		t.Fatalf("another tenant's partial was used: %v", err)
	}
}

func TestLocales(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.put(t, b.tenant, "hello", create("Hello", "Hello {{ contact.firstName }}", "<p>Hello</p>"))
	if _, created, err := b.store.PutLocale(ctx, b.tenant, "hello", "de", "Hallo {{ contact.firstName }}", "<p>Hallo</p>"); err != nil || !created {
		t.Fatalf("%v %v", created, err)
	}
	l, _, err := b.store.PutLocale(ctx, b.tenant, "hello", "pt-br", "Olá", "<p>Olá</p>")
	if err != nil || l.Locale != "pt-BR" {
		t.Fatalf("the tag is canonical: %q, %v", l.Locale, err)
	}
	for _, bad := range []string{"not a tag", "x", "de_AT!"} {
		_, _, err := b.store.PutLocale(ctx, b.tenant, "hello", bad, "s", "<p>x</p>")
		if e := wantErr(t, err, "VALIDATION_ERROR"); !hasField(e, "locale") {
			t.Fatalf("%q: %v", bad, e)
		}
	}
	_, _, err = b.store.PutLocale(ctx, b.tenant, "nope", "de", "s", "<p>x</p>")
	wantErr(t, err, "TEMPLATE_NOT_FOUND")

	tpl := b.get(t, b.tenant, "hello")
	tests := []struct {
		locale      any
		wantSubject string
		wantLocale  string
	}{
		{"de", "Hallo Ann", "de"},
		{"DE", "Hallo Ann", "de"},
		{"de-AT", "Hallo Ann", "de"},
		{"pt-BR", "Olá", "pt-BR"},
		{"PT-br", "Olá", "pt-BR"},
		{"pt-PT", "Hello Ann", ""},
		{"fr", "Hello Ann", ""},
		{"garbage!", "Hello Ann", ""},
		{42, "Hello Ann", ""},
		{nil, "Hello Ann", ""},
	}
	for _, tt := range tests {
		props := map[string]any{"firstName": "Ann"}
		if tt.locale != nil {
			props["locale"] = tt.locale
		}
		r, err := b.renderer.RenderCurrent(ctx, b.tenant, tpl, render.Context{Contact: &render.Contact{ContactID: "c", Email: "a@example.com", Properties: props}})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if r.Locale != nil {
			got = *r.Locale
		}
		if r.Subject != tt.wantSubject || got != tt.wantLocale {
			t.Fatalf("locale %v: subject %q locale %q, want %q %q", tt.locale, r.Subject, got, tt.wantSubject, tt.wantLocale)
		}
	}
	// Preview takes a locale.
	m, err := b.renderer.Preview(ctx, b.tenant, "hello", nil, "de-CH")
	if err != nil || m.Subject != "Hallo" || m.Locale == nil || *m.Locale != "de" {
		t.Fatalf("%+v %v", m, err)
	}
	_, err = b.renderer.Preview(ctx, b.tenant, "hello", nil, "!!")
	wantErr(t, err, "VALIDATION_ERROR")
	ls, err := b.store.Locales(ctx, b.tenant, "hello")
	if err != nil || len(ls) != 2 || ls[0].Locale != "de" || ls[1].Locale != "pt-BR" {
		t.Fatalf("%v %v", ls, err)
	}
	if err := b.store.DeleteLocale(ctx, b.tenant, "hello", "DE"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, b.store.DeleteLocale(ctx, b.tenant, "hello", "de"), "NOT_FOUND")
	if got := b.get(t, b.tenant, "hello").Locales; !slices.Equal(got, []string{"pt-BR"}) {
		t.Fatalf("locales %v", got)
	}
	// Another tenant cannot see or touch them.
	other := b.newTenant(t, "org_loc_other")
	_, err = b.store.Locales(ctx, other, "hello")
	wantErr(t, err, "TEMPLATE_NOT_FOUND")
	wantErr(t, b.store.DeleteLocale(ctx, other, "hello", "pt-BR"), "TEMPLATE_NOT_FOUND")
	_, _, err = b.store.PutLocale(ctx, other, "hello", "de", "s", "<p>x</p>")
	wantErr(t, err, "TEMPLATE_NOT_FOUND")
}

func TestLocaleUsesTheTemplatesLayout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	if _, _, err := b.store.PutPartial(ctx, b.tenant, "frame", `<div class="frame">{{ content }}</div>`); err != nil {
		t.Fatal(err)
	}
	p := create("F", "s", "<p>en</p>")
	p.Layout, p.SetLayout = ptr("frame"), true
	b.put(t, b.tenant, "framed", p)
	if _, _, err := b.store.PutLocale(ctx, b.tenant, "framed", "fr", "s", "<p>fr</p>"); err != nil {
		t.Fatal(err)
	}
	m, err := b.renderer.Preview(ctx, b.tenant, "framed", nil, "fr")
	if err != nil || !strings.Contains(m.HTML, `<div class="frame"><p>fr</p></div>`) {
		t.Fatalf("%v\n%s", err, m.HTML)
	}
	// A partial change reaches the locale version too.
	if _, _, err := b.store.PutPartial(ctx, b.tenant, "frame", `<div class="frame2">{{ content }}</div>`); err != nil {
		t.Fatal(err)
	}
	m, err = b.renderer.Preview(ctx, b.tenant, "framed", nil, "fr")
	if err != nil || !strings.Contains(m.HTML, `<div class="frame2"><p>fr</p></div>`) {
		t.Fatalf("%v\n%s", err, m.HTML)
	}
}

func TestStrictVariables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	p := create("Reset", "Reset", "<p>{{ contact.firstName }}: {{ resetUrl }}</p>")
	b.put(t, b.tenant, "reset", p)
	contact := &render.Contact{ContactID: "c", Email: "a@example.com", Properties: map[string]any{}}
	r, err := b.renderer.RenderCurrent(ctx, b.tenant, b.get(t, b.tenant, "reset"), render.Context{Contact: contact})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"variable contact.firstName is not set: it renders empty", "variable resetUrl is not set: it renders empty"}
	if !slices.Equal(r.Warnings, want) {
		t.Fatalf("warnings %q", r.Warnings)
	}
	b.put(t, b.tenant, "reset", templates.Put{StrictVariables: ptr(true)})
	tpl := b.get(t, b.tenant, "reset")
	if !tpl.StrictVariables || tpl.CurrentVersion != 1 {
		t.Fatalf("strictVariables is state: %+v", tpl)
	}
	_, err = b.renderer.RenderCurrent(ctx, b.tenant, tpl, render.Context{Contact: contact})
	e := wantErr(t, err, "VALIDATION_ERROR")
	if !strings.Contains(e.Message, "contact.firstName") || !strings.Contains(e.Message, "resetUrl") ||
		templates.FailureMessage(err) != "missing_variables: contact.firstName, resetUrl" {
		t.Fatalf("%v / %s", e, templates.FailureMessage(err))
	}
	contact.Properties["firstName"] = "Ann"
	r, err = b.renderer.RenderCurrent(ctx, b.tenant, tpl, render.Context{Contact: contact, Variables: map[string]any{"resetUrl": "https://x.example/r"}})
	if err != nil || len(r.Warnings) != 0 || r.Warnings == nil {
		t.Fatalf("%v %q", err, r.Warnings)
	}
	// A preview warns and renders anyway.
	m, err := b.renderer.Preview(ctx, b.tenant, "reset", nil, "")
	if err != nil || len(m.Warnings) != 2 {
		t.Fatalf("%v %q", err, m.Warnings)
	}
}
