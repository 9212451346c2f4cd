package render

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/osteele/liquid"
)

// nestedLoops is the 161-byte subject of issue 11: three nested loops over
// ranges, which ran for 57 s before there were limits.
const nestedLoops = `{% for a in (1..100000) %}{% for b in (1..100000) %}{% for c in (1..100000) %}{{ a }}{{ b }}{{ c }}{% endfor %}{% endfor %}{% endfor %}` +
	`{{ "done" | upcase }}`

// doubling is the content of issue 11: 27 doublings of a two-byte string
// make 256 MiB, though only its size is printed.
var doubling = `<p>{% assign s = "ab" %}` + strings.Repeat(`{% assign s = s | append: s %}`, 27) + `{{ s | size }}</p>`

// untimed are the default limits without the time limit, which a loaded
// machine (or -race) could reach before the limit a test is about.
var untimed = RendererOptions{MaxRenderTime: time.Hour}

// renderCounted renders a version like Render does, and also returns the
// budget it used, to see how much work the render did.
func renderCounted(t *testing.T, ctx context.Context, r *Renderer, subject, html string, vars map[string]any) (*budget, error) {
	t.Helper()
	p, err := r.parsed(t.Name(), 1, subject, html)
	if err != nil {
		t.Fatal(err)
	}
	b := newBudget(ctx, r.limits)
	_, err = r.renderWith(b, p, bindBudget(vars, b))
	return b, err
}

func TestBudgetNestedLoops(t *testing.T) {
	t.Parallel()
	r := NewRenderer(untimed)
	b, err := renderCounted(t, t.Context(), r, nestedLoops, "<p>x</p>", nil)
	var limit *LimitError
	if !errors.As(err, &limit) || !errors.Is(err, ErrBudget) {
		t.Fatalf("err = %v, want a *LimitError", err)
	}
	if limit.Field != "subject" || limit.Limit != LimitLoopIterations || limit.Max != DefaultMaxLoopIterations {
		t.Errorf("limit = %+v", limit)
	}
	// The render stopped at the first iteration over the limit.
	if b.iterations != -1 {
		t.Errorf("iterations left = %d, want -1 (stopped at %d)", b.iterations, DefaultMaxLoopIterations+1)
	}
	if !strings.Contains(err.Error(), "100000 loop iterations") {
		t.Errorf("message %q does not name the limit", err)
	}
}

func TestBudgetDoubling(t *testing.T) {
	// Not parallel: it measures the bytes this render allocates.
	r := NewRenderer(untimed)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b, err := renderCounted(t, t.Context(), r, "s", doubling, nil)
	runtime.ReadMemStats(&after)
	var limit *LimitError
	if !errors.As(err, &limit) || limit.Field != "content" || limit.Limit != LimitStringBytes {
		t.Fatalf("err = %v, want the string bytes limit on content", err)
	}
	if b.bytes != -1 {
		t.Errorf("bytes left = %d, want -1", b.bytes)
	}
	// Appends stop before making a string over the budget: all of them
	// together are below 10 MiB (256 MiB unbounded).
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > DefaultMaxStringBytes+1<<20 {
		t.Errorf("the render allocated %d MiB", alloc>>20)
	}
}

