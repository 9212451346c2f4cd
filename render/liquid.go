package render

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/osteele/liquid"
	"github.com/osteele/liquid/expressions"
)

// engine parses every template. Values are inserted as they are, as in
// Shopify Liquid: a template that shows text from an untrusted source applies
// `| escape` itself, and whatever markup a value brings is sanitised before
// the message goes out (Renderer.Render).
var engine = newEngine()

func newEngine() *liquid.Engine {
	e := liquid.NewEngine()
	// include and render read other templates from the server's disk; a
	// template here stands alone.
	e.UnregisterTag("include")
	e.UnregisterTag("render")
	return e
}

// parseLiquid parses one template; field names it in errors.
func parseLiquid(field, src string) (*liquid.Template, error) {
	if msg := checkDelimiters(src); msg != "" {
		return nil, &ValidationError{Field: field, Messages: []string{msg}}
	}
	t, err := engine.ParseTemplateLocation([]byte(src), field, 1)
	if err != nil {
		return nil, &ValidationError{Field: field, Messages: []string{liquidMessage(err)}}
	}
	return t, nil
}

// liquidMessage is Liquid's message prefixed with its line, without the
// "Liquid error (line n): " and " in <field>" around it.
func liquidMessage(err liquid.SourceError) string {
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

// checkFilters reports filters the engine does not define. Liquid only
// notices an unknown filter when it runs, so without this a typo would pass
// the save and fail every send.
func checkFilters(field string, names map[string]bool) error {
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
	return &ValidationError{Field: field, Messages: unknown}
}

// checkDelimiters finds what Shopify Liquid rejects and osteele/liquid
// reads as plain text, so a typo would go out to every recipient verbatim:
// an output or tag that is never closed ("{{ name", "{{ x }"), an empty
// tag ("{% %}"), and a raw block without its end.
func checkDelimiters(src string) string {
	line := func(pos int) int { return strings.Count(src[:pos], "\n") + 1 }
	for i := 0; ; {
		k := strings.Index(src[i:], "{")
		if k < 0 {
			return ""
		}
		open := i + k
		if open+1 >= len(src) || (src[open+1] != '{' && src[open+1] != '%') {
			i = open + 1
			continue
		}
		closer := "}}"
		kind := "output"
		if src[open+1] == '%' {
			closer, kind = "%}", "tag"
		}
		body := src[open+2:]
		end := strings.Index(body, closer)
		next := strings.IndexAny(body, "{")
		for next >= 0 && next+1 < len(body) && body[next+1] != '{' && body[next+1] != '%' {
			n := strings.IndexAny(body[next+1:], "{")
			if n < 0 {
				next = -1
				break
			}
			next += n + 1
		}
		if end < 0 || (next >= 0 && next < end) {
			return fmt.Sprintf("line %d: %s %q was not properly terminated with %q", line(open), kind, truncateLiquid(src[open:]), closer)
		}
		inner := strings.TrimSpace(strings.Trim(body[:end], "-"))
		i = open + 2 + end + len(closer)
		if kind != "tag" {
			continue
		}
		if inner == "" {
			return fmt.Sprintf("line %d: empty tag %q", line(open), src[open:i])
		}
		if name, _, _ := strings.Cut(inner, " "); name == "raw" {
			loc := endRawRE.FindStringIndex(src[i:])
			if loc == nil {
				return fmt.Sprintf("line %d: 'raw' tag was never closed", line(open))
			}
			i += loc[1]
		}
	}
}

var endRawRE = regexp.MustCompile(`\{%-?\s*endraw\s*-?%\}`)

func truncateLiquid(s string) string {
	if nl := strings.IndexByte(s, '\n'); nl >= 0 {
		s = s[:nl]
	}
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}
