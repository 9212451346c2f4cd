package render

import (
	"testing"

	"tidings/internal/render/liquid"
)

func TestHTMLToText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		html string
		want string
	}{
		{"paragraphs and links", `<p>Hello <b>Ada</b>,</p><p>please <a href="https://x.example/r?a=1&amp;b=2">reset</a> it.</p>`,
			"Hello Ada,\n\nplease reset <https://x.example/r?a=1&b=2> it."},
		{"head, style and comments go", `<html><head><title>T</title><style>p{color:red}</style></head><body><!--[if mso]>Outlook only<![endif]--><p>Body</p></body></html>`,
			"Body"},
		{"layout blocks end lines", `<table><tr><td>One</td></tr><tr><td>Two</td></tr></table><div>Three</div><div>Four</div>`,
			"One\nTwo\n\nThree\nFour"},
		{"lists", `<ul><li>a</li><li>b</li></ul>`, "- a\n- b"},
		{"entities and spaces", "<p>Tom&#39;s&nbsp;&nbsp;shop   &amp;\n\n\n  more</p>", "Tom's shop & more"},
		{"unsafe link dropped", `<a href="javascript:alert(1)">x</a>`, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			if got := HTMLToText(tt.html); got != tt.want {
				t.Errorf("HTMLToText = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTidyText(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"  a  b \t c  ", "a b c"},
		{"a\n\n\n\nb", "a\n\nb"},
		{"a \n  \n b", "a\n\nb"},
		{"\n\na\n", "a"},
		{"a\u00a0\u00a0b\n\u00a0\nc", "a b\n\nc"},
		{"é  ü", "é ü"},
		{"reset <> now", "reset now"},
		{"reset <  >\n\nnext", "reset\n\nnext"},
		{"a < b <c> ©  d", "a < b <c> © d"},
		{"line one\nline two\n\npara", "line one\nline two\n\npara"},
	}
	for _, tt := range tests {
		if got := tidyText(tt.in); got != tt.want {
			t.Errorf("tidyText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTextTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc   string
		html   string
		vars   map[string]any
		want   string
		wantOK bool
	}{
		{desc: "values, loops and links", html: `<p>Hi {{ name }}</p>{% for i in items %}<div>{{ i.n }} <a href="{{ i.u }}">buy</a></div>{% endfor %}`,
			vars: map[string]any{"name": "Ada", "items": []any{map[string]any{"n": "Pack", "u": "https://x/p"}}},
			want: "Hi Ada\n\nPack buy <https://x/p>", wantOK: true},
		{desc: "values are converted as the page would be", html: `<p>{{ a | escape }}</p>`, vars: map[string]any{"a": `1 < 2 & "q"`},
			want: `1 < 2 & "q"`, wantOK: true},
		{desc: "tag in head is lost", html: `<head><title>{% if x %}T{% endif %}</title></head><p>x</p>`, wantOK: false},
		{desc: "template using the placeholder character", html: "<p>\ue000{{ a }}</p>", wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			tmpl, ok := textTemplate(tt.html)
			if ok != tt.wantOK {
				t.Fatalf("textTemplate ok = %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			r := NewRenderer(RendererOptions{})
			b := liquid.NewBudget(t.Context(), r.limits)
			defer b.Release()
			got, err := r.render(b, tmpl, b.Bind(tt.vars))
			if err != nil {
				t.Fatal(err)
			}
			if got = tidyText(got); got != tt.want {
				t.Errorf("text = %q, want %q", got, tt.want)
			}
		})
	}
}
