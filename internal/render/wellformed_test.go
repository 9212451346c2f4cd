package render

import (
	"strings"
	"testing"
)

func TestWellFormed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, src string
		want      []string // substrings of the messages, in order; none: well formed
	}{
		{"well formed", `<mjml><mj-head><mj-attributes><mj-all padding="0" /></mj-attributes><mj-style>.a > b { color: red }</mj-style></mj-head>` +
			`<mj-body><mj-section><mj-column><mj-image src="a.png" /><mj-text><p>a<br>b</mj-text><mj-button href="{{ u }}">Go</mj-button></mj-column></mj-section></mj-body></mjml>`, nil},
		{"fragment", `<mj-section><mj-column><mj-text>x</mj-text></mj-column></mj-section>`, nil},
		{"quoted >", `<mj-section css-class="a>b"><mj-column></mj-column></mj-section>`, nil},
		{"comment", "<!-- <mj-text> -->\n<mj-section></mj-section>", nil},
		{"unclosed ending tag", "<mjml><mj-body>\n<mj-section><mj-column>\n<mj-text>Hi\n</mj-column></mj-section></mj-body></mjml>", []string{"line 3: mj-text: <mj-text> is never closed"}},
		{"unclosed at the end", "<mj-section>\n<mj-column>", []string{"line 2: mj-column", "line 1: mj-section"}},
		{"misplaced", "<mj-section>\n<mj-column>\n</mj-section>\n</mj-column>", []string{"line 3: mj-section: </mj-section> where <mj-column> (line 2)", "line 4: mj-column: </mj-column> closes nothing"}},
		{"stray end", "</mj-text>", []string{"line 1: mj-text: </mj-text> closes nothing"}},
		{"unclosed comment", "<!-- x", []string{"comment is never closed"}},
		{"ending tag to the end", "<mj-text>hello", []string{"line 1: mj-text: <mj-text> is never closed"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := WellFormed(tt.src)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %d messages %q", got, len(tt.want), tt.want)
			}
			for i, m := range got {
				if !strings.Contains(m.String(), tt.want[i]) {
					t.Errorf("message %d: %q, want %q", i, m.String(), tt.want[i])
				}
			}
		})
	}
}

func TestCompose(t *testing.T) {
	t.Parallel()
	partials := map[string]string{
		"layout": "<main>{{ content }}</main>{% include 'footer' %}",
		"footer": "<footer>{% include 'legal' %} {{ x }}</footer>",
		"legal":  "(c)",
		"loopA":  "{% include 'loopB' %}",
		"loopB":  "{% include 'loopA' %}",
	}
	c, err := Compose("<p>{{ x }}</p>{% raw %}{% include 'nope' %}{% endraw %}", "layout", partials)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<main><p>{{ x }}</p>{% raw %}{% include 'nope' %}{% endraw %}</main><footer>(c) {{ x }}</footer>"; c.Source != want || len(c.Missing) != 0 {
		t.Fatalf("%q %v", c.Source, c.Missing)
	}
	c, err = Compose(`{% include "gone" %}<p>x</p>`, "nolayout", partials)
	if err != nil || !c.LayoutMissing || strings.Join(c.Missing, ",") != "gone,nolayout" || c.Source != "<p>x</p>" {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := Compose("{% include 'loopA' %}", "", partials); err == nil || !strings.Contains(err.Error(), "cycle: loopA -> loopB -> loopA") {
		t.Fatalf("%v", err)
	}
	if _, err := Compose("{% include footer %}", "", partials); err == nil {
		t.Fatal("an unquoted include was accepted")
	}
	if _, err := Compose("<p>x</p>", "legal", partials); err == nil {
		t.Fatal("a layout without {{ content }} was accepted")
	}
	if ids, err := Includes("{% include 'a' %}{% include 'b' %}{% include 'a' %}"); err != nil || strings.Join(ids, ",") != "a,b" {
		t.Fatalf("%v %v", ids, err)
	}
}
