package liquid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"maps"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	osteele "github.com/osteele/liquid"
	"github.com/osteele/liquid/filters"
	"github.com/osteele/liquid/parser"
	lrender "github.com/osteele/liquid/render"
	"github.com/osteele/liquid/tags"
	"github.com/osteele/liquid/values"
)

// Liquid has no resource limits of its own (osteele/liquid's SECURITY.md
// says so): three nested loops over ranges run for minutes, and
// {% assign s = s | append: s %} doubles a string until memory runs out. A
// render here therefore has a budget, after Shopify Liquid's render score,
// assign score and output length, plus a deadline:
//
//   - loop iterations: every iteration of every for and tablerow;
//   - string bytes: the strings and arrays that filters and capture make
//     (assign makes nothing itself: its value is a filter's or shares an
//     existing one);
//   - output bytes: what the template writes;
//   - render time: the caller's context, and at most MaxRenderTime.
//
// The engine gives no hook for any of these, so they are added from
// outside, without forking it:
//
//   - Loops: after parsing, a tick tag is put first in the body of every for
//     and tablerow (instrument). The library's loop renders its body once
//     per iteration, so the tick counts iterations and checks the deadline,
//     and its error ends the loop.
//   - Capture: every capture block is swapped for one that renders into a
//     writer charging the budget, so a capture around a loop cannot fill
//     memory before it ends.
//   - Filters: a filter sees only its arguments, so each render uses its
//     own copy of the engine's configuration (lrender.Render takes one) in
//     which the filters that can make large strings or arrays are wrapped
//     by closures charging that render's budget, before the allocation when
//     its size can be predicted (append, replace, join, split, a range made
//     into an array) and after otherwise (the result is then at most a
//     small multiple of values already charged).
//   - Tags find their render's budget in the bindings, under a name no
//     template can spell.
//   - Once the budget is spent every check fails, writes included; the
//     library's tablerow panics on a failed write, and that panic is taken
//     for the budget's error (Budget.Render).
//
// This leans on exported parts of osteele/liquid that are not promises
// about its loops (BlockNode.Body, Template.GetRoot, render.Render with a
// Config); TestBudgetLimits and TestBudgetSameOutput fail if an upgrade
// changes how they behave. Budgets and their configurations are pooled: a
// render builds none.

// ErrBudget is what every *LimitError matches with errors.Is: the template
// needed more than a render may use. It is the template's fault, not the
// service's, and retrying does not help.
var ErrBudget = errors.New("render: template exceeds a rendering limit")

// ErrTooLarge is matched by the *LimitError of a render whose output went
// over its budget; a caller that puts output together after Liquid (the
// render pipeline's skeleton) returns it for the same limit.
var ErrTooLarge = errors.New("render: rendered message too large")

// Limit names, as LimitError.Limit reports them.
const (
	LimitLoopIterations = "loop iterations"
	LimitStringBytes    = "string bytes"
	LimitOutputBytes    = "output bytes"
	LimitRenderTime     = "render time"
)

// LimitError says which limit a render ran into. It matches ErrBudget, and
// ErrTooLarge when the limit is the output's.
type LimitError struct {
	// Field is the part being rendered ("subject", "content"), when the
	// caller names it; the budget itself does not know.
	Field string
	// Limit is one of the Limit* names.
	Limit string
	// Max is the limit: a count, bytes, or a time.Duration for render time.
	Max int64
}

// Message describes the limit without the field, for a per-field error.
func (e *LimitError) Message() string {
	switch e.Limit {
	case LimitLoopIterations:
		return fmt.Sprintf("stopped rendering: more than %d loop iterations (the limit per message)", e.Max)
	case LimitStringBytes:
		return fmt.Sprintf("stopped rendering: filters, assign and capture made more than %d bytes of strings (the limit per message)", e.Max)
	case LimitOutputBytes:
		return fmt.Sprintf("stopped rendering: output longer than %d bytes (the limit per message)", e.Max)
	case LimitRenderTime:
		return fmt.Sprintf("stopped rendering: took longer than %s (the limit per message)", time.Duration(e.Max))
	}
	return "stopped rendering: " + e.Limit + " limit"
}

func (e *LimitError) Error() string {
	if e.Field == "" {
		return "render: " + e.Message()
	}
	return "render " + e.Field + ": " + e.Message()
}

// Is makes a LimitError match ErrBudget, and ErrTooLarge for output.
func (e *LimitError) Is(target error) bool {
	return target == ErrBudget || (target == ErrTooLarge && e.Limit == LimitOutputBytes)
}

