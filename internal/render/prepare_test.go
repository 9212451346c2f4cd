package render

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"tidings/internal/render/sanitize"
)

func TestPrepareMJML(t *testing.T) {
	t.Parallel()
	content := newsletterMJML(t)
	p, err := Prepare(context.Background(), testPool(t), "{{ issue.title }} for {{ contact.properties.firstName | default: 'you' }}", content)
	if err != nil {
		t.Fatal(err)
	}
	if p.StoredContent != content || p.Sanitized {
		t.Error("clean content was not stored as given")
	}
	if !strings.HasPrefix(p.CompiledHTML, "<!doctype html>") {
		t.Errorf("compiled HTML starts %q", p.CompiledHTML[:40])
	}
	want := []string{
		"account.lastLoginDate", "account.resetExpiresHours", "contact.contactId", "contact.email",
		"contact.properties.city", "contact.properties.discount", "contact.properties.firstName",
		"contact.properties.homeStore", "contact.properties.memberSince", "contact.properties.tier",
		"events", "issue.date", "issue.number", "issue.slug", "issue.title", "items",
		"perks.earlyAccessDate", "perks.pointsToNextTier", "referralUrl", "resetUrl",
		"unsubscribeUrl", "webVersionUrl",
	}
	if !slices.Equal(p.RequiredVariables, want) {
		t.Errorf("RequiredVariables =\n%q\nwant\n%q", p.RequiredVariables, want)
	}
}

func TestPrepareRawHTML(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		content string
	}{
		{"fragment", `<p>Hello {{ name }}, <a href="{{ resetUrl }}">reset</a>.</p>`},
		{"table layout with conditional comments", `<table role="presentation" width="100%"><tr><td style="padding:10px">{% for i in items %}<p>{{ i.name }}</p>{% endfor %}</td></tr></table><!--[if mso]><p>Outlook</p><![endif]-->`},
		{"leading white space but not MJML", "\n  <div>{{ name }}</div>"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			p, err := Prepare(context.Background(), testPool(t), "Hi", tt.content)
			if err != nil {
				t.Fatal(err)
			}
			if p.StoredContent != WrapHTML(tt.content) {
				t.Errorf("stored %q, want the content wrapped in MJML as given", p.StoredContent)
			}
			// MJML keeps mj-raw content verbatim inside its body.
			if !strings.Contains(p.CompiledHTML, strings.TrimSpace(tt.content)) {
				t.Errorf("compiled HTML lacks the raw HTML:\n%s", p.CompiledHTML)
			}
		})
	}
}

// A whole document is stored and compiled as given (ADDENDUM 24 amends
// section 5): wrapped in MJML it would sit inside MJML's own document.
func TestPrepareWholeDocument(t *testing.T) {
	t.Parallel()
	for _, content := range []string{
		"<!DOCTYPE html>\n<html><head><style>p { color: #333; }</style></head><body><p>Hi {{ name }}</p></body></html>",
		"\n <HTML lang=\"en\"><body><p>Hi</p></body></HTML>",
	} {
		p, err := Prepare(context.Background(), testPool(t), "Hi", content)
		if err != nil {
			t.Fatal(err)
		}
		if p.StoredContent != content || p.CompiledHTML != content {
			t.Errorf("stored %q compiled %q, want both as given", p.StoredContent, p.CompiledHTML)
		}
	}
	if IsDocument("<htmlx>") || IsDocument("<p><html>") || !IsDocument("\ufeff<!doctype html>") {
		t.Error("IsDocument")
	}
}

func TestPrepareSanitizes(t *testing.T) {
	t.Parallel()
	content := `<mjml><mj-body><mj-section><mj-column><mj-text>Hi <a href="javascript:alert(1)" onclick="x()">there</a><script>alert(1)</script></mj-text></mj-column></mj-section></mj-body></mjml>`
	p, err := Prepare(context.Background(), testPool(t), "Hi", content)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Sanitized || p.StoredContent != `<mjml><mj-body><mj-section><mj-column><mj-text>Hi <a  >there</a></mj-text></mj-column></mj-section></mj-body></mjml>` {
		t.Errorf("stored %q (sanitized=%v)", p.StoredContent, p.Sanitized)
	}
	if d := sanitize.Judge(p.CompiledHTML, sanitize.Mode{Liquid: true}); d != "" {
		t.Errorf("compiled HTML has %s", d)
	}
}

