package templates_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"tidings/internal/render"
	"tidings/internal/templates"
	"tidings/queries"
)

// countingMJML counts the MJML compiles it passes on.
type countingMJML struct {
	c render.Compiler
	n atomic.Int64
}

func (m *countingMJML) Compile(ctx context.Context, src string) (string, error) {
	m.n.Add(1)
	return m.c.Compile(ctx, src)
}

// The same newsletter twice: written out whole, and as a template in a
// layout that includes a header and a footer partial.
const (
	benchHeader = `<mj-section><mj-column><mj-image src="https://example.com/logo.png" alt="ACME" width="120px" /><mj-text font-size="20px">ACME weekly for {{ contact.firstName }}</mj-text></mj-column></mj-section>`
	benchFooter = `<mj-section><mj-column><mj-text font-size="11px">You get this because you signed up. <a href="{{ unsubscribeUrl }}">Unsubscribe</a>. ACME Inc., 1 Main St.</mj-text></mj-column></mj-section>`
	benchLayout = `<mjml><mj-head><mj-title>ACME</mj-title><mj-style>.h { color: #123456; }</mj-style></mj-head><mj-body>{% include 'header' %}{{ content }}{% include 'footer' %}</mj-body></mjml>`
	benchBody   = `<mj-section><mj-column><mj-text css-class="h">Hello {{ contact.firstName }}, here is your week.</mj-text>` +
		`<mj-text>{% for item in items %}<p><a href="{{ item.url }}">{{ item.title }}</a></p>{% endfor %}</mj-text>` +
		`<mj-button href="https://example.com/offers?u={{ contact.contactId }}">See the offers</mj-button></mj-column></mj-section>`
)

// BenchmarkRenderLayoutAndPartials renders, per recipient, a message whose
// template has a layout and two partials, and the same message written out
// whole, alternately in one run. It reports both, their ratio (whole ns /
// composed ns: 1 is as fast, the target is at least 0.8) and the MJML
// compiles made while rendering (the target is none), and fails when
// either target is missed.
//
//	go test ./internal/templates -run '^$' -bench RenderLayoutAndPartials -benchtime 20000x
func BenchmarkRenderLayoutAndPartials(b *testing.B) {
	ctx := context.Background()
	bd := setup(b)
	mj := &countingMJML{c: testPool(b)}
	bd.store.Compiler = templates.Prepare{MJML: mj}
	put := func(id, content string) {
		if _, _, err := bd.store.PutPartial(ctx, bd.tenant, id, content); err != nil {
			b.Fatal(err)
		}
	}
	put("header", benchHeader)
	put("footer", benchFooter)
	put("layout", benchLayout)
	whole := `<mjml><mj-head><mj-title>ACME</mj-title><mj-style>.h { color: #123456; }</mj-style></mj-head><mj-body>` +
		benchHeader + benchBody + benchFooter + `</mj-body></mjml>`
	if _, _, err := bd.store.Put(ctx, bd.tenant, "whole", create("Whole", "Your week, {{ contact.firstName }}", whole)); err != nil {
		b.Fatal(err)
	}
	p := create("Composed", "Your week, {{ contact.firstName }}", benchBody)
	p.Layout, p.SetLayout = ptr("layout"), true
	if _, _, err := bd.store.Put(ctx, bd.tenant, "composed", p); err != nil {
		b.Fatal(err)
	}
	wholeT, err := bd.store.Get(ctx, bd.tenant, "whole")
	if err != nil {
		b.Fatal(err)
	}
	composedT, err := bd.store.Get(ctx, bd.tenant, "composed")
	if err != nil {
		b.Fatal(err)
	}
	items := []any{}
	for i := range 5 {
		items = append(items, map[string]any{"url": "https://example.com/a/" + strconv.Itoa(i), "title": "Article " + strconv.Itoa(i)})
	}
	rc := func(i int) render.Context {
		return render.Context{Variables: map[string]any{"items": items}, UnsubscribeURL: "https://t.example/u/" + strconv.Itoa(i),
			Contact: &render.Contact{ContactID: "cnt_" + strconv.Itoa(i), Email: "a@example.com",
				Properties: map[string]any{"firstName": "Ann" + strconv.Itoa(i)}}}
	}
	// The two make the same message.
	a, err := bd.renderer.RenderCurrent(ctx, bd.tenant, wholeT, rc(0))
	if err != nil {
		b.Fatal(err)
	}
	c, err := bd.renderer.RenderCurrent(ctx, bd.tenant, composedT, rc(0))
	if err != nil {
		b.Fatal(err)
	}
	if a.HTML != c.HTML || a.Text != c.Text || a.Subject != c.Subject {
		b.Fatalf("the composed message differs from the whole one:\n%s\n---\n%s", a.HTML, c.HTML)
	}
	compiles := mj.n.Load()
	var tWhole, tComposed time.Duration
	b.ResetTimer()
	timed := func(t queries.Template, i int) time.Duration {
		start := time.Now()
		if _, err := bd.renderer.RenderCurrent(ctx, bd.tenant, t, rc(i)); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for i := 0; b.Loop(); i++ {
		// Alternating which goes first, so neither always finds the
		// caches warmed by the other.
		if i%2 == 0 {
			tWhole += timed(wholeT, i)
			tComposed += timed(composedT, i)
		} else {
			tComposed += timed(composedT, i)
			tWhole += timed(wholeT, i)
		}
	}
	n := float64(b.N)
	ratio := float64(tWhole) / float64(tComposed)
	during := mj.n.Load() - compiles
	b.ReportMetric(float64(tWhole.Nanoseconds())/n, "whole-ns/msg")
	b.ReportMetric(float64(tComposed.Nanoseconds())/n, "composed-ns/msg")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(float64(during), "compiles")
	if during != 0 {
		b.Fatalf("%d MJML compiles while rendering: want none per recipient", during)
	}
	if b.N >= 1000 && ratio < 0.8 {
		b.Fatalf("composed messages render at %.2f of the whole one's speed, want at least 0.8", ratio)
	}
}
