package render

import (
	"strings"
	"testing"
	"tidings/internal/render/liquid"
	"tidings/internal/render/sanitize"
	"unicode/utf8"
)

// block is a long run of MJML-like literal HTML, long enough to become a
// chunk.
var block = strings.Repeat(`<tr><td align="left" style="font-size:0px;padding:10px 25px;word-break:break-word;"><div style="font-family:Ubuntu, Helvetica, Arial, sans-serif;font-size:13px;line-height:1;">`, 3)

// renderBoth renders src with a skeleton and with the plain template, and
// fails unless the HTML is the same, the text says the same and
// mayNeedSanitize gives the same verdict.
func renderBoth(t *testing.T, src string, vars map[string]any) (withSkeleton rendered) {
	return renderBothText(t, src, vars, plainValues(vars))
}

// renderBothText is renderBoth, comparing the text parts only if
// compareText.
func renderBothText(t *testing.T, src string, vars map[string]any, compareText bool) (withSkeleton rendered) {
	t.Helper()
	// The renderer sanitises a version again when it parses it; compare
	// with the plain template of what it renders.
	src, err := sanitize.Again(src)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRenderer(RendererOptions{})
	p, err := r.parsed(t.Name(), 1, "", src)
	if err != nil {
		t.Fatal(err)
	}
	if p.skel == nil {
		t.Fatalf("no skeleton for %q", src)
	}
	got, err := r.renderHTML(liquid.NewBudget(t.Context(), r.limits), p, vars)
	if err != nil {
		t.Fatal(err)
	}
	full, err := parseLiquid("content", src)
	if err != nil {
		t.Fatal(err)
	}
	plain := &parsed{html: full}
	want, err := r.renderHTML(liquid.NewBudget(t.Context(), r.limits), plain, vars)
	if err != nil {
		t.Fatal(err)
	}
	if got.html != want.html {
		t.Fatalf("skeleton HTML differs:\n%q\nwant\n%q", got.html, want.html)
	}
	if got.sanitize != want.sanitize {
		t.Fatalf("mayNeedSanitize: skeleton %v, whole HTML %v, for %q", got.sanitize, want.sanitize, want.html)
	}
	// The text part must say what converting the rendered HTML says, as
	// long as the values do not bring markup of their own: that the text
	// part treats as part of the value (see valueToText).
	if p.skel.text != nil && compareText {
		wantText := HTMLToText(want.html)
		// Spacing may differ: html2text trims a link's URL, for one.
		if strings.Join(strings.Fields(got.text), "") != strings.Join(strings.Fields(wantText), "") {
			t.Fatalf("skeleton text differs:\n%q\nwant\n%q", got.text, wantText)
		}
	}
	return got
}

// plainValues reports whether all values are words: text without markup,
// character references or URL syntax, which the text part treats as part
// of the value where converting the whole page would not (see valueToText;
// html2text also drops a link whose URL does not parse, and the text part
// does not check URLs made from values: they are only text).
func plainValues(vars map[string]any) bool {
	for _, v := range vars {
		switch v := v.(type) {
		case string:
			if strings.IndexFunc(v, func(r rune) bool {
				return r >= 0x80 || !asciiLetter(byte(r)) && (r < '0' || r > '9') && !strings.ContainsRune(" .,-", r)
			}) >= 0 {
				return false
			}
		case []any:
			for _, x := range v {
				if !plainValues(map[string]any{"": x}) {
					return false
				}
			}
		}
	}
	return true
}

func TestSkeletonMatchesTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc     string
		src      string
		vars     map[string]any
		wantText bool // the skeleton makes the text part
	}{
		{desc: "values in text and href", src: block + `Hi {{ name }} <a href="{{ url }}">go</a>` + block + `{{ name | upcase }}` + block,
			vars: map[string]any{"name": "Ada", "url": "https://x.example"}, wantText: true},
		{desc: "loop with break and else", src: block + `{% for i in items %}` + block + `{{ i }}{% if i == "b" %}{% break %}{% endif %}` + block + `{% else %}none{% endfor %}` + block,
			vars: map[string]any{"items": []any{"a", "b", "c"}}, wantText: true},
		{desc: "empty loop", src: block + `{% for i in items %}` + block + `{{ i }}{% else %}none` + block + `{% endfor %}`, wantText: true},
		{desc: "case, unless and assign", src: `{% assign n = name | default: "you" %}` + block + `{% case tier %}{% when "a" %}` + block + `A {{ n }}{% else %}` + block + `other{% endcase %}{% unless x %}` + block + `{% endunless %}`,
			vars: map[string]any{"tier": "a", "name": "Ada"}, wantText: true},
		{desc: "capture of long markup", src: `{% capture c %}` + block + `{{ name }}</div>{% endcapture %}` + block + `{{ c }}` + block + `{{ c | size }}`,
			vars: map[string]any{"name": "Ada"}, wantText: true},
		{desc: "style sheet with comments", src: "<style>\n/* Header */\n.hdr { color: #333; /* brand */ }\n</style>" + block + `{{ name }}` + block,
			vars: map[string]any{"name": "Ada"}, wantText: true},
		{desc: "comment", src: block + `{% comment %}` + block + `{{ hidden }}{% endcomment %}` + block, wantText: true},
		{desc: "values with markup and references", src: block + `<p>{{ a }}</p>` + block + `<p>{{ b }}</p>` + block,
			vars: map[string]any{"a": "<b>bold</b> &amp; more", "b": "x \xff\xfe\xfd y"}, wantText: true},
		{desc: "markup value", src: block + `<p>{{ a }}</p>` + block, vars: map[string]any{"a": "<ul><li>one</li><li>two</li></ul>"}, wantText: true},
		{desc: "value that needs sanitising", src: block + `<p>{{ a }}</p>` + block,
			vars: map[string]any{"a": `<img src=x onerror=alert(1)>`}, wantText: true},
		{desc: "value that completes a pattern across a chunk edge", src: block + `<a href="java{{ a }}` + block,
			vars: map[string]any{"a": `script:alert(1)">x</a>`}, wantText: true},
		{desc: "whitespace control", src: block + "  \n {{- name -}} \n " + block + " {%- if x -%} " + block + " {%- endif -%}",
			vars: map[string]any{"name": "Ada", "x": true}, wantText: false},
		{desc: "raw", src: block + `{% raw %}` + block + `{{ not }}{% endraw %}` + block, wantText: false},
		{desc: "cycle", src: block + `{% for i in (1..3) %}{% cycle "a", "b" %}` + block + `{% endfor %}`, wantText: false},
		{desc: "tag in an attribute", src: block + `<td class="{% if x %}a{% endif %}">` + block, vars: map[string]any{"x": true}, wantText: false},
		{desc: "href moved past a tag", src: block + `<a href="{{ url }}">{% if x %}A{% else %}B{% endif %}</a>` + block,
			vars: map[string]any{"url": "https://x.example", "x": true}, wantText: false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			r := NewRenderer(RendererOptions{})
			p, err := r.parsed(t.Name(), 1, "", tt.src)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.skel != nil && p.skel.text != nil; got != tt.wantText {
				t.Errorf("skeleton makes text = %v, want %v", got, tt.wantText)
			}
			renderBoth(t, tt.src, tt.vars)
		})
	}
}

func TestSkeletonNotMade(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`<p>{{ short }}</p>{% if x %}y{% endif %}{% cycle "a" %}`, // no long run, no text
		block + `data: is a word mayNeedSanitize stops at` + block + `{{ x }}`,
	} {
		if s := newSkeleton(src); s != nil && len(s.chunks) > 0 {
			t.Errorf("newSkeleton(%.40q...) made %d chunks", src, len(s.chunks))
		}
	}
}

// FuzzSkeleton checks that a skeleton renders what the template renders,
// and that mayNeedSanitize on what it reads of the chunks says what it says
// on the whole HTML, whatever the literal HTML and the values.
//
//	go test -run '^$' -fuzz FuzzSkeleton -fuzztime 60s ./render/
func FuzzSkeleton(f *testing.F) {
	f.Add(`<td style="padding:0">x</td>`, "Ada")
	f.Add(`<a href="`, `javascript:alert(1)`)
	f.Add(`<img src=x `, `onerror=alert(1)>`)
	f.Add(`</div><`, `script>`)
	f.Add(`<p>java`, `script:`)
	f.Add(`=`, `on`)
	f.Add(`<div title="x">&#`, `106;`)
	f.Fuzz(func(t *testing.T, filler, value string) {
		// MJML writes UTF-8; Liquid delimiters would change the template.
		if filler == "" || !utf8.ValidString(filler) || strings.ContainsAny(filler, "{%") {
			return
		}
		lit := strings.Repeat(filler, minChunk/len(filler)+2)
		src := lit + `{{ v }}` + lit + `<a href="{{ v }}">{{ v }}</a>` + lit + `{% if v %}` + lit + `{{ v }}{% endif %}` + lit
		src, err := sanitize.Again(src)
		if err != nil {
			return // Prepare would have refused the template
		}
		if _, err := parseLiquid("content", src); err != nil {
			return // sanitising broke the Liquid: Prepare would refuse it
		}
		s := newSkeleton(src)
		if s == nil {
			return // the filler alone needs sanitising
		}
		// A value can finish a character reference the literal HTML
		// began ("&#" and "106;"), which only the whole page shows.
		vars := map[string]any{"v": value}
		renderBothText(t, src, vars, plainValues(vars) && !strings.Contains(filler, "&"))
	})
}

func asciiLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
