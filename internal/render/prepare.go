package render

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/osteele/liquid/parser"

	"tidings/internal/mjml"
	"tidings/internal/render/liquid"
	"tidings/internal/render/sanitize"
)

// Compiler compiles MJML to HTML; *mjml.Pool implements it. Invalid MJML is
// reported as a *mjml.ValidationError.
type Compiler interface {
	Compile(ctx context.Context, mjml string) (string, error)
}

// Prepared is a template ready to store, the result of Prepare.
type Prepared struct {
	// StoredContent is the content as given, minus anything sanitize.HTML
	// removed: what GET returns.
	StoredContent string
	// Sanitized reports whether sanitize.HTML removed anything from the content.
	Sanitized bool
	// CompiledHTML is the sanitised MJML output with the Liquid still in it:
	// what Renderer.Render renders for each recipient.
	CompiledHTML string
	// RequiredVariables are the variables subject and content read; see
	// liquid.RequiredVariables.
	RequiredVariables []string
}

// ValidationError says why a template cannot be saved. The API reports it as
// VALIDATION_ERROR with Messages under details.fields[Field].
type ValidationError struct {
	// Field is "subject" or "content".
	Field string
	// Messages are MJML's or Liquid's own words.
	Messages []string
	// MJML holds MJML's messages with their lines and tags when MJML
	// rejected the content.
	MJML []mjml.Message
}

// Error joins the messages.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, strings.Join(e.Messages, "; "))
}

// parseLiquid parses a template a tenant wrote (liquid.Parse); what
// Liquid refuses is a *ValidationError.
func parseLiquid(field, src string) (*liquid.Template, error) {
	t, err := liquid.Parse(field, src)
	return t, invalidLiquid(err)
}

// invalidLiquid makes the Liquid runtime's *liquid.Error a
// *ValidationError; other errors stay as they are.
func invalidLiquid(err error) error {
	var lerr *liquid.Error
	if errors.As(err, &lerr) {
		return &ValidationError{Field: lerr.Field, Messages: lerr.Messages}
	}
	return err
}

// WrapHTML puts raw HTML in an MJML document, as an mj-raw in mj-body, so
// that it goes through the same compiler as MJML.
// An end tag of mj-raw inside the content would close the wrapper and let
// the rest be read as MJML, so it is escaped: the content stays raw HTML.
func WrapHTML(content string) string {
	return "<mjml><mj-body><mj-raw>" + rawEndTag.ReplaceAllString(content, "&lt;$1") + "</mj-raw></mj-body></mjml>"
}

var rawEndTag = regexp.MustCompile(`(?i)<(/\s*mj-raw)`)

// Prepare is what saving a template does: it sanitises the content, checks
// the Liquid in subject and content, compiles the content once with MJML
// (wrapping raw HTML first), sanitises the compiled HTML, and finds the
// required variables. Both the stored content and the compiled HTML are
// then parsed as a browser would and judged against the allowlist (judge);
// content that still fails is rejected. Rejected input returns a *ValidationError; an error of
// another type means the compiler itself failed.
func Prepare(ctx context.Context, c Compiler, subject, content string) (*Prepared, error) {
	sanitizeSource := sanitize.HTML
	if sanitize.IsMJML(content) {
		sanitizeSource = sanitize.MJML
	}
	stored, sanitized := sanitizeSource(content)

	subjectTmpl, err := parseLiquid("subject", subject)
	if err != nil {
		return nil, err
	}
	// Parsing the source first reports Liquid errors at the lines the
	// author wrote, not the lines of MJML's output.
	if _, err := parseLiquid("content", stored); err != nil {
		return nil, err
	}

	if sanitize.IsMJML(stored) {
		if msgs := WellFormed(stored); len(msgs) > 0 {
			return nil, mjmlInvalid(msgs)
		}
	}
	source, html := stored, stored
	if !IsDocument(stored) {
		if !sanitize.IsMJML(stored) {
			source = WrapHTML(stored)
		}
		html, err = c.Compile(ctx, source)
	}
	if err != nil {
		var invalid *mjml.ValidationError
		if errors.As(err, &invalid) {
			return nil, mjmlInvalid(invalid.Messages)
		}
		return nil, fmt.Errorf("render: compile MJML: %w", err)
	}
	// Judged after MJML, so that what MJML rejects (an unknown mj-
	// element, say) is reported in MJML's words.
	if d := sanitize.Judge(stored, sanitize.Mode{MJML: sanitize.IsMJML(stored), Liquid: true}); d != "" {
		return nil, unsafeContent("", d)
	}
	compiled, _ := sanitize.HTML(html)
	if d := sanitize.Judge(compiled, sanitize.Mode{Liquid: true}); d != "" {
		return nil, unsafeContent("in the HTML MJML produced: ", d)
	}

	if dropped := droppedTags(stored, compiled); len(dropped) > 0 {
		return nil, &ValidationError{Field: "content", Messages: dropped}
	}
	contentTmpl, err := parseLiquid("content", compiled)
	if err != nil {
		var verr *ValidationError
		if errors.As(err, &verr) {
			for i, m := range verr.Messages {
				verr.Messages[i] = "in the HTML MJML produced: " + m
			}
		}
		return nil, err
	}

	if err := subjectTmpl.CheckFilters(); err != nil {
		return nil, invalidLiquid(err)
	}
	if err := contentTmpl.CheckFilters(); err != nil {
		return nil, invalidLiquid(err)
	}
	return &Prepared{
		// Raw HTML is stored as the MJML that wraps it (ADDENDUM 5: content
		// is MJML source), so GET returns <mjml><mj-body><mj-raw>...
		StoredContent:     source,
		Sanitized:         sanitized,
		CompiledHTML:      compiled,
		RequiredVariables: liquid.RequiredVariables(subjectTmpl, contentTmpl),
	}, nil
}