// Limits bound one render: everything rendered with one Budget (for a
// message, its subject, HTML and text together).
type Limits struct {
	LoopIterations int
	StringBytes    int
	OutputBytes    int
	RenderTime     time.Duration
}

// Defaults of Limits (the render pipeline's RendererOptions use them).
const (
	DefaultMaxLoopIterations = 100_000
	DefaultMaxStringBytes    = 10 << 20
	DefaultMaxOutput         = 10 << 20
	DefaultMaxRenderTime     = 2 * time.Second
)

// budgetKey is the binding under which tags find their render's budget. It
// is not an identifier, so no template can read or assign it.
const budgetKey = "\x00budget"

// arrayElemBytes is what an array element is charged: an interface value.
const arrayElemBytes = 16

// Budget is one render's budget: the templates rendered with it share its
// limits. Take one with NewBudget, bind it into the variables (Bind),
// render with it (Render) and give it back (Release). It is used by one
// goroutine at a time.
//
// A Budget is a handle: the budget itself, the value bound where tags find
// it, has only unexported methods, so even if a template could reach it
// (Liquid calls a value's exported methods), it could call none of them.
type Budget struct{ b *budget }

// budget is what is left of one render's limits.
type budget struct {
	limits     Limits
	iterations int // left
	bytes      int // left
	output     int // left
	done       <-chan struct{}
	ctx        context.Context
	deadline   time.Time
	polls      int
	err        error // the first limit hit; every later check returns it

	// cfg and escapeCfg are the engine's configuration with filters that
	// charge this budget; escapeCfg also writes every value through
	// escape, the escaping of the template being rendered (ParseDerived).
	cfg, escapeCfg lrender.Config
	escape         func(string) string
	// out is the writer of the run under way (one at a time).
	out outputWriter
}

var budgets = sync.Pool{New: func() any {
	b := new(budget)
	b.cfg = budgetConfig(b, false)
	b.escapeCfg = budgetConfig(b, true)
	return b
}}

// NewBudget takes a budget from the pool for a render under ctx: the
// render stops when ctx ends, as when a limit of l is reached.
func NewBudget(ctx context.Context, l Limits) Budget {
	b := budgets.Get().(*budget)
	b.limits = l
	b.iterations, b.bytes, b.output = l.LoopIterations, l.StringBytes, l.OutputBytes
	b.ctx, b.done = ctx, ctx.Done()
	b.deadline = time.Now().Add(l.RenderTime)
	b.polls, b.err = 0, nil
	_ = b.check() // a render whose context has ended does not start
	return Budget{b}
}

// Release gives the budget back to the pool; it must not be used after.
func (h Budget) Release() { h.b.release() }

// Limits are the limits the budget started with.
func (h Budget) Limits() Limits { return h.b.limits }

// Bind returns vars with the budget added where tags find it; vars stay as
// they are. Render with what it returns, or loops and capture go
// uncharged.
func (h Budget) Bind(vars map[string]any) map[string]any {
	bound := make(map[string]any, len(vars)+1)
	maps.Copy(bound, vars)
	bound[budgetKey] = h.b
	return bound
}

// Render renders t with vars (from Bind) into buf, charging the budget.
// Once any limit is reached, this and every later Render of the budget
// return its *LimitError (or the context's error), whatever Liquid made of
// it on the way out.
func (h Budget) Render(t *Template, buf *bytes.Buffer, vars map[string]any) error {
	b := h.b
	if b.err != nil { // spent, or its context ended: do not start
		return b.err
	}
	cfg := &b.cfg
	if t.escape != nil {
		cfg, b.escape = &b.escapeCfg, t.escape
	}
	b.out = outputWriter{buf: buf, b: b}
	err := renderBudgeted(b, t.t, &b.out, vars, *cfg)
	b.out.buf, b.escape = nil, nil
	if b.err != nil { // also when a filter's "" let the render end
		return b.err
	}
	return err
}

// renderBudgeted renders t. tablerow panics when a write fails (the
// library's tableRowDecorator), as writes do once the budget is spent: such
// a panic is the budget's error. Any other panic is a bug and goes on.
func renderBudgeted(b *budget, t *osteele.Template, w io.Writer, vars map[string]any, cfg lrender.Config) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if b.err == nil {
				panic(p)
			}
			err = b.err
		}
	}()
	if err := lrender.Render(t.GetRoot(), w, vars, cfg); err != nil {
		return err
	}
	return nil
}

