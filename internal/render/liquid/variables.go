package liquid

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	liquidrender "github.com/osteele/liquid/render"
)

// RequiredVariables returns the dotted paths of the variables the parsed
// templates read (a template's subject and content, say), sorted and unique
// (never nil):
// ["contact.properties.firstName", "items", "resetUrl"] for
//
//	{{ contact.properties.firstName }}
//	{% for item in items %}{{ item.name }}{% endfor %}
//	<a href="{{ resetUrl | default: '#' }}">
//
// Variables in conditions, loop collections and limits, filter arguments and
// assignments count; filters do not. Loop variables (and forloop) inside their
// loop, and names the template assigns or captures once assigned, are left
// out. A path stops at an index computed at run time (a[i] gives "a" and "i")
// or an integer index, and before size, first and last, which Liquid provides
// on every collection.
func RequiredVariables(templates ...*Template) []string {
	found := map[string]bool{}
	for _, t := range templates {
		t.walk(found, nil)
	}
	return sortedKeys(found)
}

// walk adds the variables t reads to vars and the filters it uses to
// filters (which may be nil).
func (t *Template) walk(vars, filters map[string]bool) {
	w := &varWalker{vars: vars, filters: filters, assigned: map[string]bool{}}
	w.node(t.t.GetRoot(), nil)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// varWalker walks a parsed template in document order. Liquid assignments
// are global from the point they run, which order approximates.
type varWalker struct {
	vars     map[string]bool
	filters  map[string]bool
	assigned map[string]bool
}

// scope holds the loop variables of the enclosing loops.
type scope []string

func (s scope) has(name string) bool { return slices.Contains(s, name) }

func (w *varWalker) node(n liquidrender.Node, sc scope) {
	switch n := n.(type) {
	case *liquidrender.SeqNode:
		for _, c := range n.Children {
			w.node(c, sc)
		}
	case *liquidrender.ObjectNode:
		w.expr(n.Args, sc)
	case *liquidrender.TagNode:
		switch n.Name {
		case "assign":
			name, value, _ := strings.Cut(n.Args, "=")
			w.expr(value, sc)
			w.assigned[strings.TrimSpace(name)] = true
		default: // cycle; break and continue have no arguments
			w.expr(n.Args, sc)
		}
	case *liquidrender.BlockNode:
		w.block(n, sc)
	}
}

func (w *varWalker) block(n *liquidrender.BlockNode, sc scope) {
	switch n.Name {
	case "raw", "comment":
		return
	case "for", "tablerow":
		variable, rest, _ := strings.Cut(strings.TrimSpace(n.Args), " in ")
		w.expr(rest, sc)
		inner := append(slices.Clone(sc), strings.TrimSpace(variable), "forloop", "tablerowloop")
		for _, c := range n.Body {
			w.node(c, inner)
		}
		for _, c := range n.Clauses { // else: runs outside the loop
			w.block(c, sc)
		}
		return
	case "capture":
		for _, c := range n.Body {
			w.node(c, sc)
		}
		w.assigned[strings.TrimSpace(n.Args)] = true
		return
	}
	// if, unless, case and their elsif, when and else clauses.
	w.expr(n.Args, sc)
	for _, c := range n.Body {
		w.node(c, sc)
	}
	for _, c := range n.Clauses {
		w.block(c, sc)
	}
}

// notVariables are words Liquid reads as literals, operators or loop
// modifiers rather than as variables.
var notVariables = map[string]bool{
	"true": true, "false": true, "nil": true, "null": true, "empty": true, "blank": true,
	"and": true, "or": true, "contains": true, "in": true, "reversed": true, "continue": true,
}

// collectionProperties end a path: Liquid computes them on any collection.
var collectionProperties = map[string]bool{"size": true, "first": true, "last": true}

// expr records the variable paths and filter names in a Liquid expression.
func (w *varWalker) expr(src string, sc scope) {
	toks := lexExpr(src)
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == '|':
			// The filter name; "default:" lexes as a keyword.
			if i+1 < len(toks) && (toks[i+1].kind == 'i' || toks[i+1].kind == 'k') {
				i++
				if w.filters != nil {
					w.filters[toks[i].text] = true
				}
			}
		case t.kind == 'i' && !notVariables[t.text]:
			i = w.path(toks, i, sc)
		}
	}
}

