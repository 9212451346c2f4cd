package sanitize_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"tidings/internal/render"
	"tidings/internal/render/sanitize"
	"tidings/internal/testenv"
)

// FuzzSanitizeRender and the corpus share what a template must come out of
// saving and rendering as.
func checkRendered(t *testing.T, what, html string, strict bool) {
	t.Helper()
	if strict {
		if d := sanitize.Judge(html, sanitize.Mode{}); d != "" {
			t.Errorf("%s: %s\n%s", what, d, html)
		}
	}
	if d := sanitize.FindScript(html); d != "" {
		t.Errorf("%s: script: %s\n%s", what, d, html)
	}
}

// TestXSSCorpus puts every vector through PUT's Prepare, as raw HTML and
// inside mj-text, and through rendering: the stored content, the compiled
// HTML and the preview must be clean to judge (the allowlist, over the
// tree a browser builds) and to findScript; a message whose values carry
// the vector must run no script.
func TestXSSCorpus(t *testing.T) {
	t.Parallel()
	vectors := append(sanitize.LoadCorpus(t), sanitize.CDATAVectors...)
	if len(vectors) < 350 {
		t.Fatalf("only %d vectors", len(vectors))
	}
	pool := testenv.MJML(t)
	r := render.NewRenderer(render.RendererOptions{})
	var stored, rejected atomic.Int64
	t.Cleanup(func() {
		t.Logf("%d vectors, %d forms stored, %d rejected by MJML, Liquid or judge", len(vectors), stored.Load(), rejected.Load())
	})
	for i, v := range vectors {
		forms := map[string]string{
			"raw":  v.Vector,
			"mjml": `<mjml><mj-body><mj-section><mj-column><mj-text>` + v.Vector + `</mj-text></mj-column></mj-section></mj-body></mjml>`,
		}
		for form, content := range forms {
			t.Run(v.Name+"/"+form, func(t *testing.T) {
				t.Parallel()
				p, err := render.Prepare(context.Background(), pool, "Hi", content)
				var verr *render.ValidationError
				if errors.As(err, &verr) {
					rejected.Add(1)
					return // nothing is stored
				}
				if err != nil {
					t.Fatal(err)
				}
				stored.Add(1)
				if d := sanitize.Judge(p.StoredContent, sanitize.Mode{MJML: sanitize.IsMJML(p.StoredContent), Liquid: true}); d != "" {
					t.Errorf("stored content: %s\n%s", d, p.StoredContent)
				}
				checkRendered(t, "stored content", p.StoredContent, false)
				if d := sanitize.Judge(p.CompiledHTML, sanitize.Mode{Liquid: true}); d != "" {
					t.Errorf("compiled HTML: %s", d)
				}
				checkRendered(t, "compiled HTML", p.CompiledHTML, false)
				m, err := r.Render(context.Background(), fmt.Sprintf("corpus/%d/%s", i, form), 1, "Hi", p.CompiledHTML, render.BindingsForPreview(nil))
				if err != nil {
					t.Logf("does not render: %v", err)
					return
				}
				checkRendered(t, "preview", m.HTML, true)
			})
		}
		t.Run(v.Name+"/values", func(t *testing.T) {
			t.Parallel()
			tmpl := `<p>Hi {{ v }}</p><a href="{{ v }}" title="{{ v }}">x</a><img src="{{ v }}" alt='{{ v }}'><!--[if mso]><p>{{ v }}</p><![endif]-->`
			m, err := r.Render(context.Background(), "corpus/values", 1, "Hi", tmpl, map[string]any{"v": v.Vector})
			if err != nil {
				t.Fatal(err)
			}
			checkRendered(t, "message", m.HTML, false)
		})
	}
}