func TestPrepareRejects(t *testing.T) {
	t.Parallel()
	section := func(inner string) string {
		return `<mjml><mj-body><mj-section><mj-column>` + inner + `</mj-column></mj-section></mj-body></mjml>`
	}
	tests := []struct {
		desc      string
		subject   string
		content   string
		wantField string
		wantMsg   string
		wantMJML  bool
	}{
		{desc: "unclosed block in subject", subject: "Hi {% if x %}", content: "<p>x</p>", wantField: "subject", wantMsg: `unterminated "if" block`},
		{desc: "bad expression in subject", subject: "Hi {{ name | }}", content: "<p>x</p>", wantField: "subject", wantMsg: "syntax error"},
		{desc: "unterminated output in subject", subject: "Hi {{ name ", content: "<p>x</p>", wantField: "subject", wantMsg: `output "{{ name " was not properly terminated`},
		{desc: "unterminated output in content", subject: "Hi", content: "<p>ok {{ a }}</p>\n<p>{{ x </p>", wantField: "content", wantMsg: `line 2: output "{{ x </p>" was not properly terminated`},
		{desc: "output closed by one brace", subject: "Hi", content: "<p>{{ x }</p><p>{{ y }}</p>", wantField: "content", wantMsg: "syntax error"},
		{desc: "unterminated tag", subject: "Hi", content: "<p>{% if x </p>", wantField: "content", wantMsg: `tag "{% if x </p>" was not properly terminated`},
		{desc: "empty tag", subject: "Hi", content: "<p>{%  %}</p>", wantField: "content", wantMsg: `tag "{%  %}</p>" was not properly terminated`},
		{desc: "raw never closed", subject: "Hi", content: "<p>{% raw %}{{ x</p>", wantField: "content", wantMsg: "'raw' tag was never closed"},
		{desc: "unknown tag in content", subject: "Hi", content: "<p>\n{% frobnicate %}</p>", wantField: "content", wantMsg: `line 2: undefined tag "frobnicate"`},
		{desc: "include is not available", subject: "Hi", content: `{% include "secrets.txt" %}`, wantField: "content", wantMsg: `undefined tag "include"`},
		{desc: "unknown filter in content", subject: "Hi", content: "<p>{{ name | shout }}</p>", wantField: "content", wantMsg: `undefined filter "shout"`},
		{desc: "unknown filter in subject", subject: "{{ name | shout }}", content: "<p>x</p>", wantField: "subject", wantMsg: `undefined filter "shout"`},
		{desc: "unknown mj element", subject: "Hi", content: section(`<mj-foo>x</mj-foo>`), wantField: "content", wantMsg: "line 1: mj-foo: Element mj-foo doesn't exist or is not registered", wantMJML: true},
		{desc: "illegal attribute", subject: "Hi", content: section(`<mj-text foo="bar">x</mj-text>`), wantField: "content", wantMsg: "Attribute foo is illegal", wantMJML: true},
		{desc: "wrong nesting", subject: "Hi", content: `<mjml><mj-body><mj-text>x</mj-text></mj-body></mjml>`, wantField: "content", wantMsg: "mj-text cannot be used inside mj-body", wantMJML: true},
		{desc: "mjml without body", subject: "Hi", content: `<mjml><mj-section></mj-section></mjml>`, wantField: "content", wantMJML: true},
		{desc: "liquid dropped between sections", subject: "Hi", content: `<mjml><mj-body>{% for i in items %}<mj-section><mj-column><mj-text>{{ i }}</mj-text></mj-column></mj-section>{% endfor %}</mj-body></mjml>`, wantField: "content", wantMsg: "MJML dropped the Liquid {% for i in items %}"},
		{desc: "liquid output dropped between sections", subject: "Hi", content: `<mjml><mj-body>{{ greeting }}<mj-section><mj-column><mj-text>{{ name }}</mj-text></mj-column></mj-section></mj-body></mjml>`, wantField: "content", wantMsg: "MJML dropped the Liquid {{ greeting }}"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			_, err := Prepare(context.Background(), testPool(t), tt.subject, tt.content)
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("err = %v, want *ValidationError", err)
			}
			if verr.Field != tt.wantField || !strings.Contains(strings.Join(verr.Messages, "\n"), tt.wantMsg) {
				t.Errorf("error = %q on %q, want %q on %q", verr.Messages, verr.Field, tt.wantMsg, tt.wantField)
			}
			if tt.wantMJML != (len(verr.MJML) > 0) {
				t.Errorf("MJML messages = %+v", verr.MJML)
			}
		})
	}
}

type failingCompiler struct{ err error }

func (c failingCompiler) Compile(context.Context, string) (string, error) { return "", c.err }

func TestPrepareCompilerFailureIsNotValidation(t *testing.T) {
	t.Parallel()
	down := errors.New("worker exited")
	_, err := Prepare(context.Background(), failingCompiler{down}, "Hi", "<p>x</p>")
	var verr *ValidationError
	if errors.As(err, &verr) || !errors.Is(err, down) {
		t.Fatalf("err = %v, want the compiler's error, not a validation error", err)
	}
}

func TestWrapHTMLKeepsContentInsideMJRaw(t *testing.T) {
	t.Parallel()
	got := WrapHTML(`<p>a</p></mj-raw><mj-section><mj-text>INJ</mj-text></mj-section></MJ-RAW ><mj-raw>`)
	if n := strings.Count(strings.ToLower(got), "</mj-raw"); n != 1 {
		t.Fatalf("%d mj-raw end tags in %s", n, got)
	}
}

func TestPrepareSanitisesMJMLSource(t *testing.T) {
	t.Parallel()
	src := `<mjml><mj-head><mj-style>.c{background:url(javascript:alert(1))}</mj-style>` +
		`<mj-html-attributes><mj-selector path=".c a"><mj-html-attribute name="onclick">alert(2)</mj-html-attribute></mj-selector></mj-html-attributes></mj-head>` +
		`<mj-body><mj-section background-url="javascript:alert(3)"><mj-column><mj-text css-class="c"><a href="https://x">x</a></mj-text></mj-column></mj-section></mj-body></mjml>`
	p, err := Prepare(context.Background(), testPool(t), "Hi", src)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Sanitized {
		t.Fatal("nothing was stripped")
	}
	for _, out := range []string{p.StoredContent, p.CompiledHTML} {
		if strings.Contains(out, "alert(") {
			t.Errorf("script survived:\n%s", out)
		}
	}
}

func TestSanitizeMJMLTextSurvivesOtherEndTags(t *testing.T) {
	t.Parallel()
	got, changed := sanitize.MJML(`<mj-html-attribute name="onclick"></b>alert(1)</mj-html-attribute>`)
	if !changed || strings.Contains(got, "alert") {
		t.Fatalf("sanitize.MJML kept the handler: %q", got)
	}
}
