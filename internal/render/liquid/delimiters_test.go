package liquid

import (
	"strings"
	"testing"
)

func TestCheckDelimitersAcceptsValidLiquid(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"", "plain", "a { b } c", "css { .x { color: red } }", "{{ a }}{{ b | default: 'x' }}",
		"{%- if a -%}x{%- endif -%}", "{% raw %}{{ not liquid {% %}{% endraw %} {{ after }}",
		"{% raw %}x{%- endraw -%}", "{{ '{a' }}", `{{ "{{" }}`, `{{ "a {% b" | append: x }}`, `{% if a == "{{" %}x{% endif %}`, "<style>@media (x) {.a{b:c}}</style>",
	} {
		if msg := checkDelimiters(src); msg != "" {
			t.Errorf("%q: %s", src, msg)
		}
	}
}

func TestCheckDelimitersRejects(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"a {{ b":                      `line 1: output "{{ b" was not properly terminated`,
		"ok {{ a }}\n\nx {% if y":     `line 3: tag "{% if y" was not properly terminated`,
		"{% raw %}{{ x":               "'raw' tag was never closed",
		"{% raw %}x{% endraw %} {{ y": `output "{{ y" was not properly terminated`,
	} {
		if got := checkDelimiters(src); !strings.Contains(got, want) {
			t.Errorf("%q: %q, want %q", src, got, want)
		}
	}
}
