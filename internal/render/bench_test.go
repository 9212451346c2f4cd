package render

import (
	"bytes"
	"errors"
	htmltemplate "html/template"
	"math"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"tidings/internal/render/liquid"
	"tidings/internal/render/sanitize"
	"time"
)

// cpuTime is the CPU time this process has used, all threads together.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportRate reports renders per second of wall time and per second of CPU
// time. The second holds still when other processes compete for the
// machine; with -cpu 1 it is the throughput of one core.
func reportRate(b *testing.B, cpuStart time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "renders/s")
	b.ReportMetric(float64(b.N)/(cpuTime(b)-cpuStart).Seconds(), "renders/cpu-s")
}

// BenchmarkRender is one recipient's message from the 23 KB newsletter
// (compiled once to 90 KB of HTML): subject, HTML with Liquid, the check for
// anything to sanitise, and the text part. The goal is 5,000 renders/s on one
// core:
//
//	go test -run '^$' -bench 'Render|HTMLTemplate' -benchmem -cpu 1 ./render/
func BenchmarkRender(b *testing.B) {
	p := prepareNewsletter(b)
	r := NewRenderer(RendererOptions{})
	subject := "{{ issue.title }}, {{ contact.firstName }}"
	vars := newsletterVars()
	if _, err := r.Render(b.Context(), "ten/nl", 1, subject, p.CompiledHTML, vars); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		if _, err := r.Render(b.Context(), "ten/nl", 1, subject, p.CompiledHTML, vars); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, cpu)
}

// BenchmarkRenderParts times the parts of Render separately, and the
// sanitiser and whole-page text conversion that Render avoids.
func BenchmarkRenderParts(b *testing.B) {
	p := prepareNewsletter(b)
	vars := newsletterVars()
	r := NewRenderer(RendererOptions{})
	// One budget for all the runs: limits no run reaches.
	bud := liquid.NewBudget(b.Context(), liquid.Limits{LoopIterations: math.MaxInt, StringBytes: math.MaxInt,
		OutputBytes: math.MaxInt, RenderTime: time.Hour})
	parsed, err := r.parsed("ten/nl", 1, "s", p.CompiledHTML)
	if err != nil {
		b.Fatal(err)
	}
	out, err := r.renderHTML(bud, parsed, vars)
	if err != nil {
		b.Fatal(err)
	}
	html := out.html
	if sanitize.MayNeed(html) {
		b.Fatal("the newsletter would be sanitised on every render")
	}
	part := func(name string, f func() error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
	full, err := parseLiquid("content", p.CompiledHTML)
	if err != nil {
		b.Fatal(err)
	}
	part("liquid-html", func() error { _, err := r.render(bud, full, vars); return err })
	part("skeleton", func() error { _, err := r.renderHTML(bud, parsed, vars); return err })
	part("mayNeedSanitize", func() error { sanitize.MayNeed(html); return nil })
	if text, ok := textTemplate(p.CompiledHTML); ok {
		part("text-template", func() error {
			out, err := r.render(bud, text, vars)
			tidyText(out)
			return err
		})
	}
	part("html-to-text", func() error { HTMLToText(html); return nil })
	part("sanitize", func() error { sanitize.HTML(html); return nil })
}

// BenchmarkHTMLTemplate renders the same compiled page with Go's
// html/template, the Liquid translated by hand (goTemplateFor), for
// comparison with BenchmarkRender. It makes the HTML only: no text part, no
// check for anything to sanitise.
func BenchmarkHTMLTemplate(b *testing.B) {
	p := prepareNewsletter(b)
	t, err := htmltemplate.New("nl").Funcs(goTemplateFuncs).Parse(goTemplateFor(b, p.CompiledHTML))
	if err != nil {
		b.Fatal(err)
	}
	vars := newsletterVars()
	var buf bytes.Buffer
	if err := t.Execute(&buf, vars); err != nil {
		b.Fatal(err)
	}
	if !strings.Contains(buf.String(), "Talus boots") || !strings.Contains(buf.String(), "Hi Ada, the ridges") {
		b.Fatalf("html/template rendering is off:\n%s", buf.String())
	}
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		buf.Reset()
		if err := t.Execute(&buf, vars); err != nil {
			b.Fatal(err)
		}
		_ = buf.String() // a message needs its own copy, as Render's does
	}
	reportRate(b, cpu)
}