func TestBudgetLimits(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1<<20) // 1 MiB, a caller's variable
	tests := []struct {
		desc    string
		content string
		limit   string
	}{
		{"loop in content", `{% for i in (1..1000000000) %}{% endfor %}`, LimitLoopIterations},
		{"tablerow", `<table>{% tablerow i in (1..1000000000) %}{% endtablerow %}</table>`, LimitLoopIterations},
		{"loop with break that never comes", `{% for i in (1..1000000000) %}{% if i == 0 %}{% break %}{% endif %}{% endfor %}`, LimitLoopIterations},
		{"loop with continue", `{% for i in (1..1000000000) %}{% continue %}{% endfor %}`, LimitLoopIterations},
		{"range from a variable", `{% assign n = 1000000000 %}{% for i in (1..n) %}{% endfor %}`, LimitLoopIterations},
		{"capture around a loop", `{% capture x %}{% for i in (1..50) %}{{ big }}{% endfor %}{% endcapture %}{{ x | size }}`, LimitStringBytes},
		{"output of a loop", `{% for i in (1..50) %}{{ big }}{% endfor %}`, LimitOutputBytes},
		{"prepend", `{% for i in (1..50) %}{% assign s = s | prepend: big %}{% endfor %}{{ s | size }}`, LimitStringBytes},
		{"filters not assigned", `{% for i in (1..50) %}{{ big | append: big | size }}{% endfor %}`, LimitStringBytes},
		{"replace with an empty pattern", `{{ big | replace: "", big | size }}`, LimitStringBytes},
		{"replace_first", `{% for i in (1..50) %}{% assign s = big | replace_first: "x", big %}{% endfor %}`, LimitStringBytes},
		{"split into characters", `{{ big | split: "" | size }}`, LimitStringBytes},
		{"join with a big separator", `{{ (1..100) | join: big | size }}`, LimitStringBytes},
		{"range made an array", `{{ (1..1000000000) | sort | size }}`, LimitStringBytes},
		{"range first", `{{ (1..1000000000) | first }}`, LimitStringBytes},
		{"range whose bytes overflow", `{{ (0..1152921504606846975) | last }}`, LimitStringBytes},
		{"concat doubling", `{% assign a = (1..2) | sort %}` + strings.Repeat(`{% assign a = a | concat: a %}`, 30) + `{{ a | size }}`, LimitStringBytes},
		{"escape in a loop", `{% for i in (1..50) %}{{ big | escape | size }}{% endfor %}`, LimitStringBytes},
		{"newline_to_br", `{% assign nl = big | replace: "x", "\n" %}{% for i in (1..3) %}{{ nl | newline_to_br | size }}{% endfor %}`, LimitStringBytes},
		{"truncate with a big ellipsis", `{% for i in (1..50) %}{% assign s = big | truncate: 5, big %}{% endfor %}`, LimitStringBytes},
	}
	r := NewRenderer(RendererOptions{MaxStringBytes: 8 << 20, MaxOutput: 8 << 20, MaxRenderTime: time.Hour})
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			_, err := r.Render(t.Context(), "k/"+tt.desc, 1, "s", tt.content, map[string]any{"big": big})
			var limit *LimitError
			if !errors.As(err, &limit) || limit.Limit != tt.limit || limit.Field != "content" {
				t.Fatalf("err = %v, want the %s limit on content", err, tt.limit)
			}
		})
	}
}

func TestBudgetDeadline(t *testing.T) {
	t.Parallel()
	unlimited := RendererOptions{MaxLoopIterations: math.MaxInt, MaxStringBytes: math.MaxInt, MaxOutput: math.MaxInt}
	forever := `{% for a in (1..1000000000) %}{% for b in (1..1000000000) %}{% endfor %}{% endfor %}`

	t.Run("render time", func(t *testing.T) {
		t.Parallel()
		opts := unlimited
		opts.MaxRenderTime = 20 * time.Millisecond
		_, err := NewRenderer(opts).Render(t.Context(), "k", 1, forever, "<p>x</p>", nil)
		var limit *LimitError
		if !errors.As(err, &limit) || limit.Limit != LimitRenderTime || limit.Field != "subject" {
			t.Fatalf("err = %v, want the render time limit", err)
		}
	})
	t.Run("cancelled during the render", func(t *testing.T) {
		t.Parallel()
		opts := unlimited
		opts.MaxRenderTime = time.Hour
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err := NewRenderer(opts).Render(ctx, "k", 1, "s", forever, nil)
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrBudget) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		b, err := renderCounted(t, ctx, NewRenderer(unlimited), "s", forever, nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if used := math.MaxInt - b.iterations; used != 0 {
			t.Errorf("%d iterations after the context ended", used)
		}
	})
}

