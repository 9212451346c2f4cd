package sanitize

import (
	"strings"
	"testing"
)

// BenchmarkSaveSanitize is what a PUT spends on sanitising: the newsletter's
// MJML source (MJML and Judge), its compiled HTML (HTML and
// Judge), and 1 MiB hostile inputs: hidden script names, CDATA in SVG over
// and over, and deep nesting.
//
//	go test -run '^$' -bench SaveSanitize -benchmem -cpu 1 ./internal/render/sanitize/
func BenchmarkSaveSanitize(b *testing.B) {
	src := newsletterSource(b)
	compiled := compiledNewsletter(b)
	fill := func(unit string) string {
		return strings.Repeat(unit, (1<<20)/len(unit))
	}
	for _, tt := range []struct {
		name string
		in   string
		mjml bool
	}{
		{"newsletter-source", src, true},
		{"newsletter-compiled", compiled, false},
		{"hostile-script-names", "<a " + fill("<script "), false},
		{"hostile-cdata", fill(`<svg><![CDATA[><img title="]]><img src=x onerror=alert(1)>"></svg>`), false},
		{"hostile-nesting", fill("<div><b>"), false},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.in)))
			b.ReportAllocs()
			clean := HTML
			if tt.mjml {
				clean = MJML
			}
			for b.Loop() {
				out, _ := clean(tt.in)
				Judge(out, Mode{MJML: tt.mjml, Liquid: true})
			}
		})
	}
}

// BenchmarkSanitizeHostile sanitises 1 MiB of "<a " followed by "<script "
// over and over: every one is a hidden element to escape, so a sanitiser
// that is not linear in its input shows here.
//
//	go test -run '^$' -bench SanitizeHostile ./render/
func BenchmarkSanitizeHostile(b *testing.B) {
	in := "<a " + strings.Repeat("<script ", (1<<20)/len("<script "))
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if _, changed := HTML(in); !changed {
			b.Fatal("nothing escaped")
		}
	}
}
