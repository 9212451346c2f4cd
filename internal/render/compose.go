package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/osteele/liquid/parser"
)

// MaxIncludeDepth bounds how deep includes nest (a template including a
// partial including a partial...): a chain longer than this is refused,
// as a cycle is, before it is compiled.
const MaxIncludeDepth = 8

// Composition is a template's source with its layout and partials in
// place: what is compiled.
type Composition struct {
	// Source is the whole document: the layout with the content where it
	// says {{ content }}, every include replaced by its partial. A partial
	// that does not exist is left out (Missing names it).
	Source string
	// Missing are the partials named (directly or through other partials)
	// that do not exist, sorted; the layout among them when it is missing.
	Missing []string
	// LayoutMissing says the layout itself does not exist: Source is then
	// the content alone, which is a fragment and cannot be compiled.
	LayoutMissing bool
}

// CompositionError is a source whose includes cannot be put in place: an
// include that does not name a partial, a cycle, or nesting deeper than
// MaxIncludeDepth.
type CompositionError struct{ Message string }

func (e *CompositionError) Error() string { return e.Message }

// Compose puts content in its layout (when layout is not "") and every
// {% include 'id' %} in content, the layout and the partials they include
// in place, from partials (id to content). Includes share the variables
// of the template, as Liquid's include does: they are copied in before
// Liquid runs.
func Compose(content, layout string, partials map[string]string) (Composition, error) {
	missing := map[string]bool{}
	var c Composition
	body, err := expand(content, partials, nil, missing)
	if err != nil {
		return c, err
	}
	c.Source = body
	if layout != "" {
		src, ok := partials[layout]
		if !ok {
			missing[layout] = true
			c.LayoutMissing = true
		} else {
			outer, err := expand(src, partials, []string{layout}, missing)
			if err != nil {
				return c, err
			}
			placed, n := placeContent(outer, body)
			if n == 0 {
				return c, &CompositionError{Message: fmt.Sprintf("layout %q has no {{ content }} to put the template in", layout)}
			}
			c.Source = placed
		}
	}
	for k := range missing {
		c.Missing = append(c.Missing, k)
	}
	slices.Sort(c.Missing)
	return c, nil
}

// Includes returns the partials src includes directly, in order, each once;
// an include that does not name a partial with a quoted id is a
// *CompositionError.
func Includes(src string) ([]string, error) {
	var out []string
	raw := false
	for _, t := range parser.Scan(src, parser.SourceLoc{LineNo: 1}, nil) {
		if !isInclude(t, &raw) {
			continue
		}
		id, err := includeID(t)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// includeID is the partial an include tag names: {% include 'footer' %}.
func includeID(t parser.Token) (string, error) {
	a := strings.TrimSpace(t.Args)
	if len(a) >= 2 && (a[0] == '\'' || a[0] == '"') && a[len(a)-1] == a[0] && !strings.ContainsAny(a[1:len(a)-1], "'\" ") {
		return a[1 : len(a)-1], nil
	}
	return "", &CompositionError{Message: fmt.Sprintf("line %d: include takes the quoted id of a partial ({%% include 'footer' %%}), not %q", t.SourceLoc.LineNo, a)}
}

// expand replaces the includes of src, recursively; path is the chain of
// partials being expanded, for cycles and depth.
func expand(src string, partials map[string]string, path []string, missing map[string]bool) (string, error) {
	if !strings.Contains(src, "include") {
		return src, nil
	}
	tokens := parser.Scan(src, parser.SourceLoc{LineNo: 1}, nil)
	var b strings.Builder
	raw := false
	for _, t := range tokens {
		if !isInclude(t, &raw) {
			b.WriteString(t.Source)
			continue
		}
		id, err := includeID(t)
		if err != nil {
			return "", err
		}
		if slices.Contains(path, id) {
			return "", &CompositionError{Message: fmt.Sprintf("partials include each other in a cycle: %s -> %s", strings.Join(path, " -> "), id)}
		}
		if len(path) >= MaxIncludeDepth {
			return "", &CompositionError{Message: fmt.Sprintf("includes nest deeper than %d: %s -> %s", MaxIncludeDepth, strings.Join(path, " -> "), id)}
		}
		p, ok := partials[id]
		if !ok {
			missing[id] = true
			continue
		}
		inner, err := expand(p, partials, append(slices.Clip(path), id), missing)
		if err != nil {
			return "", err
		}
		b.WriteString(inner)
	}
	return b.String(), nil
}

// placeContent puts body where layout says {{ content }}; n is how many
// places there were.
func placeContent(layout, body string) (string, int) {
	var b strings.Builder
	n := 0
	raw := false
	for _, t := range parser.Scan(layout, parser.SourceLoc{LineNo: 1}, nil) {
		isInclude(t, &raw)
		if !raw && t.Type == parser.ObjTokenType && strings.TrimSpace(t.Args) == "content" {
			b.WriteString(body)
			n++
			continue
		}
		b.WriteString(t.Source)
	}
	return b.String(), n
}

// isInclude reports whether t is an include tag outside {% raw %}, which
// raw tracks.
func isInclude(t parser.Token, raw *bool) bool {
	if t.Type != parser.TagTokenType {
		return false
	}
	switch t.Name {
	case "raw":
		*raw = true
	case "endraw":
		*raw = false
	}
	return !*raw && t.Name == "include"
}