// release returns b to the pool.
func (b *budget) release() {
	b.ctx, b.done = nil, nil
	budgets.Put(b)
}

// fail records the first limit hit.
func (b *budget) fail(limit string, max int64) error {
	if b.err == nil {
		b.err = &LimitError{Limit: limit, Max: max}
	}
	return b.err
}

// poll checks the context and the clock at every 16th call; it is called
// at every loop iteration, budgeted filter, capture and write, so a render
// notices within a few of those that its time is up.
func (b *budget) poll() error {
	if b.err != nil {
		return b.err
	}
	if b.polls++; b.polls&15 != 0 {
		return nil
	}
	return b.check()
}

// check ends the render when its context has ended or its time is up.
func (b *budget) check() error {
	select {
	case <-b.done:
		b.err = fmt.Errorf("render: %w", context.Cause(b.ctx))
		return b.err
	default:
	}
	if time.Now().After(b.deadline) {
		return b.fail(LimitRenderTime, int64(b.limits.RenderTime))
	}
	return nil
}

// iterate charges one loop iteration.
func (b *budget) iterate() error {
	if b.iterations--; b.iterations < 0 {
		return b.fail(LimitLoopIterations, int64(b.limits.LoopIterations))
	}
	return b.poll()
}

// grow charges n bytes of strings or arrays made.
func (b *budget) grow(n int) error {
	if n > b.bytes {
		b.bytes = -1
		return b.fail(LimitStringBytes, int64(b.limits.StringBytes))
	}
	b.bytes -= n
	return b.poll()
}

// write charges n bytes of output.
func (b *budget) write(n int) error {
	if n > b.output {
		return b.fail(LimitOutputBytes, int64(b.limits.OutputBytes))
	}
	b.output -= n
	return b.poll()
}

// made charges a string a filter made and returns it, or "" when that is
// over budget (b.err says so).
func (b *budget) made(s string) string {
	if b.grow(len(s)) != nil {
		return ""
	}
	return s
}

// budgetOf finds the render's budget in a tag's context; nil outside
// Budget.Render (CheckFilters renders with the engine itself), or when the
// variables were not bound.
func budgetOf(ctx lrender.Context) *budget {
	b, _ := ctx.Get(budgetKey).(*budget)
	return b
}

// outputWriter is a render's output: it charges the output budget.
type outputWriter struct {
	buf *bytes.Buffer
	b   *budget
}