var goTemplateFuncs = htmltemplate.FuncMap{
	"default": func(d, v any) any {
		if v == nil || v == "" {
			return d
		}
		return v
	},
	"urlencode": url.QueryEscape,
	"truncate": func(n int, s string) string {
		if len(s) <= n {
			return s
		}
		return s[:n-3] + "..."
	},
	"capitalize": func(s string) string {
		if s == "" {
			return s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
	"limit": func(n int, xs []any) []any { return xs[:min(n, len(xs))] },
	"inc":   func(i int) int { return i + 1 },
}

// goTemplateFor swaps each Liquid construct of the compiled newsletter for
// its html/template equivalent. It fails on Liquid it has no translation
// for, so it stays in step with the testdata.
func goTemplateFor(b *testing.B, html string) string {
	translations := map[string]string{
		`{{ issue.title | default: "Monthly dispatch" }}`:       `{{ default "Monthly dispatch" .issue.title }}`,
		`{{ contact.properties.firstName | default: "there" }}`: `{{ default "there" .contact.properties.firstName }}`,
		`{{ items | size }}`:                                   `{{ len .items }}`,
		`{{ issue.date | default: "This month" }}`:             `{{ default "This month" .issue.date }}`,
		`{{ issue.number | default: 1 }}`:                      `{{ default 1 .issue.number }}`,
		`{{ webVersionUrl }}`:                                  `{{ .webVersionUrl }}`,
		`{{ issue.slug }}`:                                     `{{ .issue.slug }}`,
		`{% if contact.properties.memberSince %}`:              `{{ if .contact.properties.memberSince }}`,
		`{{ contact.properties.memberSince | date: "%B %Y" }}`: `{{ .contact.properties.memberSince }}`,
		`{{ contact.properties.discount | default: 10 }}`:      `{{ default 10 .contact.properties.discount }}`,
		`{% else %}`:                             `{{ else }}`,
		`{{ contact.email | url_encode }}`:       `{{ urlencode .contact.email }}`,
		`{% endif %}`:                            `{{ end }}`,
		`{% for item in items %}`:                `{{ range $i, $item := .items }}`,
		`{{ item.imageUrl }}`:                    `{{ $item.imageUrl }}`,
		`{{ item.name }}`:                        `{{ $item.name }}`,
		`{{ item.url }}`:                         `{{ $item.url }}`,
		`{{ forloop.index }}`:                    `{{ inc $i }}`,
		`{{ item.description | truncate: 140 }}`: `{{ truncate 140 $item.description }}`,
		`{{ item.price | prepend: "$" }}`:        `${{ $item.price }}`,
		`{% if item.onSale %}`:                   `{{ if $item.onSale }}`,
		`{% endfor %}`:                           `{{ end }}`,
		`{% for event in events limit: 5 %}`:     `{{ range $event := limit 5 .events }}`,
		`{{ event.date }}`:                       `{{ $event.date }}`,
		`{{ event.url }}`:                        `{{ $event.url }}`,
		`{{ event.title }}`:                      `{{ $event.title }}`,
		`{{ event.store | default: contact.properties.homeStore }}`: `{{ default $.contact.properties.homeStore $event.store }}`,
		`{{ contact.properties.city | default: "you" }}`:            `{{ default "you" .contact.properties.city }}`,
		`{% comment %}`:           `{{/*`,
		`{% endcomment %}`:        `*/}}`,
		`{% capture tierLabel %}`: `{{ $tierLabel := capitalize (default "standard" .contact.properties.tier) }}{{/*`,
		`{{ contact.properties.tier | default: "standard" | capitalize }}`: ``,
		`{% endcapture %}`:                                                   `*/}}`,
		`{% assign perkCount = 0 %}`:                                         `{{ $perkCount := 0 }}{{ $perkCount = 0 }}`,
		`{{ tierLabel }}`:                                                    `{{ $tierLabel }}`,
		`{% case contact.properties.tier %}`:                                 `{{ if false }}`,
		`{% when "summit" %}`:                                                `{{ else if eq .contact.properties.tier "summit" }}`,
		`{% when "trail" %}`:                                                 `{{ else if eq .contact.properties.tier "trail" }}`,
		`{% endcase %}`:                                                      `{{ end }}`,
		`{{ perks.earlyAccessDate | default: "December 1" }}`:                `{{ default "December 1" .perks.earlyAccessDate }}`,
		`{% unless contact.properties.tier == "summit" %}`:                   `{{ if ne .contact.properties.tier "summit" }}`,
		`{{ perks.pointsToNextTier | default: "a few" }}`:                    `{{ default "a few" .perks.pointsToNextTier }}`,
		`{% endunless %}`:                                                    `{{ end }}`,
		`{{ contact.properties.homeStore | url_encode }}`:                    `{{ urlencode .contact.properties.homeStore }}`,
		`{{ contact.properties.homeStore | default: "your nearest store" }}`: `{{ default "your nearest store" .contact.properties.homeStore }}`,
		`{{ account.lastLoginDate | default: "the upgrade" }}`:               `{{ default "the upgrade" .account.lastLoginDate }}`,
		`{{ account.resetExpiresHours | default: 24 }}`:                      `{{ default 24 .account.resetExpiresHours }}`,
		`{{ resetUrl }}`:                                                     `{{ .resetUrl }}`,
		`{{ referralUrl | default: 'https://northwind.example/refer' }}`:     `{{ default "https://northwind.example/refer" .referralUrl }}`,
		`{{ contact.contactId }}`:                                            `{{ .contact.contactId }}`,
		`{{ contact.email }}`:                                                `{{ .contact.email }}`,
		`{{ unsubscribeUrl }}`:                                               `{{ .unsubscribeUrl }}`,
	}
	var out strings.Builder
	rest := html
	for {
		i := strings.IndexAny(rest, "{")
		if i < 0 || i+1 >= len(rest) {
			out.WriteString(rest)
			return out.String()
		}
		if rest[i+1] != '{' && rest[i+1] != '%' {
			out.WriteString(rest[:i+1])
			rest = rest[i+1:]
			continue
		}
		closer := "}}"
		if rest[i+1] == '%' {
			closer = "%}"
		}
		j := strings.Index(rest[i:], closer)
		tok := rest[i : i+j+2]
		tr, ok := translations[tok]
		if !ok {
			b.Fatalf("no html/template translation for %s", tok)
		}
		out.WriteString(rest[:i])
		out.WriteString(tr)
		rest = rest[i+j+2:]
	}
}

// BenchmarkRenderHostile renders the two templates of issue 11, which ran
// for 57 s and built a 256 MiB string before renders had budgets. Each
// stops at its limit; ms/op is the time to get there (cpu-ms/op the CPU
// time, all threads, the garbage collector's included), B/op what it
// allocated, and peak-RSS-MiB the process's peak resident memory so far.
//
//	go test -run '^$' -bench RenderHostile -benchmem -cpu 1 ./internal/render/
func BenchmarkRenderHostile(b *testing.B) {
	for _, bm := range []struct{ name, subject, html string }{
		{"nested-loops", nestedLoops, "<p>x</p>"},
		{"doubling", "s", doubling},
	} {
		b.Run(bm.name, func(b *testing.B) {
			r := NewRenderer(RendererOptions{})
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				if _, err := r.Render(b.Context(), "k", 1, bm.subject, bm.html, nil); !errors.Is(err, liquid.ErrBudget) {
					b.Fatalf("err = %v, want ErrBudget", err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			var ru syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MiB")
		})
	}
}