// path reads the variable reference starting at toks[i], records it, and
// returns the index of its last token.
func (w *varWalker) path(toks []exprToken, i int, sc scope) int {
	segments := []string{toks[i].text}
	open := true // still adding segments
	for i+1 < len(toks) {
		switch next := toks[i+1]; next.kind {
		case '.':
			if open {
				if collectionProperties[next.text] {
					open = false
				} else {
					segments = append(segments, next.text)
				}
			}
			i++
		case '[':
			end := matchingBracket(toks, i+1)
			inner := toks[i+2 : end]
			if open && len(inner) == 1 && inner[0].kind == 's' {
				segments = append(segments, inner[0].text)
			} else {
				open = false
				w.expr(joinTokens(inner), sc)
			}
			i = end
		default:
			w.record(segments, sc)
			return i
		}
	}
	w.record(segments, sc)
	return i
}

func (w *varWalker) record(segments []string, sc scope) {
	if sc.has(segments[0]) || w.assigned[segments[0]] {
		return
	}
	w.vars[strings.Join(segments, ".")] = true
}

func matchingBracket(toks []exprToken, open int) int {
	depth := 0
	for j := open; j < len(toks); j++ {
		switch toks[j].kind {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return len(toks) - 1
}

// joinTokens rebuilds an expression from tokens, enough to lex it again.
func joinTokens(toks []exprToken) string {
	var b strings.Builder
	for _, t := range toks {
		switch t.kind {
		case 'i', 'n', 'o':
			b.WriteString(t.text)
		case 'k':
			b.WriteString(t.text + ":")
		case '.':
			b.WriteString("." + t.text)
		case 's':
			b.WriteString(`"` + strings.ReplaceAll(t.text, `"`, ``) + `"`)
		default:
			b.WriteByte(t.kind)
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// exprToken is one token of a Liquid expression. kind is 'i' (identifier),
// 'k' (keyword: an identifier directly followed by ":", such as limit: or a
// named filter argument), '.' (property; text is its name), 's' (string;
// text is its value), 'n' (number), 'o' (comparison operator or ".."), or
// the punctuation byte itself: [ ] ( ) | , :
type exprToken struct {
	kind byte
	text string
}

// lexExpr splits a Liquid expression the way the engine's lexer
// (expressions/scanner.rl) does, as far as finding variables needs.
func lexExpr(s string) []exprToken {
	var toks []exprToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'':
			j := i + 1
			var b strings.Builder
			for j < len(s) && s[j] != c {
				if c == '"' && s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
				j++
			}
			toks = append(toks, exprToken{'s', b.String()})
			i = j + 1
		case isDigit(c) || c == '-' && i+1 < len(s) && isDigit(s[i+1]):
			j := i + 1
			for j < len(s) && isDigit(s[j]) {
				j++
			}
			if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
				j++
				for j < len(s) && isDigit(s[j]) {
					j++
				}
			}
			toks = append(toks, exprToken{'n', s[i:j]})
			i = j
		case c == '.' && i+1 < len(s) && s[i+1] == '.':
			toks = append(toks, exprToken{'o', ".."})
			i += 2
		case c == '.':
			j := identEnd(s, i+1)
			toks = append(toks, exprToken{'.', s[i+1 : j]})
			i = max(j, i+1)
		case isIdentStart(s, i):
			j := identEnd(s, i)
			if j < len(s) && s[j] == ':' {
				toks = append(toks, exprToken{'k', s[i:j]})
				j++
			} else {
				toks = append(toks, exprToken{'i', s[i:j]})
			}
			i = j
		case strings.ContainsRune("=!<>", rune(c)):
			j := i + 1
			if j < len(s) && s[j] == '=' {
				j++
			}
			toks = append(toks, exprToken{'o', s[i:j]})
			i = j
		default:
			toks = append(toks, exprToken{c, string(c)})
			i++
		}
	}
	return toks
}

func isIdentStart(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return r == '_' || unicode.IsLetter(r)
}

// identEnd returns the end of the identifier starting at i: letters, digits,
// "_" and "-", and an optional trailing "?".
func identEnd(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != '_' && r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			break
		}
		i += size
	}
	if i < len(s) && s[i] == '?' {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
