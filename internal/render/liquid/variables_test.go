package liquid

import (
	"errors"
	"slices"
	"testing"
)

// required parses each source and lists the variables they read.
func required(srcs ...string) ([]string, error) {
	ts := make([]*Template, len(srcs))
	for i, src := range srcs {
		t, err := Parse("template", src)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	return RequiredVariables(ts...), nil
}

func TestRequiredVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc      string
		templates []string
		want      []string
	}{
		{
			desc: "example from the spec",
			templates: []string{
				`Hi {{ contact.properties.firstName }}`,
				`{% for item in items %}{{ item.name }}{% endfor %} <a href="{{ resetUrl }}">reset</a>`,
			},
			want: []string{"contact.properties.firstName", "items", "resetUrl"},
		},
		{desc: "no liquid", templates: []string{"plain", "<p>html</p>"}, want: []string{}},
		{desc: "sorted and unique", templates: []string{"{{ b }}{{ a }}{{ b }}", "{{ a }}"}, want: []string{"a", "b"}},
		{desc: "nested path", templates: []string{"{{ order.shipping.address.city }}"}, want: []string{"order.shipping.address.city"}},
		{desc: "filters do not count", templates: []string{"{{ name | upcase | truncate: 10 }}"}, want: []string{"name"}},
		{desc: "filter arguments count", templates: []string{`{{ name | default: fallback.name | append: suffix }}`}, want: []string{"fallback.name", "name", "suffix"}},
		{desc: "named filter argument", templates: []string{`{{ flag | default: other, allow_false: true }}`}, want: []string{"flag", "other"}},
		{desc: "string literals are not variables", templates: []string{`{{ "x" | append: 'y' }}{% if a == "b.c" %}{% endif %}`}, want: []string{"a"}},
		{desc: "whitespace control", templates: []string{`{{- name -}}{%- if x -%}{%- endif -%}`}, want: []string{"name", "x"}},
		{desc: "if, elsif, unless and case conditions", templates: []string{
			`{% if a and b.c > 1 or d contains "x" %}{% elsif e %}{% else %}{% endif %}{% unless f == empty %}{% endunless %}{% case g %}{% when 1, h %}{% when "s" %}{% else %}{% endcase %}`,
		}, want: []string{"a", "b.c", "d", "e", "f", "g", "h"}},
		{desc: "loop variable left out, collection listed", templates: []string{
			`{% for item in cart.items %}{{ item.name }} {{ forloop.index }} {{ item.price | times: rate }}{% endfor %}`,
		}, want: []string{"cart.items", "rate"}},
		{desc: "loop modifiers", templates: []string{`{% for i in list limit: max offset: start reversed %}{{ i }}{% endfor %}`}, want: []string{"list", "max", "start"}},
		{desc: "range", templates: []string{`{% for i in (1..count) %}{{ i }}{% endfor %}`}, want: []string{"count"}},
		{desc: "loop variable only inside its loop", templates: []string{`{% for item in items %}{% else %}{{ item }}{% endfor %}{{ item.name }}`}, want: []string{"item", "item.name", "items"}},
		{desc: "nested loops", templates: []string{`{% for o in orders %}{% for l in o.lines %}{{ l.sku }}{{ o.id }}{{ x }}{% endfor %}{% endfor %}`}, want: []string{"orders", "x"}},
		{desc: "tablerow", templates: []string{`{% tablerow p in products cols: n %}{{ p.title }}{{ tablerowloop.col }}{% endtablerow %}`}, want: []string{"n", "products"}},
		{desc: "assign", templates: []string{`{% assign total = subtotal | plus: shipping %}{{ total }}`}, want: []string{"shipping", "subtotal"}},
		{desc: "read before assign counts", templates: []string{`{{ greeting }}{% assign greeting = "hi" %}{{ greeting }}`}, want: []string{"greeting"}},
		{desc: "capture", templates: []string{`{% capture label %}{{ tier | capitalize }}{% endcapture %}{{ label }}`}, want: []string{"tier"}},
		{desc: "assigns do not cross templates", templates: []string{`{% assign x = 1 %}{{ x }}`, `{{ x }}`}, want: []string{"x"}},
		{desc: "size first last end the path", templates: []string{`{% if items.size > 0 %}{{ items.first.name }}{{ contact.tags.last }}{% endif %}`}, want: []string{"contact.tags", "items"}},
		{desc: "string index is a segment", templates: []string{`{{ contact.properties["first name"] }}`}, want: []string{"contact.properties.first name"}},
		{desc: "integer index ends the path", templates: []string{`{{ items[0].name }}`}, want: []string{"items"}},
		{desc: "variable index", templates: []string{`{{ prices[product.sku].amount }}`}, want: []string{"prices", "product.sku"}},
		{desc: "raw and comment are not read", templates: []string{`{% raw %}{{ a }}{% endraw %}{% comment %}{{ b }}{% endcomment %}`}, want: []string{}},
		{desc: "cycle", templates: []string{`{% for i in xs %}{% cycle "odd", "even" %}{% endfor %}`}, want: []string{"xs"}},
		{desc: "question-mark and hyphenated names", templates: []string{`{{ user.active? }}{{ first-name }}`}, want: []string{"first-name", "user.active?"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			got, err := required(tt.templates...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("RequiredVariables = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRequiredVariablesSyntaxError(t *testing.T) {
	t.Parallel()
	_, err := required(`{% if x %}`)
	var lerr *Error
	if !errors.As(err, &lerr) {
		t.Fatalf("err = %v, want *Error", err)
	}
}
