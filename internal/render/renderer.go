package render

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/osteele/liquid"
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
	// MaxOutput bounds the rendered HTML in bytes, against templates whose
	// loops run away; default 10 MiB.
	MaxOutput int
}

// ErrTooLarge is returned when a rendered message exceeds MaxOutput.
var ErrTooLarge = errors.New("render: rendered message too large")

// Renderer renders stored templates for each recipient. Parsed templates are
// cached by (key, version): a version is parsed once and rendered many
// times. It is safe for concurrent use.
type Renderer struct {
	cache     *lru.Cache[cacheKey, *parsed]
	maxOutput int
	buffers   sync.Pool
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
		opts.MaxOutput = 10 << 20
	}
	cache, err := lru.New[cacheKey, *parsed](opts.CacheSize)
	if err != nil {
		panic(err) // only for a size <= 0, excluded above
	}
	return &Renderer{
		cache:     cache,
		maxOutput: opts.MaxOutput,
		buffers:   sync.Pool{New: func() any { return new(bytes.Buffer) }},
	}
}

// Render renders a template version with vars (from Context.Bindings or
// BindingsForPreview). key must identify the template across tenants (the
// tenant and template ids, say); subject and html are the version's subject
// and Prepared.CompiledHTML, parsed on the version's first render. Variables
// that are missing render as empty strings.
//
// The HTML is sanitised again when it could need it (mayNeedSanitize), since
// values and Liquid logic can produce markup that was not in the template.
// The text part is what HTMLToText makes of the HTML; to save converting
// every message, it is converted once per version with placeholders for the
// Liquid, and each send fills in the values (see skeleton and textTemplate).
func (r *Renderer) Render(key string, version int, subject, html string, vars map[string]any) (Message, error) {
	p, err := r.parsed(key, version, subject, html)
	if err != nil {
		return Message{}, err
	}
	var m Message
	if m.Subject, err = r.render(p.subject, vars); err != nil {
		return Message{}, fmt.Errorf("render subject: %w", err)
	}
	m.Subject = oneLine(m.Subject)
	out, err := r.renderHTML(p, vars)
	if err != nil {
		return Message{}, fmt.Errorf("render content: %w", err)
	}
	m.HTML = out.html
	switch {
	case out.sanitize:
		m.HTML = cleanMessage(m.HTML)
		m.Text = HTMLToText(m.HTML)
	case p.skel != nil && p.skel.text != nil:
		m.Text = out.text
	case p.text != nil:
		if m.Text, err = r.render(p.text, vars); err != nil {
			return Message{}, fmt.Errorf("render text: %w", err)
		}
		m.Text = tidyText(m.Text)
	default:
		m.Text = HTMLToText(m.HTML)
	}
	return m, nil
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
	src, err := resanitize(p.htmlSrc)
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
func (r *Renderer) renderHTML(p *parsed, vars map[string]any) (rendered, error) {
	if p.skel == nil {
		html, err := r.render(p.html, vars)
		return rendered{html: html, sanitize: mayNeedSanitize(html)}, err
	}
	var out rendered
	err := r.run(p.skel.tmpl, vars, func(b []byte) (err error) {
		out, err = p.skel.expand(b, r.maxOutput, &r.buffers)
		return err
	})
	return out, err
}

// render renders t to a string.
func (r *Renderer) render(t *liquid.Template, vars map[string]any) (string, error) {
	var s string
	err := r.run(t, vars, func(b []byte) error {
		s = string(b)
		return nil
	})
	return s, err
}

// run renders t into a pooled buffer, stopping at maxOutput, and hands the
// output to use, which must not keep it.
func (r *Renderer) run(t *liquid.Template, vars map[string]any, use func([]byte) error) error {
	buf := r.buffers.Get().(*bytes.Buffer)
	defer r.buffers.Put(buf)
	buf.Reset()
	if err := t.FRender(&limitWriter{buf: buf, left: r.maxOutput}, vars); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return ErrTooLarge
		}
		return err
	}
	return use(buf.Bytes())
}

// limitWriter fails once more than left bytes have been written.
type limitWriter struct {
	buf  *bytes.Buffer
	left int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		return 0, ErrTooLarge
	}
	w.left -= len(p)
	return w.buf.Write(p)
}

// oneLine makes a rendered subject safe for a header: control characters
// (a value with a line break would otherwise end the header) become spaces,
// and runs of spaces one.
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
}
