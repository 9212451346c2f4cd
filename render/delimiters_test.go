package render

import "testing"

func TestCheckDelimitersAcceptsValidLiquid(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"", "plain", "a { b } c", "css { .x { color: red } }", "{{ a }}{{ b | default: 'x' }}",
		"{%- if a -%}x{%- endif -%}", "{% raw %}{{ not liquid {% %}{% endraw %} {{ after }}",
		"{% raw %}x{%- endraw -%}", "{{ '{a' }}", "<style>@media (x) {.a{b:c}}</style>",
	} {
		if msg := checkDelimiters(src); msg != "" {
			t.Errorf("%q: %s", src, msg)
		}
	}
}
