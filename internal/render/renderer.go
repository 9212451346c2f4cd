package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	lru "github.com/hashicorp/golang-lru/v2"

	"tidings/internal/render/liquid"
	"tidings/internal/render/sanitize"
)

// Message is one rendered email.
type Message struct {
	Subject string
	HTML    string
	Text    string
}

// RendererOptions configures a Renderer. The zero value is usable.
type RendererOptions struct {
	// CacheSize is how many template versions stay parsed; default 256. A
	// parsed newsletter of 90 KB of HTML takes about 150 KB, the HTML
	// included.
	CacheSize int
	// MaxOutput bounds what Liquid writes for one message (subject, HTML
	// and text together), and the HTML once put together, in bytes;
	// default liquid.DefaultMaxOutput. A message over it fails with a
	// *liquid.LimitError that matches liquid.ErrTooLarge.
	MaxOutput int
	// MaxLoopIterations bounds the iterations of all for and tablerow
	// loops of one message; default liquid.DefaultMaxLoopIterations.
	MaxLoopIterations int
	// MaxStringBytes bounds the bytes of the strings and arrays that
	// filters and capture make for one message; default
	// liquid.DefaultMaxStringBytes.
	MaxStringBytes int
	// MaxRenderTime bounds the time one message takes, within the
	// caller's context; default liquid.DefaultMaxRenderTime.
	MaxRenderTime time.Duration
}

// Renderer renders stored templates for each recipient. Parsed templates are
// cached by (key, version): a version is parsed once and rendered many
// times. It is safe for concurrent use.
type Renderer struct {
	cache   *lru.Cache[cacheKey, *parsed]
	limits  liquid.Limits
	buffers sync.Pool
}

type cacheKey struct {
	key     string
	version int
}

// parsed is one template version, parsed on first use.
type parsed struct {
	once       sync.Once
	subjectSrc string
	htmlSrc    string
	subject    *liquid.Template
	// html renders the HTML when there is no skeleton (see newSkeleton).
	html *liquid.Template
	skel *skeleton
	// text renders the text part directly; nil when it has to be derived
	// from each rendered HTML (see textTemplate).
	text *liquid.Template
	err  error
}

// NewRenderer returns an empty Renderer.
func NewRenderer(opts RendererOptions) *Renderer {
	if opts.CacheSize <= 0 {
		opts.CacheSize = 256
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = liquid.DefaultMaxOutput
	}
	if opts.MaxLoopIterations <= 0 {
		opts.MaxLoopIterations = liquid.DefaultMaxLoopIterations
	}
	if opts.MaxStringBytes <= 0 {
		opts.MaxStringBytes = liquid.DefaultMaxStringBytes
	}
	if opts.MaxRenderTime <= 0 {
		opts.MaxRenderTime = liquid.DefaultMaxRenderTime
	}
	cache, err := lru.New[cacheKey, *parsed](opts.CacheSize)
	if err != nil {
		panic(err) // only for a size <= 0, excluded above
	}
	return &Renderer{
		cache: cache,
		limits: liquid.Limits{LoopIterations: opts.MaxLoopIterations, StringBytes: opts.MaxStringBytes,
			OutputBytes: opts.MaxOutput, RenderTime: opts.MaxRenderTime},
		buffers: sync.Pool{New: func() any { return new(bytes.Buffer) }},
	}
}

// Render renders a template version with vars (from Context.Bindings or
// BindingsForPreview). key must identify the template across tenants (the
// tenant and template ids, say); subject and html are the version's subject
// and Prepared.CompiledHTML, parsed on the version's first render. Variables
// that are missing render as empty strings.
//
// A render has a budget (see RendererOptions and package liquid): a
// template that needs more loop iterations, string bytes, output or time
// than that stops with a *liquid.LimitError naming the limit and the field,
// which matches liquid.ErrBudget. When ctx ends first, the render stops
// with ctx's error.
//
// The HTML is sanitised again when it could need it (mayNeedSanitize), since
// values and Liquid logic can produce markup that was not in the template.
// The text part is what HTMLToText makes of the HTML; to save converting
// every message, it is converted once per version with placeholders for the
// Liquid, and each send fills in the values (see skeleton and textTemplate).
func (r *Renderer) Render(ctx context.Context, key string, version int, subject, html string, vars map[string]any) (Message, error) {
	p, err := r.parsed(key, version, subject, html)
	if err != nil {
		return Message{}, err
	}
	b := liquid.NewBudget(ctx, r.limits)
	defer b.Release()
	return r.renderWith(b, p, b.Bind(vars))
}

