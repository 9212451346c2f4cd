package templates

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"tidings/internal/apperr"
	"tidings/internal/mjml"
	"tidings/internal/render"
	"tidings/internal/render/liquid"
	"tidings/internal/render/sanitize"
	"tidings/queries"
)

// built is what a template's (or a locale version's) source becomes once
// its layout and partials are in place and it is compiled: what is stored.
type built struct {
	// Content is the source as stored: sanitised, otherwise as given;
	// raw HTML with neither layout nor includes wrapped in MJML.
	Content string
	// HTML is the compiled message; "" while its layout is missing.
	HTML string
	// Vars are the variables subject and the whole message read.
	Vars []string
	// Refs are the partials the source names: its layout first, then
	// what it includes.
	Refs []string
	// Missing are the partials it reaches that do not exist.
	Missing []string
}

// partialSet is a tenant's partials as includes see them: id to content,
// and id to the partials each includes.
type partialSet struct {
	content map[string]string
	refs    map[string][]string
}

// loadPartials reads every partial of the tenant through q (in or out of
// a transaction).
func loadPartials(ctx context.Context, q *queries.Queries, tenantID string) (partialSet, error) {
	rows, err := q.PartialAll(ctx, tenantID)
	if err != nil {
		return partialSet{}, err
	}
	ps := partialSet{content: make(map[string]string, len(rows)), refs: make(map[string][]string, len(rows))}
	for _, r := range rows {
		ps.content[r.ID] = r.Content
		ps.refs[r.ID] = r.Refs
	}
	return ps, nil
}

// reaches reports whether refs lead to partial id, directly or through the
// partials they include.
func (ps partialSet) reaches(refs []string, id string) bool {
	seen := map[string]bool{}
	todo := slices.Clone(refs)
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if p == id {
			return true
		}
		if !seen[p] {
			seen[p] = true
			todo = append(todo, ps.refs[p]...)
		}
	}
	return false
}

// build compiles subject and content, in layout when it is not nil, with
// the tenant's partials in place. A template whose source names neither
// layout nor include compiles as it always did. A partial that does not
// exist yet is no error here (ADDENDUM 24: it may be saved first): it is
// listed in Missing, and a message fails until it exists.
func build(ctx context.Context, c Compiler, ps partialSet, subject, content string, layout *string) (built, error) {
	includes, err := render.Includes(content)
	if err != nil {
		return built{}, apperr.Invalid("content", err.Error())
	}
	if layout == nil && len(includes) == 0 {
		out, err := c.Compile(ctx, subject, content)
		if err != nil {
			return built{}, err
		}
		return built{Content: out.Content, HTML: out.HTML, Vars: out.RequiredVariables, Refs: []string{}}, nil
	}
	var b built
	if layout != nil {
		b.Refs = append(b.Refs, *layout)
	}
	for _, id := range includes {
		if !slices.Contains(b.Refs, id) {
			b.Refs = append(b.Refs, id)
		}
	}
	mjmlSource := sanitize.IsMJML(content) || hasMJMLTag(content)
	if layout != nil {
		if l, ok := ps.content[*layout]; ok {
			if err := sameKind(l, content); err != nil {
				return built{}, err
			}
		}
	}
	clean := sanitize.HTML
	if mjmlSource {
		clean = sanitize.MJML
		if msgs := render.WellFormed(content); len(msgs) > 0 {
			return built{}, mjmlError(msgs)
		}
	}
	own, _ := clean(content)
	b.Content = own
	if layout == nil && !mjmlSource && !render.IsDocument(own) {
		b.Content = render.WrapHTML(own)
	}
	name := ""
	if layout != nil {
		name = *layout
	}
	comp, err := render.Compose(b.Content, name, ps.content)
	if err != nil {
		return built{}, apperr.Invalid("content", err.Error())
	}
	b.Missing = nonNil(comp.Missing)
	if comp.LayoutMissing {
		// A fragment without its layout cannot be compiled: its Liquid is
		// checked, and the message is compiled once the layout exists.
		vars, err := liquidVars(subject, comp.Source)
		if err != nil {
			return built{}, err
		}
		b.Vars = vars
		return b, nil
	}
	out, err := c.Compile(ctx, subject, comp.Source)
	if err != nil {
		return built{}, err
	}
	b.HTML, b.Vars = out.HTML, out.RequiredVariables
	return b, nil
}

