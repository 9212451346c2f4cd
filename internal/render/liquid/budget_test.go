package liquid

import (
	"bytes"
	"context"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	osteele "github.com/osteele/liquid"
)

// nestedLoops is the 161-byte subject of issue 11: three nested loops over
// ranges, which ran for 57 s before there were limits.
const nestedLoops = `{% for a in (1..100000) %}{% for b in (1..100000) %}{% for c in (1..100000) %}{{ a }}{{ b }}{{ c }}{% endfor %}{% endfor %}{% endfor %}` +
	`{{ "done" | upcase }}`

// doubling is the content of issue 11: 27 doublings of a two-byte string
// make 256 MiB, though only its size is printed.
var doubling = `<p>{% assign s = "ab" %}` + strings.Repeat(`{% assign s = s | append: s %}`, 27) + `{{ s | size }}</p>`

// defaults are the default limits.
var defaults = Limits{LoopIterations: DefaultMaxLoopIterations, StringBytes: DefaultMaxStringBytes,
	OutputBytes: DefaultMaxOutput, RenderTime: DefaultMaxRenderTime}

// untimed are the default limits without the time limit, which a loaded
// machine (or -race) could reach before the limit a test is about.
var untimed = Limits{LoopIterations: DefaultMaxLoopIterations, StringBytes: DefaultMaxStringBytes,
	OutputBytes: DefaultMaxOutput, RenderTime: time.Hour}

// renderCounted renders src with a budget of l, as the render pipeline
// does, and also returns the budget it used, to see how much work the
// render did.
func renderCounted(t *testing.T, ctx context.Context, l Limits, src string, vars map[string]any) (*budget, error) {
	t.Helper()
	tmpl, err := Parse("content", src)
	if err != nil {
		t.Fatal(err)
	}
	h := NewBudget(ctx, l)
	var buf bytes.Buffer
	err = h.Render(tmpl, &buf, h.Bind(vars))
	return h.b, err
}

func TestBudgetNestedLoops(t *testing.T) {
	t.Parallel()
	b, err := renderCounted(t, t.Context(), untimed, nestedLoops, nil)
	var limit *LimitError
	if !errors.As(err, &limit) || !errors.Is(err, ErrBudget) {
		t.Fatalf("err = %v, want a *LimitError", err)
	}
	if limit.Limit != LimitLoopIterations || limit.Max != DefaultMaxLoopIterations {
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
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b, err := renderCounted(t, t.Context(), untimed, doubling, nil)
	runtime.ReadMemStats(&after)
	var limit *LimitError
	if !errors.As(err, &limit) || limit.Limit != LimitStringBytes {
		t.Fatalf("err = %v, want the string bytes limit", err)
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
	limits := Limits{LoopIterations: DefaultMaxLoopIterations, StringBytes: 8 << 20, OutputBytes: 8 << 20, RenderTime: time.Hour}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			_, err := renderCounted(t, t.Context(), limits, tt.content, map[string]any{"big": big})
			var limit *LimitError
			if !errors.As(err, &limit) || limit.Limit != tt.limit {
				t.Fatalf("err = %v, want the %s limit", err, tt.limit)
			}
		})
	}
}

func TestBudgetDeadline(t *testing.T) {
	t.Parallel()
	unlimited := Limits{LoopIterations: math.MaxInt, StringBytes: math.MaxInt, OutputBytes: math.MaxInt,
		RenderTime: DefaultMaxRenderTime}
	forever := `{% for a in (1..1000000000) %}{% for b in (1..1000000000) %}{% endfor %}{% endfor %}`

	t.Run("render time", func(t *testing.T) {
		t.Parallel()
		l := unlimited
		l.RenderTime = 20 * time.Millisecond
		_, err := renderCounted(t, t.Context(), l, forever, nil)
		var limit *LimitError
		if !errors.As(err, &limit) || limit.Limit != LimitRenderTime {
			t.Fatalf("err = %v, want the render time limit", err)
		}
	})
	t.Run("cancelled during the render", func(t *testing.T) {
		t.Parallel()
		l := unlimited
		l.RenderTime = time.Hour
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err := renderCounted(t, ctx, l, forever, nil)
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrBudget) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		b, err := renderCounted(t, ctx, unlimited, forever, nil)
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
	plain := osteele.NewEngine()
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
	h := NewBudget(t.Context(), defaults)
	b := h.b
	bound := h.Bind(vars)
	var buf bytes.Buffer
	for _, src := range tests {
		want, err := plain.ParseAndRenderString(src, vars)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		tmpl, perr := Parse("content", src)
		if perr != nil {
			t.Fatal(perr)
		}
		buf.Reset()
		rerr := h.Render(tmpl, &buf, bound)
		if got := buf.String(); rerr != nil || got != want {
			t.Errorf("%s\n got %q, %v\nwant %q", src, got, rerr, want)
		}
	}
	if b.iterations == DefaultMaxLoopIterations || b.bytes == DefaultMaxStringBytes {
		t.Error("nothing was charged")
	}
}

// A derived template with an escape writes every value through it, and
// only the values; its renders share the budget like any other.
func TestParseDerivedEscapes(t *testing.T) {
	t.Parallel()
	tmpl, err := ParseDerived(`<{{ a }}>{% for i in (1..2) %}{{ i }}{% endfor %}`, strings.ToUpper)
	if err != nil {
		t.Fatal(err)
	}
	h := NewBudget(t.Context(), defaults)
	defer h.Release()
	var buf bytes.Buffer
	if err := h.Render(tmpl, &buf, h.Bind(map[string]any{"a": "x"})); err != nil || buf.String() != "<X>12" {
		t.Fatalf("got %q, %v", buf.String(), err)
	}
	if left := h.b.iterations; left != DefaultMaxLoopIterations-2 {
		t.Errorf("%d iterations left, want 2 charged", left)
	}
}
