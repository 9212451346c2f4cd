package render

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/k3a/html2text"
	"github.com/osteele/liquid/parser"
	xhtml "golang.org/x/net/html"

	"tidings/internal/render/liquid"
)

// HTMLToText derives the plain-text part of a message from its HTML with
// github.com/k3a/html2text: head, style and comments go, links become
// "text <url>", paragraphs, headings, list items and line breaks become line
// breaks. Layout tables and blocks (MJML's output is mostly those) end lines
// too, and runs of blank lines are squeezed to one.
func HTMLToText(html string) string {
	return tidyText(html2text.HTML2TextWithOptions(blockBreaks.Replace(html), textOptions...))
}

var textOptions = []html2text.Option{html2text.WithLinksInnerText(), html2text.WithUnixLineBreaks(), html2text.WithListSupport()}

// blockBreaks adds a <br> after the ends of blocks html2text does not break
// lines at. MJML writes these tags in lower case.
var blockBreaks = strings.NewReplacer(
	"</div>", "</div><br>", "</tr>", "</tr><br>", "</table>", "</table><br>",
	"</blockquote>", "</blockquote><br>",
)

// tidyText trims each line, squeezes runs of spaces (no-break spaces
// included) to one, keeps at most one blank line in a row, and drops links
// whose URL came out empty (" <>"; html2text drops them, but a text template
// can make them). It runs on every text part, so it copies stretches that
// are already tidy whole.
func tidyText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	newlines, space := 0, false // white space owed before the next text
	for i := 0; i < len(s); {
		if !tidySpecial[s[i]] {
			j := tidyRun(s, i)
			writeSeparator(&b, newlines, space)
			newlines, space = 0, false
			b.WriteString(s[i:j])
			i = j
			continue
		}
		switch c := s[i]; {
		case c == '\n':
			newlines++
			i++
		case c == 0xc2 && i+1 < len(s) && s[i+1] == 0xa0: // U+00A0
			space = true
			i += 2
		case c == '<' || c == 0xc2:
			// An empty link goes; any other '<' is text.
			j := i + 1
			for c == '<' && j < len(s) && s[j] == ' ' {
				j++
			}
			if c == '<' && j < len(s) && s[j] == '>' {
				i = j + 1
				continue
			}
			j = tidyRun(s, i+1)
			writeSeparator(&b, newlines, space)
			newlines, space = 0, false
			b.WriteString(s[i:j])
			i = j
		default:
			space = true
			i++
		}
	}
	return b.String()
}

// writeSeparator writes the white space owed before more text: a blank
// line, a line break or a space, nothing at the start.
func writeSeparator(b *strings.Builder, newlines int, space bool) {
	switch {
	case b.Len() == 0:
	case newlines > 1:
		b.WriteString("\n\n")
	case newlines == 1:
		b.WriteByte('\n')
	case space:
		b.WriteByte(' ')
	}
}

// tidyRun returns the end of the tidy stretch of text starting at i: text
// bytes, with single spaces and one or two line breaks between them.
func tidyRun(s string, i int) int {
	for i < len(s) {
		if !tidySpecial[s[i]] {
			i++
			continue
		}
		switch {
		case s[i] == ' ' && i+1 < len(s) && !tidySpecial[s[i+1]]:
			i += 2
		case s[i] == '\n' && i+1 < len(s) && !tidySpecial[s[i+1]]:
			i += 2
		case s[i] == '\n' && i+2 < len(s) && s[i+1] == '\n' && !tidySpecial[s[i+2]]:
			i += 3
		default:
			return i
		}
	}
	return i
}

// tidySpecial marks the bytes tidyText must look at: white space, 0xc2
// (which may start a no-break space) and '<' (which may start an empty
// link).
var tidySpecial = [256]bool{'\n': true, ' ': true, '\t': true, '\r': true, '\f': true, '\v': true, 0xc2: true, '<': true}

// Placeholders stand in for Liquid while html2text converts a template; they
// are private-use characters and digits, which html2text copies as text.
const (
	placeholderOpen  = "\ue000"
	placeholderClose = "\ue001"
)

var placeholderRE = regexp.MustCompile(placeholderOpen + `(\d+)` + placeholderClose)

// textTemplate converts the HTML of a template to a Liquid template for its
// text part, once per template version, so that a send renders a few
// kilobytes of text instead of converting tens of kilobytes of HTML. The
// Liquid is replaced by placeholders for the conversion and put back after.
//
// It reports false when that cannot be trusted to give what converting the
// rendered HTML would: a Liquid tag lost or repeated by the conversion (one
// inside <head> or in an attribute other than href), or a result that does
// not parse. The caller then converts each rendered message instead.
func textTemplate(html string) (*liquid.Template, bool) {
	tokens := parser.Scan(html, parser.SourceLoc{}, nil)
	var b strings.Builder
	b.Grow(len(html))
	var sources []string
	var isTag []bool
	for _, t := range tokens {
		switch t.Type {
		case parser.TextTokenType:
			b.WriteString(t.Source)
		case parser.TrimLeftTokenType, parser.TrimRightTokenType:
			// Whitespace control trims the text around it, and in the text
			// part that whitespace is the line breaks between blocks: each
			// message's text is derived from its HTML instead.
			return nil, false
		case parser.ObjTokenType, parser.TagTokenType:
			b.WriteString(placeholderOpen + strconv.Itoa(len(sources)) + placeholderClose)
			sources = append(sources, t.Source)
			isTag = append(isTag, t.Type == parser.TagTokenType)
		}
	}
	if strings.Contains(html, placeholderOpen) {
		return nil, false // the template itself uses our marker
	}
	seen := make([]int, len(sources))
	text := placeholderRE.ReplaceAllStringFunc(HTMLToText(b.String()), func(m string) string {
		i, _ := strconv.Atoi(m[len(placeholderOpen) : len(m)-len(placeholderClose)])
		seen[i]++
		return sources[i]
	})
	for i, tag := range isTag {
		if tag && seen[i] != 1 {
			return nil, false
		}
	}
	// Every value goes through valueToText, since in the HTML those values
	// would have been converted along with the page: "{{ note | escape }}"
	// gives "&lt;" in the HTML, and the text shows "<".
	t, err := liquid.ParseDerived(text, valueToText)
	if err != nil {
		return nil, false
	}
	return t, true
}

// valueToText converts a value that may hold markup or character references
// the way HTMLToText converts it inside a page. (Markup that reaches outside
// the value, such as a "> that ends the attribute the value is in, is
// converted as if it did not.)
func valueToText(s string) string {
	switch {
	case strings.IndexByte(s, '<') >= 0:
		return html2text.HTML2TextWithOptions(blockBreaks.Replace(s), textOptions...)
	case strings.IndexByte(s, '&') >= 0:
		return xhtml.UnescapeString(s)
	}
	return s
}