// mjmlInvalid is the error of content MJML (or WellFormed) rejects.
func mjmlInvalid(ms []mjml.Message) *ValidationError {
	msgs := make([]string, len(ms))
	for i, m := range ms {
		msgs[i] = m.String()
	}
	return &ValidationError{Field: "content", Messages: msgs, MJML: ms}
}

// IsDocument reports whether content is a whole HTML document (it starts
// with <!doctype or <html, as every email editor exports): it is stored
// and sent as that one document, not wrapped in MJML (ADDENDUM 24), which
// would nest it in MJML's own document.
func IsDocument(content string) bool {
	s := strings.TrimLeftFunc(strings.TrimPrefix(content, "\ufeff"), unicode.IsSpace)
	return hasPrefixFold(s, "<!doctype") || hasPrefixFold(s, "<html") && (len(s) == 5 || !isNameByte(s[5]))
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// unsafeContent is the error for content that judge still objects to
// after Sanitize: markup a browser would read differently from the way the
// tokenizer read it.
func unsafeContent(where, finding string) *ValidationError {
	return &ValidationError{Field: "content", Messages: []string{
		where + "a browser would read this content as markup the sanitiser does not allow (" + finding + "); remove it",
	}}
}

// droppedTags lists the Liquid tags and outputs of source that are missing
// from MJML's output. MJML silently drops text between its elements, so a
// {% for %} or {{ greeting }} placed directly in mj-body disappears.
func droppedTags(source, compiled string) []string {
	count := func(s string) map[string]int {
		n := map[string]int{}
		for _, t := range parser.Scan(s, parser.SourceLoc{}, nil) {
			if k, ok := liquidKey(t); ok {
				n[k]++
			}
		}
		return n
	}
	have := count(compiled)
	var dropped []string
	for _, t := range parser.Scan(source, parser.SourceLoc{LineNo: 1}, nil) {
		k, ok := liquidKey(t)
		if !ok {
			continue
		}
		if have[k] > 0 {
			have[k]--
			continue
		}
		dropped = append(dropped, fmt.Sprintf("line %d: MJML dropped the Liquid %s; put Liquid that sits between MJML elements inside <mj-raw>", t.SourceLoc.LineNo, t.Source))
	}
	return dropped
}

// liquidKey identifies a tag or output by what it says, not how it is
// spaced (MJML may reformat around it).
func liquidKey(t parser.Token) (string, bool) {
	switch t.Type {
	case parser.TagTokenType:
		return "tag " + t.Name + " " + strings.Join(strings.Fields(t.Args), " "), true
	case parser.ObjTokenType:
		return "output " + strings.Join(strings.Fields(t.Args), " "), true
	}
	return "", false
}