// renderWith renders the message with budget b; vars hold b.
func (r *Renderer) renderWith(b liquid.Budget, p *parsed, vars map[string]any) (Message, error) {
	var (
		m   Message
		err error
	)
	if m.Subject, err = r.render(b, p.subject, vars); err != nil {
		return Message{}, fieldError(b, "subject", err)
	}
	m.Subject = oneLine(m.Subject)
	out, err := r.renderHTML(b, p, vars)
	if err != nil {
		return Message{}, fieldError(b, "content", err)
	}
	m.HTML = out.html
	switch {
	case out.sanitize:
		m.HTML = sanitize.Clean(m.HTML)
		m.Text = HTMLToText(m.HTML)
	case p.skel != nil && p.skel.text != nil:
		m.Text = out.text
	case p.text != nil:
		if m.Text, err = r.render(b, p.text, vars); err != nil {
			return Message{}, fieldError(b, "content", err)
		}
		m.Text = tidyText(m.Text)
	default:
		m.Text = HTMLToText(m.HTML)
	}
	return m, nil
}

// fieldError is the error of rendering field: a limit's names the field,
// others say which field failed.
func fieldError(b liquid.Budget, field string, err error) error {
	var limit *liquid.LimitError
	if errors.As(err, &limit) {
		return &liquid.LimitError{Field: field, Limit: limit.Limit, Max: limit.Max}
	}
	if errors.Is(err, liquid.ErrTooLarge) { // the skeleton's HTML, put together
		return &liquid.LimitError{Field: field, Limit: liquid.LimitOutputBytes, Max: int64(b.Limits().OutputBytes)}
	}
	return fmt.Errorf("render %s: %w", field, err)
}

// parsed returns the parsed template version, parsing it if needed.
func (r *Renderer) parsed(key string, version int, subject, html string) (*parsed, error) {
	k := cacheKey{key, version}
	p, ok := r.cache.Get(k)
	// A version's sources never change; if they differ, the caller reused
	// a key and the sources win. Equal strings usually share memory, which
	// makes this comparison cheap.
	if !ok || p.subjectSrc != subject || p.htmlSrc != html {
		fresh := &parsed{subjectSrc: subject, htmlSrc: html}
		if !ok {
			if prev, raced, _ := r.cache.PeekOrAdd(k, fresh); raced && prev.subjectSrc == subject && prev.htmlSrc == html {
				fresh = prev // another goroutine got there first
			}
		} else {
			r.cache.Add(k, fresh)
		}
		p = fresh
	}
	p.once.Do(p.parse)
	return p, p.err
}

func (p *parsed) parse() {
	if p.subject, p.err = parseLiquid("subject", p.subjectSrc); p.err != nil {
		return
	}
	// A version saved under an older sanitiser is sanitised again.
	src, err := sanitize.Again(p.htmlSrc)
	if p.err = err; err != nil {
		return
	}
	if p.html, p.err = parseLiquid("content", src); p.err != nil {
		return
	}
	if p.skel = newSkeleton(src); p.skel != nil {
		p.html = nil // the skeleton renders it from now on
	}
	if p.skel == nil || p.skel.text == nil {
		p.text, _ = textTemplate(src)
	}
}

// renderHTML renders the content, with the skeleton if there is one.
func (r *Renderer) renderHTML(b liquid.Budget, p *parsed, vars map[string]any) (rendered, error) {
	if p.skel == nil {
		html, err := r.render(b, p.html, vars)
		return rendered{html: html, sanitize: sanitize.MayNeed(html)}, err
	}
	var out rendered
	err := r.run(b, p.skel.tmpl, vars, func(buf []byte) (err error) {
		out, err = p.skel.expand(buf, r.limits.OutputBytes, &r.buffers)
		return err
	})
	return out, err
}

// render renders t to a string.
func (r *Renderer) render(b liquid.Budget, t *liquid.Template, vars map[string]any) (string, error) {
	var s string
	err := r.run(b, t, vars, func(buf []byte) error {
		s = string(buf)
		return nil
	})
	return s, err
}

// run renders t with budget b into a pooled buffer and hands the output to
// use, which must not keep it.
func (r *Renderer) run(b liquid.Budget, t *liquid.Template, vars map[string]any, use func([]byte) error) error {
	buf := r.buffers.Get().(*bytes.Buffer)
	defer r.buffers.Put(buf)
	buf.Reset()
	if err := b.Render(t, buf, vars); err != nil {
		return err
	}
	return use(buf.Bytes())
}

// oneLine makes a rendered subject safe for a header: control characters
// (a value with a line break would otherwise end the header) become spaces,
// and runs of spaces one.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
}
