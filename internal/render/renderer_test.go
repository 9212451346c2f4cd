package render

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"tidings/internal/render/liquid"
	"tidings/internal/render/sanitize"
	"time"
)

func TestRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc        string
		subject     string
		html        string
		vars        map[string]any
		wantSubject string
		wantHTML    string
		wantText    string
	}{
		{
			desc:    "with variables",
			subject: "Hi {{ contact.firstName }}",
			html:    `<p>Hello {{ contact.properties.firstName | upcase }}, <a href="{{ resetUrl }}">reset</a></p>`,
			vars: Context{
				Variables: map[string]any{"resetUrl": "https://x.example/r"},
				Contact:   &Contact{Properties: map[string]any{"firstName": "Ada"}},
			}.Bindings(),
			wantSubject: "Hi Ada",
			wantHTML:    `<p>Hello ADA, <a href="https://x.example/r">reset</a></p>`,
			wantText:    "Hello ADA, reset <https://x.example/r>",
		},
		{
			desc:    "event and contact aliases",
			subject: "{{ event.name }} on {{ event.timestamp | date: '%Y-%m-%d' }}",
			html:    `<p>{{ contact.plan }} {{ event.properties.amount }} {% if contact.userId %}user{% else %}anonymous{% endif %}</p>`,
			vars: Context{
				Contact: &Contact{Email: "a@example.com", Properties: map[string]any{"plan": "pro"}},
				Event:   &Event{Name: "purchase", Properties: map[string]any{"amount": 42.5}, Timestamp: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)},
			}.Bindings(),
			wantSubject: "purchase on 2026-11-21",
			wantHTML:    `<p>pro 42.5 anonymous</p>`,
			wantText:    "pro 42.5 anonymous",
		},
		{
			desc:    "preview uses the contact given",
			subject: "Hi {{ contact.firstName }}",
			html:    `<p>{{ contact.email }} {{ unsubscribeUrl }}</p>`,
			vars: BindingsForPreview(map[string]any{
				"contact":        map[string]any{"email": "p@example.com", "properties": map[string]any{"firstName": "Pia"}},
				"unsubscribeUrl": "https://preview/u",
			}),
			wantSubject: "Hi Pia",
			wantHTML:    `<p>p@example.com https://preview/u</p>`,
			wantText:    "p@example.com https://preview/u",
		},
		{
			desc:        "missing variables render empty",
			subject:     "Hi {{ contact.firstName }}!",
			html:        `<p>Hello {{ name }}{{ a.b.c }}, {% for i in items %}{{ i }}{% endfor %}<a href="{{ resetUrl }}">reset</a></p>`,
			vars:        nil,
			wantSubject: "Hi !",
			wantHTML:    `<p>Hello , <a href="">reset</a></p>`,
			wantText:    "Hello , reset",
		},
		{
			desc:        "subject stays on one line",
			subject:     "Order {{ id }}",
			html:        `<p>x</p>`,
			vars:        map[string]any{"id": "42\r\nBcc: victim@example.com"},
			wantSubject: "Order 42 Bcc: victim@example.com",
			wantHTML:    `<p>x</p>`,
			wantText:    "x",
		},
		{
			desc:        "markup in values is sanitised",
			subject:     "{{ name }}",
			html:        `<p>Hi {{ name }}</p><a href="{{ link }}">go</a>`,
			vars:        map[string]any{"name": `<b>Ada</b><script>steal()</script><img src=x onerror=alert(1)>`, "link": " JaVaScRiPt:alert(1)"},
			wantSubject: `<b>Ada</b><script>steal()</script><img src=x onerror=alert(1)>`,
			wantHTML:    `<p>Hi <b>Ada</b><img src=x ></p><a >go</a>`,
			wantText:    "Hi Ada\n\ngo",
		},
		{
			desc:     "liquid cannot assemble a script element",
			html:     `<{{ t }}>alert(1)</{{ t }}><a {{ h }}="x()">y</a>`,
			vars:     map[string]any{"t": "script", "h": "onclick"},
			wantHTML: `<a >y</a>`,
			wantText: "y",
		},
		{
			desc:     "markup value",
			html:     `<div>Items:</div>{{ list }}<p>end</p>`,
			vars:     map[string]any{"list": "<ul><li>one</li><li>two &amp; three</li></ul>"},
			wantHTML: `<div>Items:</div><ul><li>one</li><li>two &amp; three</li></ul><p>end</p>`,
			wantText: "Items:\n\n- one\n- two & three\n\nend",
		},
		{
			desc:     "escape filter",
			html:     `<p>{{ note | escape }}</p>`,
			vars:     map[string]any{"note": `5 < 6 & "quotes"`},
			wantHTML: `<p>5 &lt; 6 &amp; &#34;quotes&#34;</p>`,
			wantText: `5 < 6 & "quotes"`,
		},
	}
	r := NewRenderer(RendererOptions{})
	for i, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			m, err := r.Render(t.Context(), "test", i, tt.subject, tt.html, tt.vars)
			if err != nil {
				t.Fatal(err)
			}
			if m.Subject != tt.wantSubject {
				t.Errorf("subject = %q, want %q", m.Subject, tt.wantSubject)
			}
			if m.HTML != tt.wantHTML {
				t.Errorf("html = %q, want %q", m.HTML, tt.wantHTML)
			}
			if m.Text != tt.wantText {
				t.Errorf("text = %q, want %q", m.Text, tt.wantText)
			}
			if d := sanitize.Judge(m.HTML, sanitize.Mode{Liquid: true}); d != "" {
				t.Errorf("rendered HTML has %s", d)
			}
		})
	}
}