// TestCDATAClass writes out the class issue 10 found: every vector, through
// Sanitize and SanitizeMJML, comes out clean to judge and findScript.
func TestCDATAClass(t *testing.T) {
	t.Parallel()
	for _, v := range sanitize.CDATAVectors {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			got, _ := sanitize.HTML(v.Vector)
			if d := sanitize.FindDanger(got); d != "" {
				t.Errorf("Sanitize(%q) = %q: %s", v.Vector, got, d)
			}
			mj := `<mj-text>` + v.Vector + `</mj-text>`
			got, _ = sanitize.MJML(mj)
			if d := sanitize.Judge(got, sanitize.Mode{MJML: true, Liquid: true}); d != "" {
				t.Errorf("SanitizeMJML(%q) = %q: %s", mj, got, d)
			}
			if d := sanitize.FindScript(got); d != "" {
				t.Errorf("SanitizeMJML(%q) = %q: %s", mj, got, d)
			}
		})
	}
}

// FuzzSanitizeRender feeds arbitrary content through what saving and
// sending do, without the MJML compiler (whose mj-raw passes HTML through
// as it is): Sanitize, judge (content judge objects to is refused, as
// Prepare refuses it), Liquid parsing, then rendering with plain values and
// with the fuzzed value in every variable. The rendered HTML with plain
// values must be clean to judge, and no rendered HTML may run script.
//
//	go test -run '^$' -fuzz FuzzSanitizeRender -fuzztime 3m ./internal/render/sanitize/
func FuzzSanitizeRender(f *testing.F) {
	for _, v := range sanitize.CDATAVectors {
		f.Add(v.Vector, "Ada")
	}
	for _, in := range sanitize.XSSInputs() {
		f.Add(in, `"><img src=x onerror=alert(1)>`)
	}
	for _, in := range sanitize.KeptInputs() {
		f.Add(in, "javascript:alert(1)")
	}
	f.Add(`<a href="{{ u }}" {% if x %}class="{{ x }}"{% endif %}>{{ v }}</a>`, "<svg><![CDATA[><a title=\"]]><img src=x onerror=alert(1)>\"></svg>")
	f.Add(`<{% if x %}b{% endif %} title="{{ v }}">x</b><!--[if mso]><v:rect>{{ v }}</v:rect><![endif]-->`, `x" onclick="alert(1)`)
	// MJML-ish markup in raw HTML (MJML source itself: FuzzSanitizeMJML).
	f.Add(`<mj-text>{{ v }}</mj-text><mj-raw><a href="{{ u }}">x</a></mj-raw><mj-style>p{color:red}</mj-style>`, `</mj-raw><script>alert(1)</script>`)
	r := render.NewRenderer(render.RendererOptions{MaxOutput: 1 << 20})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, content, value string) {
		stored, _ := sanitize.HTML(content)
		if sanitize.Judge(stored, sanitize.Mode{Liquid: true}) != "" {
			return // Prepare refuses it
		}
		key := fmt.Sprintf("fuzz/%d", n.Add(1))
		plain := map[string]any{"v": "Ada", "u": "https://example.com/x", "x": "yes", "a": 1, "b": 2, "items": []any{"one", "two"}}
		m, err := r.Render(context.Background(), key, 1, "s", stored, plain)
		if err != nil {
			return // runaway output, a Liquid runtime error
		}
		checkRendered(t, "rendered with plain values", m.HTML, true)
		hostile := map[string]any{}
		for k := range plain {
			hostile[k] = value
		}
		if m, err := r.Render(context.Background(), key, 1, "s", stored, hostile); err == nil {
			checkRendered(t, "rendered with the fuzzed value", m.HTML, false)
		}
	})
}

// TestRenderSanitisesOldVersions: a version saved under the denylist
// sanitiser (which kept the CDATA vector and <frameset>) is sanitised again
// when a Renderer first parses it.
func TestRenderSanitisesOldVersions(t *testing.T) {
	t.Parallel()
	old := `<p>Hi {{ name }}</p><svg><![CDATA[><image xlink:href="]]><img src=x onerror=alert(1)//"></svg><frameset><frame ></frameset><a folder="javascript:alert(1)">x</a>`
	r := render.NewRenderer(render.RendererOptions{})
	m, err := r.Render(context.Background(), "old", 1, "Hi", old, map[string]any{"name": "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	if d := sanitize.Judge(m.HTML, sanitize.Mode{}); d != "" {
		t.Errorf("%s in %q", d, m.HTML)
	}
	if !strings.Contains(m.HTML, "Hi Ada") {
		t.Errorf("html = %q", m.HTML)
	}
}
