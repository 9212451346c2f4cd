package liquid

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	osteele "github.com/osteele/liquid"
	"github.com/osteele/liquid/expressions"
	"github.com/osteele/liquid/parser"
)

// engine parses every template. Values are inserted as they are, as in
// Shopify Liquid: a template that shows text from an untrusted source applies
// `| escape` itself, and whatever markup a value brings is the caller's to
// sanitise (the render pipeline checks every message).
var engine = newEngine()

// escapingEngine parses the templates whose values are escaped
// (ParseDerived with an escape): auto-escaping brings Liquid's safe filter,
// which its configuration has. Renders use the budget's configuration,
// which does the escaping.
var escapingEngine = func() *osteele.Engine {
	e := newEngine()
	e.SetAutoEscapeReplacer(escaper{})
	return e
}()

func newEngine() *osteele.Engine {
	e := osteele.NewEngine()
	// include and render read other templates from the server's disk; a
	// template here stands alone.
	e.UnregisterTag("include")
	e.UnregisterTag("render")
	return e
}

// Template is a parsed template, instrumented for a Budget: it renders only
// through Budget.Render.
type Template struct {
	t *osteele.Template
	// field names the template in errors ("subject", "content").
	field string
	// escape, when not nil, is applied to every value the template
	// outputs.
	escape func(string) string
}

// Error says why a template's Liquid cannot be used: Liquid's own words
// (with their lines), or the filters it does not define.
type Error struct {
	// Field is the name the template was parsed under ("subject",
	// "content").
	Field string
	// Messages are one line each.
	Messages []string
}

// Error joins the messages.
func (e *Error) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, strings.Join(e.Messages, "; "))
}

// Parse parses a template a tenant wrote; field names it in errors, which
// are *Error. Beyond Liquid's own parse it refuses what osteele/liquid
// would let through as text but Shopify Liquid rejects (checkDelimiters).
func Parse(field, src string) (*Template, error) {
	if msg := checkDelimiters(src); msg != "" {
		return nil, &Error{Field: field, Messages: []string{msg}}
	}
	t, err := engine.ParseTemplateLocation([]byte(src), field, 1)
	if err != nil {
		return nil, &Error{Field: field, Messages: []string{liquidMessage(err)}}
	}
	instrument(t)
	return &Template{t: t, field: field}, nil
}

// ParseDerived parses Liquid the caller made from a template Parse
// accepted (its tags and outputs as they were, the text around them
// changed), so only Liquid's own parse runs. With escape, every value the
// template outputs is written through escape: what auto-escaping is in
// Liquid.
func ParseDerived(src string, escape func(string) string) (*Template, error) {
	e := engine
	if escape != nil {
		e = escapingEngine
	}
	t, err := e.ParseString(src)
	if err != nil {
		return nil, err
	}
	instrument(t)
	return &Template{t: t, escape: escape}, nil
}

// liquidMessage is Liquid's message prefixed with its line, without the
// "Liquid error (line n): " and " in <field>" around it.
func liquidMessage(err osteele.SourceError) string {
	msg := err.Error()
	if m := liquidErrorRE.FindStringSubmatch(msg); m != nil {
		msg = m[1]
	}
	if line := err.LineNumber(); line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	return msg
}

var liquidErrorRE = regexp.MustCompile(`(?s)^Liquid error(?: \(line \d+\))?: (.*?)(?: in (?:subject|content|template))?$`)

// CheckFilters reports, as an *Error, the filters t uses that the engine
// does not define. Liquid only notices an unknown filter when it runs, so
// without this a typo would pass the save and fail every send.
func (t *Template) CheckFilters() error {
	names := map[string]bool{}
	t.walk(map[string]bool{}, names)
	var unknown []string
	for name := range names {
		_, err := engine.ParseAndRenderString("{{ nil | "+name+" }}", nil)
		var undefined expressions.UndefinedFilter
		if err != nil && errors.As(err, &undefined) {
			unknown = append(unknown, fmt.Sprintf("undefined filter %q", name))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return &Error{Field: t.field, Messages: unknown}
}

// checkDelimiters finds what Shopify Liquid rejects and osteele/liquid
// reads as plain text, so a typo would go out to every recipient verbatim:
// an output or tag that is never closed ("{{ name", "{% if x"), and a raw
// block without its end. The engine's own scanner decides what is Liquid, so
// the check cannot disagree with it: any "{{" or "{%" left in a text token
// was not read as Liquid.
func checkDelimiters(src string) string {
	// Raw blocks hold anything; the scanner would read delimiters in them.
	src = rawBlock.ReplaceAllStringFunc(src, func(m string) string { return strings.Repeat("\n", strings.Count(m, "\n")) })
	inRaw, rawLine := false, 0
	for _, t := range parser.Scan(src, parser.SourceLoc{LineNo: 1}, nil) {
		switch {
		case t.Type == parser.TagTokenType && t.Name == "raw":
			inRaw, rawLine = true, t.SourceLoc.LineNo
		case t.Type == parser.TagTokenType && t.Name == "endraw":
			inRaw = false
		case t.Type == parser.TextTokenType && !inRaw:
			if k := strings.Index(t.Source, "{{"); k >= 0 {
				return fmt.Sprintf("line %d: output %q was not properly terminated with \"}}\"", lineAt(t, k), truncateLiquid(t.Source[k:]))
			}
			if k := strings.Index(t.Source, "{%"); k >= 0 {
				return fmt.Sprintf("line %d: tag %q was not properly terminated with \"%%}\"", lineAt(t, k), truncateLiquid(t.Source[k:]))
			}
		}
	}
	if inRaw {
		return fmt.Sprintf("line %d: 'raw' tag was never closed", rawLine)
	}
	return ""
}

var rawBlock = regexp.MustCompile(`(?s)\{%-?\s*raw\s*-?%\}.*?\{%-?\s*endraw\s*-?%\}`)

// lineAt is the line of byte k of a token's source.
func lineAt(t parser.Token, k int) int { return t.SourceLoc.LineNo + strings.Count(t.Source[:k], "\n") }

func truncateLiquid(s string) string {
	if nl := strings.IndexByte(s, '\n'); nl >= 0 {
		s = s[:nl]
	}
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}