func (w *outputWriter) Write(p []byte) (int, error) {
	if err := w.b.write(len(p)); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

// captureWriter collects a capture block, charging the string budget.
type captureWriter struct {
	s strings.Builder
	b *budget
}

func (w *captureWriter) Write(p []byte) (int, error) {
	if w.b != nil {
		if err := w.b.grow(len(p)); err != nil {
			return 0, err
		}
	}
	return w.s.Write(p)
}

// tick counts one loop iteration; instrument puts it first in every loop
// body.
func tick(_ io.Writer, ctx lrender.Context) error {
	if b := budgetOf(ctx); b != nil {
		return b.iterate()
	}
	return nil
}

// capture is the capture tag, collecting through a captureWriter. The
// library's own capture compiler has checked the variable name at parse.
func capture(_ io.Writer, ctx lrender.Context) error {
	w := &captureWriter{b: budgetOf(ctx)}
	if err := ctx.RenderChildren(w); err != nil {
		return err
	}
	ctx.Set(strings.TrimSpace(ctx.TagArgs()), w.s.String())
	return nil
}

// tickNode and captureNode are compiled once, by a configuration of their
// own, and copied into templates by instrument.
var tickNode, captureNode = func() (*lrender.TagNode, *lrender.BlockNode) {
	cfg := lrender.NewConfig()
	cfg.AddTag("tick", func(string) (func(io.Writer, lrender.Context) error, error) { return tick, nil })
	cfg.AddBlock("capture").Renderer(capture)
	root, err := cfg.Compile("{% tick %}{% capture x %}{% endcapture %}", parser.SourceLoc{})
	if err != nil {
		panic(err)
	}
	seq := root.(*lrender.SeqNode)
	return seq.Children[0].(*lrender.TagNode), seq.Children[1].(*lrender.BlockNode)
}()

// instrument adds the budget checks to a parsed template: a tick first in
// every for and tablerow body, and the budgeted capture in place of every
// capture.
func instrument(t *osteele.Template) {
	instrumentNodes([]lrender.Node{t.GetRoot()})
}

func instrumentNodes(nodes []lrender.Node) {
	for i, n := range nodes {
		switch n := n.(type) {
		case *lrender.SeqNode:
			instrumentNodes(n.Children)
		case *lrender.BlockNode:
			instrumentNodes(n.Body)
			for _, c := range n.Clauses {
				instrumentNodes(c.Body)
			}
			switch n.Name {
			case "for", "tablerow":
				n.Body = append([]lrender.Node{tickNode}, n.Body...)
			case "capture":
				c := *captureNode // its renderer, with n's source, args and body
				c.Token, c.Body, c.Clauses = n.Token, n.Body, n.Clauses
				nodes[i] = &c
			}
		}
	}
}

// budgetConfig is the configuration a render with budget b uses: the
// engine's tags (their renderers come from the parsed template; the
// configuration only has to know the blocks) and filters charging b; with
// escape, values are written through b.escape.
func budgetConfig(b *budget, escape bool) lrender.Config {
	cfg := lrender.NewConfig()
	filters.AddStandardFilters(budgetFilters{&cfg, b})
	tags.AddStandardTags(&cfg)
	cfg.UnregisterTag("include")
	cfg.UnregisterTag("render")
	if escape {
		cfg.SetAutoEscapeReplacer(escaper{b})
	}
	return cfg
}

// escaper writes each value through its budget's escape.
type escaper struct{ b *budget }

func (e escaper) WriteString(w io.Writer, s string) (int, error) {
	if e.b == nil || e.b.escape == nil {
		return io.WriteString(w, s)
	}
	return io.WriteString(w, e.b.escape(s))
}

// budgetFilters registers the standard filters, wrapping those that can
// make large strings or arrays.
type budgetFilters struct {
	cfg *lrender.Config
	b   *budget
}

func (f budgetFilters) AddFilter(name string, fn any) {
	if wrap, ok := budgetedFilters[name]; ok {
		fn = wrap(f.b, fn)
	} else if arrayFilters[name] {
		fn = arrayFilter(f.b, fn)
	}
	f.cfg.AddFilter(name, fn)
}

// budgetedFilters wrap the string filters that can make strings longer
// than their input. They take strings as any and convert them with str:
// Liquid would copy each string argument twice on the way in (with
// fmt.Sprint), which for large strings costs more than the filter. The
// string filters return no error, which saves Liquid's reflection an
// allocation on every call: over budget, they return "" and the budget's
// error, kept in b.err, ends the render at its next check.
var budgetedFilters = map[string]func(b *budget, fn any) any{
	"append": func(b *budget, _ any) any {
		return func(sv, suffixv any) string {
			s, suffix := str(sv), str(suffixv)
			if b.grow(len(s)+len(suffix)) != nil {
				return ""
			}
			return s + suffix
		}
	},
	"prepend": func(b *budget, _ any) any {
		return func(sv, prefixv any) string {
			s, prefix := str(sv), str(prefixv)
			if b.grow(len(prefix)+len(s)) != nil {
				return ""
			}
			return prefix + s
		}
	},
	"replace": func(b *budget, _ any) any {
		return func(sv, oldv, newv any) string {
			s, old, new := str(sv), str(oldv), str(newv)
			if b.grow(replacedLen(s, old, new, -1)) != nil {
				return ""
			}
			return strings.ReplaceAll(s, old, new)
		}
	},
	"replace_first": replaceOnce,
	"replace_last":  replaceOnce,
	"newline_to_br": func(b *budget, fn any) any {
		f := fn.(func(string) string)
		return func(sv any) string {
			s := str(sv)
			if b.grow(replacedLen(s, "\n", "<br />", -1)) != nil {
				return ""
			}
			return f(s)
		}
	},
	"join": func(b *budget, fn any) any {
		return func(a any, sep func(string) string) (any, error) {
			n, err := charged(b, a)
			if err != nil {
				return nil, err
			}
			// The separators alone, before Go allocates them n times.
			if err := b.grow(max(n-1, 0) * len(sep(" "))); err != nil {
				return nil, err
			}
			return values.Call(reflect.ValueOf(fn), []any{a, sep(" ")})
		}
	},
	"split": func(b *budget, fn any) any {
		f := fn.(func(string, string) any)
		return func(sv, sepv any) (any, error) {
			s, sep := str(sv), str(sepv)
			n := strings.Count(s, sep) + 1
			if sep == "" {
				n = utf8.RuneCountInString(s)
			}
			if err := b.grow(n * arrayElemBytes); err != nil {
				return nil, err
			}
			return f(s, sep), nil
		}
	},
	"escape":        stringAfter(html.EscapeString),
	"url_encode":    stringAfter(url.QueryEscape),
	"escape_once":   stringAfter2,
	"upcase":        stringAfter2,
	"downcase":      stringAfter2,
	"capitalize":    stringAfter2,
	"truncate":      truncated,
	"truncatewords": truncated,
	"date": func(b *budget, fn any) any {
		f := fn.(func(time.Time, func(string) string) (string, error))
		return func(t time.Time, format func(string) string) (string, error) {
			out, err := f(t, format)
			if err != nil {
				return out, err
			}
			return out, b.grow(len(out))
		}
	},
	"json": func(b *budget, fn any) any {
		f := fn.(func(any) any)
		return func(a any) (any, error) {
			if _, err := charged(b, a); err != nil {
				return nil, err
			}
			out := f(a)
			return out, b.grow(values.Length(out))
		}
	},
	"inspect": func(b *budget, fn any) any {
		f := fn.(func(any) string)
		return func(a any) (string, error) {
			if _, err := charged(b, a); err != nil {
				return "", err
			}
			out := f(a)
			return out, b.grow(len(out))
		}
	},
}

// stringAfter wraps a one-argument string filter whose result is at most a
// few times its input's length, charging the result.
func stringAfter(f func(string) string) func(*budget, any) any {
	return func(b *budget, _ any) any {
		return func(s any) string { return b.made(f(str(s))) }
	}
}

// stringAfter2 is stringAfter for the filters declared with an unused
// second string argument.
func stringAfter2(b *budget, fn any) any {
	f := fn.(func(string, string) string)
	return func(s, x any) string { return b.made(f(str(s), str(x))) }
}

// truncated wraps truncate and truncatewords (declared alike), charging
// the result: a long ellipsis makes it longer than its input.
func truncated(b *budget, fn any) any {
	f := fn.(func(string, func(int) int, func(string) string) string)
	return func(s any, length func(int) int, ellipsis func(string) string) string {
		return b.made(f(str(s), length, ellipsis))
	}
}

func replaceOnce(b *budget, fn any) any {
	f := fn.(func(string, string, string) string)
	return func(sv, oldv, newv any) string {
		s, old, new := str(sv), str(oldv), str(newv)
		if b.grow(replacedLen(s, old, new, 1)) != nil {
			return ""
		}
		return f(s, old, new)
	}
}

// str converts a filter argument to a string as Liquid would, without
// copying one that is a string already.
func str(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case nil:
		return ""
	}
	return values.MustConvert(v, stringType).(string)
}