// TestBudgetSameOutput renders templates that use every budgeted filter
// and tag both here and with an engine without budgets: the results must be
// the same.
func TestBudgetSameOutput(t *testing.T) {
	t.Parallel()
	plain := liquid.NewEngine()
	vars := map[string]any{
		"s": "a<b>&c\nd", "words": "one two three four", "xs": []any{3, 1, nil, 2, 1},
		"people": []any{map[string]any{"name": "Ada", "vip": true}, map[string]any{"name": "Bo", "vip": false}},
		"when":   "2026-03-14T15:09:26Z",
	}
	tests := []string{
		`{{ s | append: "!" | prepend: "¡" }}`,
		`{{ s | replace: "a", "AA" }}|{{ s | replace: "", "-" }}|{{ s | replace_first: "c", "C" }}|{{ s | replace_last: "d", "D" }}`,
		`{{ s | newline_to_br }}|{{ s | escape }}|{{ s | escape_once }}|{{ s | url_encode }}`,
		`{{ s | upcase }}|{{ s | downcase }}|{{ s | capitalize }}|{{ words | truncate: 7 }}|{{ words | truncate: 7, "…" }}|{{ words | truncatewords: 2 }}`,
		`{{ words | split: " " | join: "+" }}|{{ words | split: "" | size }}|{{ xs | join }}|{{ (1..4) | join: "," }}`,
		`{{ xs | compact | sort | uniq | reverse | join: "," }}|{{ xs | first }}|{{ xs | last }}|{{ xs | sum }}|{{ (1..3) | concat: xs | size }}`,
		`{{ people | map: "name" | join }}|{{ people | where: "vip" | map: "name" | first }}|{{ xs | compact | sort_natural | join }}`,
		`{{ when | date: "%Y-%m-%d %H:%M" }}|{{ xs | json }}|{{ people | inspect | size }}`,
		`{% for x in xs limit: 3 offset: 1 %}{{ forloop.index }}:{{ x }}{% cycle "a", "b" %}{% if forloop.last %}.{% endif %}{% endfor %}`,
		`{% for x in xs reversed %}{% if x == 1 %}{% continue %}{% endif %}{% if x == nil %}{% break %}{% endif %}{{ x }}{% endfor %}`,
		`{% for x in nothing %}never{% else %}empty{% endfor %}`,
		"<ul>\n{%- for x in xs -%}\n  <li>{{- x -}}</li>\n{%- endfor -%}\n</ul>|{% for x in xs %}  {%- for y in (1..2) %} {{ y }}{% endfor -%}  {% endfor %}",
		`<table>{% tablerow p in people cols: 1 %}{{ p.name }}{% endtablerow %}</table>`,
		`{% capture c %}{% for p in people %}{{ p.name | upcase }} {% endfor %}{% endcapture %}[{{ c }}]{% capture c %}again{% endcapture %}{{ c }}`,
		`{%- capture c -%}  {{ s | size }}  {%- endcapture -%} ({{ c }})`,
		`{% if true %}{% capture inner %}in{% endcapture %}{% endif %}{% case inner %}{% when "in" %}{% capture w %}when{% endcapture %}{{ w }}{% endcase %}`,
	}
	r := NewRenderer(RendererOptions{})
	b := newBudget(t.Context(), r.limits)
	bound := bindBudget(vars, b)
	for _, src := range tests {
		want, err := plain.ParseAndRenderString(src, vars)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		tmpl, perr := parseLiquid("content", src)
		if perr != nil {
			t.Fatal(perr)
		}
		got, rerr := r.render(b, tmpl, false, bound)
		if rerr != nil || got != want {
			t.Errorf("%s\n got %q, %v\nwant %q", src, got, rerr, want)
		}
	}
	if b.iterations == DefaultMaxLoopIterations || b.bytes == DefaultMaxStringBytes {
		t.Error("nothing was charged")
	}
}
