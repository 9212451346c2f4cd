package render

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// xssCorpus is testdata/xss: public XSS vectors (see its README).
type corpusVector struct{ name, vector string }

func loadCorpus(t testing.TB) []corpusVector {
	t.Helper()
	var out []corpusVector
	f, err := os.Open(filepath.Join("testdata", "xss", "h5sc.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v struct {
			ID     int    `json:"id"`
			Name   string `json:"name"`
			Vector string `json:"vector"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, corpusVector{fmt.Sprintf("h5sc-%d", v.ID), v.Vector})
	}
	pb, err := os.ReadFile(filepath.Join("testdata", "xss", "payloadbox.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(pb), "\n"), "\n") {
		out = append(out, corpusVector{fmt.Sprintf("payloadbox-%d", i+1), line})
	}
	return out
}

// cdataVectors are the class issue 10 found getting through the tokenizer
// denylist: CDATA sections and other foreign-content tricks, where a
// browser's tree builder and the tokenizer read different markup.
var cdataVectors = []corpusVector{
	{"svg cdata image breakout", `<svg><![CDATA[><image xlink:href="]]><img src=x onerror=alert(1)//"></svg>`},
	{"svg cdata javascript link", `<svg><![CDATA[><a title="]]><a href="javascript:alert(1)">click</a>"></svg>`},
	{"math cdata breakout", `<math><![CDATA[><mi title="]]><img src=x onerror=alert(1)>"></math>`},
	{"cdata hides the end tag", `<svg><![CDATA[</svg>]]><img src=x onerror=alert(1)>`},
	{"cdata ends the svg for the tokenizer only", `<svg><![CDATA[x>y</svg>]]><img src=x onerror=alert(1)>`},
	{"svg style cdata", `<svg><style><![CDATA[</style><img src=x onerror=alert(1)>]]></style></svg>`},
	{"mglyph style mutation", `<math><mtext><table><mglyph><style><![CDATA[</style><img title="]]></mglyph><img src=1 onerror=alert(1)>">`},
	{"svg style after p", `<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">`},
	{"form math mutation", `<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>`},
	{"svg animate href", `<svg><a><![CDATA[ ]]><animate attributeName="href" values="javascript:alert(1)"/><text>x</text></a></svg>`},
	{"svg use data", `<svg><use href="data:image/svg+xml,&lt;svg id='x' xmlns='http://www.w3.org/2000/svg'&gt;&lt;image href='1' onerror='alert(1)' /&gt;&lt;/svg&gt;#x"/></svg>`},
	{"math xlink", `<math><maction actiontype="statusline" xlink:href="javascript:alert(1)">x</maction></math>`},
	{"namespaced script", `<html xmlns:x="http://www.w3.org/1999/xhtml"><x:script>alert(1)</x:script></html>`},
	{"noscript mutation", `<noscript><p title="</noscript><img src=x onerror=alert(1)>">`},
	{"frameset", `<frameset onload=alert(1)><frame src="javascript:alert(2)"></frameset>`},
	{"applet", `<applet code="x" codebase="javascript:alert(1)"><param name=a value=b>fallback</applet>`},
	{"base", `<base href="javascript:alert(1)//"><a href="/x">x</a>`},
	{"folder", `<a style="behavior:url(#default#AnchorClick);" folder="javascript:alert(1)">x</a>`},
	{"template", `<template><img src=x onerror=alert(1)></template>`},
	{"comment in cdata", `<svg><![CDATA[<!--]]><img src=x onerror=alert(1)>-->`},
}

// FuzzSanitizeRender and the corpus share what a template must come out of
// saving and rendering as.
func checkRendered(t *testing.T, what, html string, strict bool) {
	t.Helper()
	if strict {
		if d := judge(html, judgeMode{}); d != "" {
			t.Errorf("%s: %s\n%s", what, d, html)
		}
	}
	if d := findScript(html); d != "" {
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
	vectors := append(loadCorpus(t), cdataVectors...)
	if len(vectors) < 350 {
		t.Fatalf("only %d vectors", len(vectors))
	}
	pool := testPool(t)
	r := NewRenderer(RendererOptions{})
	var stored, rejected atomic.Int64
	t.Cleanup(func() {
		t.Logf("%d vectors, %d forms stored, %d rejected by MJML, Liquid or judge", len(vectors), stored.Load(), rejected.Load())
	})
	for i, v := range vectors {
		forms := map[string]string{
			"raw":  v.vector,
			"mjml": `<mjml><mj-body><mj-section><mj-column><mj-text>` + v.vector + `</mj-text></mj-column></mj-section></mj-body></mjml>`,
		}
		for form, content := range forms {
			t.Run(v.name+"/"+form, func(t *testing.T) {
				t.Parallel()
				p, err := Prepare(context.Background(), pool, "Hi", content)
				var verr *ValidationError
				if errors.As(err, &verr) {
					rejected.Add(1)
					return // nothing is stored
				}
				if err != nil {
					t.Fatal(err)
				}
				stored.Add(1)
				if d := judge(p.StoredContent, judgeMode{mjml: IsMJML(p.StoredContent), liquid: true}); d != "" {
					t.Errorf("stored content: %s\n%s", d, p.StoredContent)
				}
				checkRendered(t, "stored content", p.StoredContent, false)
				if d := judge(p.CompiledHTML, judgeMode{liquid: true}); d != "" {
					t.Errorf("compiled HTML: %s", d)
				}
				checkRendered(t, "compiled HTML", p.CompiledHTML, false)
				m, err := r.Render(context.Background(), fmt.Sprintf("corpus/%d/%s", i, form), 1, "Hi", p.CompiledHTML, BindingsForPreview(nil))
				if err != nil {
					t.Logf("does not render: %v", err)
					return
				}
				checkRendered(t, "preview", m.HTML, true)
			})
		}
		t.Run(v.name+"/values", func(t *testing.T) {
			t.Parallel()
			tmpl := `<p>Hi {{ v }}</p><a href="{{ v }}" title="{{ v }}">x</a><img src="{{ v }}" alt='{{ v }}'><!--[if mso]><p>{{ v }}</p><![endif]-->`
			m, err := r.Render(context.Background(), "corpus/values", 1, "Hi", tmpl, map[string]any{"v": v.vector})
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
	for _, v := range cdataVectors {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			got, _ := Sanitize(v.vector)
			if d := findDanger(got); d != "" {
				t.Errorf("Sanitize(%q) = %q: %s", v.vector, got, d)
			}
			mj := `<mj-text>` + v.vector + `</mj-text>`
			got, _ = SanitizeMJML(mj)
			if d := judge(got, judgeMode{mjml: true, liquid: true}); d != "" {
				t.Errorf("SanitizeMJML(%q) = %q: %s", mj, got, d)
			}
			if d := findScript(got); d != "" {
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
//	go test -run '^$' -fuzz FuzzSanitizeRender -fuzztime 3m ./internal/render/
func FuzzSanitizeRender(f *testing.F) {
	for _, v := range cdataVectors {
		f.Add(v.vector, "Ada")
	}
	for _, v := range xssVectors {
		f.Add(v.in, `"><img src=x onerror=alert(1)>`)
	}
	for _, v := range keptVerbatim {
		f.Add(v.in, "javascript:alert(1)")
	}
	f.Add(`<a href="{{ u }}" {% if x %}class="{{ x }}"{% endif %}>{{ v }}</a>`, "<svg><![CDATA[><a title=\"]]><img src=x onerror=alert(1)>\"></svg>")
	f.Add(`<{% if x %}b{% endif %} title="{{ v }}">x</b><!--[if mso]><v:rect>{{ v }}</v:rect><![endif]-->`, `x" onclick="alert(1)`)
	// MJML-ish markup in raw HTML (MJML source itself: FuzzSanitizeMJML).
	f.Add(`<mj-text>{{ v }}</mj-text><mj-raw><a href="{{ u }}">x</a></mj-raw><mj-style>p{color:red}</mj-style>`, `</mj-raw><script>alert(1)</script>`)
	r := NewRenderer(RendererOptions{MaxOutput: 1 << 20})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, content, value string) {
		stored, _ := Sanitize(content)
		if judge(stored, judgeMode{liquid: true}) != "" {
			return // Prepare refuses it
		}
		if _, err := parseLiquid("content", stored); err != nil {
			return
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