// prepareNewsletter compiles the newsletter with the shared pool.
func prepareNewsletter(t testing.TB) *Prepared {
	t.Helper()
	p, err := Prepare(context.Background(), testPool(t), "{{ issue.title }}, {{ contact.firstName }}", newsletterMJML(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRenderNewsletter(t *testing.T) {
	t.Parallel()
	p := prepareNewsletter(t)
	r := NewRenderer(RendererOptions{})
	subject := "{{ issue.title }}, {{ contact.firstName }}"
	m, err := r.Render(t.Context(), "ten_1/newsletter", 1, subject, p.CompiledHTML, newsletterVars())
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "November dispatch, Ada" {
		t.Errorf("subject = %q", m.Subject)
	}
	for _, want := range []string{
		"Hi Ada, the ridges are calling", "Ridgeline 45 pack", "Talus boots", "$245.00",
		`href="https://northwind.example/reset?token=abc123"`, `href="https://t.example/t/u/tok123"`,
		"Trail member benefits", "Winter layering clinic", "Seattle", "Portland",
	} {
		if !strings.Contains(m.HTML, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, want := range []string{
		"Hi Ada, the ridges are calling", "Ridgeline 45 pack", "Reset your password <https://northwind.example/reset?token=abc123>",
		"Unsubscribe <https://t.example/t/u/tok123>", "- Free shipping on orders over $50",
	} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("text lacks %q", want)
		}
	}
	// The text comes from a text template made once per version; it must
	// say what converting this rendered HTML says.
	if got, want := strings.Fields(m.Text), strings.Fields(HTMLToText(m.HTML)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("text part differs from the rendered HTML converted:\n%s\n---\n%s", m.Text, HTMLToText(m.HTML))
	}
	if pp, _ := r.cache.Get(cacheKey{"ten_1/newsletter", 1}); pp == nil || pp.skel == nil || pp.skel.text == nil {
		t.Error("the newsletter's skeleton does not make the text part; every send would do more work")
	}
}

func TestRenderParsesOncePerVersion(t *testing.T) {
	t.Parallel()
	r := NewRenderer(RendererOptions{})
	render := func(version int, html string) *parsed {
		t.Helper()
		if _, err := r.Render(t.Context(), "k", version, "s", html, nil); err != nil {
			t.Fatal(err)
		}
		p, _ := r.cache.Get(cacheKey{"k", version})
		return p
	}
	first := render(1, "<p>{{ a }}</p>")
	if again := render(1, "<p>{{ a }}</p>"); again != first {
		t.Error("same version parsed twice")
	}
	if v2 := render(2, "<p>{{ b }}</p>"); v2 == first {
		t.Error("new version not parsed")
	}
	// A version whose sources differ from the cached ones is parsed anew.
	m, err := r.Render(t.Context(), "k", 1, "s", "<p>changed {{ a }}</p>", map[string]any{"a": 1})
	if err != nil || m.HTML != "<p>changed 1</p>" {
		t.Errorf("render with changed source = %q, %v", m.HTML, err)
	}
}

// nestedLoops and doubling are the templates of issue 11, as package
// liquid's budget tests have them: three nested loops over ranges (161
// bytes, 57 s before there were limits), and 27 doublings of a two-byte
// string (256 MiB).
const nestedLoops = `{% for a in (1..100000) %}{% for b in (1..100000) %}{% for c in (1..100000) %}{{ a }}{{ b }}{{ c }}{% endfor %}{% endfor %}{% endfor %}` +
	`{{ "done" | upcase }}`

var doubling = `<p>{% assign s = "ab" %}` + strings.Repeat(`{% assign s = s | append: s %}`, 27) + `{{ s | size }}</p>`

// A limit a render runs into names the part of the message that ran into
// it (the budget itself does not know which), with the Renderer's options
// as the limits.
func TestRenderLimitNamesTheField(t *testing.T) {
	t.Parallel()
	// Without the time limit, which a loaded machine (or -race) could
	// reach before the limit a case is about.
	untimed := RendererOptions{MaxRenderTime: time.Hour}
	small := RendererOptions{MaxStringBytes: 8 << 20, MaxOutput: 8 << 20, MaxRenderTime: time.Hour}
	unlimited := RendererOptions{MaxLoopIterations: math.MaxInt, MaxStringBytes: math.MaxInt, MaxOutput: math.MaxInt,
		MaxRenderTime: 20 * time.Millisecond}
	forever := `{% for a in (1..1000000000) %}{% for b in (1..1000000000) %}{% endfor %}{% endfor %}`
	tests := []struct {
		desc          string
		opts          RendererOptions
		subject, html string
		field, limit  string
		max           int64
	}{
		{"nested loops in the subject", untimed, nestedLoops, "<p>x</p>", "subject", liquid.LimitLoopIterations, liquid.DefaultMaxLoopIterations},
		{"doubling in the content", untimed, "s", doubling, "content", liquid.LimitStringBytes, liquid.DefaultMaxStringBytes},
		{"filters in the content", small, "s", `{% for i in (1..50) %}{{ big | append: big | size }}{% endfor %}`, "content", liquid.LimitStringBytes, 8 << 20},
		{"output of the content", small, "s", `{% for i in (1..50) %}{{ big }}{% endfor %}`, "content", liquid.LimitOutputBytes, 8 << 20},
		{"loop in the content", small, "s", `{% for i in (1..1000000000) %}{% endfor %}`, "content", liquid.LimitLoopIterations, liquid.DefaultMaxLoopIterations},
		{"time of the subject", unlimited, forever, "<p>x</p>", "subject", liquid.LimitRenderTime, int64(20 * time.Millisecond)},
	}
	big := strings.Repeat("x", 1<<20) // 1 MiB, a caller's variable
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			_, err := NewRenderer(tt.opts).Render(t.Context(), "k", 1, tt.subject, tt.html, map[string]any{"big": big})
			var limit *liquid.LimitError
			if !errors.As(err, &limit) || !errors.Is(err, liquid.ErrBudget) {
				t.Fatalf("err = %v, want a *liquid.LimitError", err)
			}
			if limit.Field != tt.field || limit.Limit != tt.limit || limit.Max != tt.max {
				t.Errorf("limit = %+v, want the %s limit (%d) on %s", limit, tt.limit, tt.max, tt.field)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	r := NewRenderer(RendererOptions{MaxOutput: 1000})
	if _, err := r.Render(t.Context(), "big", 1, "s", `{% for i in (1..1000) %}0123456789{% endfor %}`, nil); !errors.Is(err, liquid.ErrTooLarge) {
		t.Errorf("runaway loop: err = %v, want ErrTooLarge", err)
	}
	var verr *ValidationError
	if _, err := r.Render(t.Context(), "bad", 1, "s", `{% if %}`, nil); !errors.As(err, &verr) {
		t.Errorf("bad template: err = %v, want *ValidationError", err)
	}
	// The parse error is cached with the version, like a parsed template.
	if _, err := r.Render(t.Context(), "bad", 1, "s", `{% if %}`, nil); !errors.As(err, &verr) {
		t.Errorf("bad template again: err = %v", err)
	}
}

func TestRenderTextWithoutTemplate(t *testing.T) {
	t.Parallel()
	// A Liquid tag in an attribute other than href does not survive the
	// conversion to text, so this version's text is made from each HTML.
	r := NewRenderer(RendererOptions{})
	html := `<p class="{% if vip %}vip{% endif %}">Hi {{ name }}</p><p>Bye</p>`
	m, err := r.Render(t.Context(), "t", 1, "s", html, map[string]any{"name": "Ada", "vip": true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Text != "Hi Ada\n\nBye" {
		t.Errorf("text = %q", m.Text)
	}
	if p, _ := r.cache.Get(cacheKey{"t", 1}); p.text != nil {
		t.Error("text template made despite a tag inside an attribute")
	}
}

func TestRenderConcurrent(t *testing.T) {
	t.Parallel()
	p := prepareNewsletter(t)
	r := NewRenderer(RendererOptions{CacheSize: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				version := (g + i) % 3 // three versions in a cache of two: evictions too
				vars := newsletterVars()
				name := fmt.Sprintf("Reader%d-%d", g, i)
				vars["contact"].(map[string]any)["firstName"] = name
				m, err := r.Render(t.Context(), "ten/nl", version, "{{ contact.firstName }}", p.CompiledHTML, vars)
				switch {
				case err != nil:
					errs <- err
				case m.Subject != name || !strings.Contains(m.Text, "Talus boots"):
					errs <- fmt.Errorf("goroutine %d got subject %q", g, m.Subject)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestLiquidSurvivesMJML renders what MJML made of Liquid in text, attributes,
// loops, tables, raw blocks and Outlook conditional comments.
func TestLiquidSurvivesMJML(t *testing.T) {
	t.Parallel()
	content := `<mjml>
<mj-head><mj-title>{{ subject }}</mj-title><mj-preview>Hi {{ name }}</mj-preview></mj-head>
<mj-body>
<mj-section><mj-column>
<mj-text>Hello {{ name | default: "friend" }} &amp; {% if vip %}VIP{% else %}member{% endif %} {% if count > 2 and count < 10 %}some{% endif %}</mj-text>
<mj-text><a href="{{ resetUrl }}?src=email&amp;a=1">reset</a> <a href='{{ url | append: "?x=1" }}'>appended</a></mj-text>
<mj-button href="{{ resetUrl }}">Reset</mj-button>
<mj-image src="{{ image }}" alt="{{ name }}" href="{{ url }}" />
<mj-table>{% for row in rows %}<tr><td>{{ row.a }}</td><td>{{ forloop.index }}</td></tr>{% endfor %}</mj-table>
<mj-raw><!--[if mso]><v:roundrect href="{{ resetUrl }}"><center>Reset</center></v:roundrect><![endif]--></mj-raw>
</mj-column></mj-section>
<mj-raw>{% for s in sections %}</mj-raw>
<mj-section><mj-column><mj-text>Section {{ s }}</mj-text></mj-column></mj-section>
<mj-raw>{% endfor %}</mj-raw>
</mj-body></mjml>`
	p, err := Prepare(context.Background(), testPool(t), "{{ subject }}", content)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{
		"subject": "Your reset", "name": "Ada", "vip": true, "count": 5,
		"resetUrl": "https://x.example/reset", "url": "https://x.example/p", "image": "https://cdn.example/i.png",
		"rows": []any{map[string]any{"a": "r1"}, map[string]any{"a": "r2"}}, "sections": []any{"one", "two"},
	}
	m, err := NewRenderer(RendererOptions{}).Render(t.Context(), "t", 1, "{{ subject }}", p.CompiledHTML, vars)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<title>Your reset</title>", "Hi Ada", "Hello Ada &amp; VIP some",
		`href="https://x.example/reset?src=email&amp;a=1"`, `href='https://x.example/p?x=1'`,
		`href="https://x.example/reset"`, `src="https://cdn.example/i.png"`, `alt="Ada"`, `href="https://x.example/p"`,
		"<td>r1</td><td>1</td>", "<td>r2</td><td>2</td>",
		`<v:roundrect href="https://x.example/reset">`, "Section one", "Section two",
	} {
		if !strings.Contains(m.HTML, want) {
			t.Errorf("rendered HTML lacks %q", want)
		}
	}
	if strings.Contains(m.HTML, "{{") || strings.Contains(m.HTML, "{%") {
		t.Error("Liquid left in the rendered HTML")
	}
	for _, want := range []string{"Hello Ada & VIP some", "reset <https://x.example/reset?src=email&a=1>", "Section two"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, m.Text)
		}
	}
}

func TestRenderTextWithWhitespaceControl(t *testing.T) {
	t.Parallel()
	// Whitespace control ({%- -%}) would trim the line breaks between
	// blocks out of a text template, so such a version's text is derived
	// from each rendered HTML.
	r := NewRenderer(RendererOptions{})
	html := "<h1>Hi {{ name }}</h1>\n{%- for i in items -%}\n<p>{{ i }}</p>\n{%- endfor -%}\n<p>Bye</p>"
	vars := map[string]any{"name": "Ada", "items": []any{"one", "two"}}
	m, err := r.Render(t.Context(), "t", 1, "s", html, vars)
	if err != nil {
		t.Fatal(err)
	}
	if want := HTMLToText(m.HTML); m.Text != want {
		t.Errorf("text = %q, want %q", m.Text, want)
	}
}

func TestRenderTextFromTextTemplate(t *testing.T) {
	t.Parallel()
	// A tag that writes output (cycle) keeps the skeleton from making the
	// text, so this version's text part comes from its text template, which
	// must read as the text derived from the rendered HTML does.
	r := NewRenderer(RendererOptions{})
	html := `<h1>Hi {{ name }}</h1>{% for i in items %}<p>{% cycle "odd", "even" %} {{ i }}</p>{% endfor %}<p>Bye</p>`
	vars := map[string]any{"name": "Ada", "items": []any{"one", "two"}}
	m, err := r.Render(t.Context(), "t", 1, "s", html, vars)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := r.cache.Get(cacheKey{"t", 1})
	if p.text == nil || (p.skel != nil && p.skel.text != nil) {
		t.Fatalf("this version should take the text-template path (text %v, skeleton %v)", p.text != nil, p.skel != nil)
	}
	if want := HTMLToText(m.HTML); m.Text != want {
		t.Errorf("text = %q, want %q", m.Text, want)
	}
}
