package render

import (
	"errors"
	"fmt"
	"regexp"
	"sort"

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