var stringType = reflect.TypeFor[string]()

// replacedLen is the length of s with up to n (all when n < 0) occurrences
// of old replaced by new, computed without making it.
func replacedLen(s, old, new string, n int) int {
	count := strings.Count(s, old)
	if n >= 0 {
		count = min(count, n)
	}
	return len(s) + count*(len(new)-len(old))
}

// arrayFilters take arrays. Liquid converts a range such as (1..100000000)
// to an array before calling them, so they are wrapped to charge their
// array arguments before that happens.
var arrayFilters = map[string]bool{
	"compact": true, "concat": true, "map": true, "reverse": true, "sort": true, "first": true,
	"last": true, "uniq": true, "where": true, "sum": true, "sort_natural": true,
}

// arrayFilter charges fn's array-like arguments and result, then calls fn
// as Liquid would have.
func arrayFilter(b *budget, fn any) any {
	f := reflect.ValueOf(fn)
	return func(in any, args ...any) (any, error) {
		if _, err := charged(b, in); err != nil {
			return nil, err
		}
		for _, a := range args {
			if _, err := charged(b, a); err != nil {
				return nil, err
			}
		}
		out, err := values.Call(f, append([]any{in}, args...))
		if err != nil {
			return nil, err
		}
		_, err = charged(b, out)
		return out, err
	}
}

// charged charges an array (arrayElemBytes an element) or a string (its
// length), returning the array's length.
func charged(b *budget, v any) (int, error) {
	var n int
	switch v := v.(type) {
	case nil:
		return 0, nil
	case string:
		return 0, b.grow(len(v))
	case values.Range:
		n = v.Len()
	case []any:
		n = len(v)
	default:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
			n = rv.Len()
		}
	}
	if n > b.bytes/arrayElemBytes { // before n*arrayElemBytes can overflow
		return n, b.grow(b.bytes + 1)
	}
	return n, b.grow(max(n, 0) * arrayElemBytes)
}