// sameKind checks that a template's content can go in its layout: an
// MJML layout takes MJML elements (not a whole document), an HTML layout
// HTML (ADDENDUM 24: layout and template are of one kind).
func sameKind(layout, content string) error {
	switch {
	case sanitize.IsMJML(layout) && (sanitize.IsMJML(content) || render.IsDocument(content)):
		return apperr.Invalid("content", "the layout is an MJML document: the content goes inside it, so it holds MJML elements (<mj-section>...), not a whole document")
	case !sanitize.IsMJML(layout) && (sanitize.IsMJML(content) || hasMJMLTag(content)):
		return apperr.Invalid("content", "the layout is HTML: the content must be HTML too, not MJML")
	}
	return nil
}

// hasMJMLTag reports whether s holds an MJML element: a fragment of MJML.
func hasMJMLTag(s string) bool {
	return strings.Contains(strings.ToLower(s), "<mj-")
}

// liquidVars checks the Liquid of subject and content and returns the
// variables they read.
func liquidVars(subject, content string) ([]string, error) {
	st, err := liquid.Parse("subject", subject)
	if err != nil {
		return nil, liquidError(err)
	}
	ct, err := liquid.Parse("content", content)
	if err != nil {
		return nil, liquidError(err)
	}
	return liquid.RequiredVariables(st, ct), nil
}

func liquidError(err error) error {
	var le *liquid.Error
	if errors.As(err, &le) {
		e := apperr.Invalid(le.Field, le.Messages[0])
		e.Details["fields"].(map[string]any)[le.Field] = le.Messages
		return e
	}
	return err
}

// mjmlError is the VALIDATION_ERROR of MJML that is not well formed,
// shaped as MJML's own rejections are (details.mjml with lines).
func mjmlError(msgs []mjml.Message) error {
	texts := make([]string, len(msgs))
	for i, m := range msgs {
		texts[i] = m.String()
	}
	e := apperr.Invalid("content", texts[0])
	e.Details["fields"].(map[string]any)["content"] = texts
	e.Details["mjml"] = msgs
	return e
}

// memoCompiler remembers compiles by their input, so what was compiled
// before a transaction is not compiled again inside it (MJML runs on a
// node process for tens of milliseconds and must not while rows are
// locked), and only what changed meanwhile is.
type memoCompiler struct {
	c    Compiler
	done map[[2]string]memoResult
}

type memoResult struct {
	out Compiled
	err error
}

func newMemo(c Compiler) *memoCompiler {
	return &memoCompiler{c: c, done: map[[2]string]memoResult{}}
}

func (m *memoCompiler) Compile(ctx context.Context, subject, content string) (Compiled, error) {
	k := [2]string{subject, content}
	if r, ok := m.done[k]; ok {
		return r.out, r.err
	}
	out, err := m.c.Compile(ctx, subject, content)
	if err == nil || isInvalid(err) {
		m.done[k] = memoResult{out, err}
	}
	return out, err
}

// dependentError is a template a partial change breaks: the partial is
// refused, naming it.
func dependentError(what string, err error) error {
	msg := err.Error()
	if e, ok := apperr.As(err); ok {
		msg = e.Message
		if f, ok := e.Details["fields"].(map[string]any); ok {
			for _, v := range f {
				if l, ok := v.([]string); ok && len(l) > 0 {
					msg = strings.Join(l, "; ")
				}
			}
		}
	}
	return apperr.Invalid("content", fmt.Sprintf("%s does not compile with this change: %s", what, msg))
}
