package render

import (
	"fmt"
	"strings"

	"tidings/internal/mjml"
)

// mjmlEnding are the MJML elements whose content is not MJML but HTML or
// text ("ending tags" in MJML's words): their content is read up to their
// end tag, and an MJML tag inside it means the end tag is missing.
var mjmlEnding = map[string]bool{
	"mj-text": true, "mj-button": true, "mj-raw": true, "mj-table": true, "mj-navbar-link": true,
	"mj-accordion-title": true, "mj-accordion-text": true, "mj-social-element": true,
	"mj-style": true, "mj-title": true, "mj-preview": true, "mj-html-attribute": true,
}

// WellFormed checks that the MJML elements of src nest: every one is closed
// (or self-closing), by its own end tag, in the element that opened it.
// MJML's parser closes what is left open where it pleases, so an unclosed
// <mj-text> swallows the rest of its section and the message loses it
// without a word (ADDENDUM 24); this finds it first. It returns one message
// per fault, each naming its line; nil when src is well formed. Only MJML
// elements (mjml, mj-*) are judged: the HTML inside mj-text and mj-raw is
// the browser's to read. src may be a fragment (a layout's or a partial's
// piece of MJML).
func WellFormed(src string) []mjml.Message {
	type open struct {
		name string
		line int
	}
	var (
		stack []open
		out   []mjml.Message
	)
	line := 1
	fault := func(l int, tag, format string, args ...any) {
		out = append(out, mjml.Message{Line: l, TagName: tag, Message: fmt.Sprintf(format, args...)})
	}
	for i := 0; i < len(src); {
		c := src[i]
		if c == '\n' {
			line++
			i++
			continue
		}
		if c != '<' {
			i++
			continue
		}
		if strings.HasPrefix(src[i:], "<!--") {
			end := strings.Index(src[i+4:], "-->")
			if end < 0 {
				fault(line, "", "a comment is never closed (-->)")
				return out
			}
			line += strings.Count(src[i:i+4+end+3], "\n")
			i += 4 + end + 3
			continue
		}
		name, closing, selfClosing, n, ok := mjmlTag(src[i:])
		if !ok {
			i++
			continue
		}
		tagLine := line
		line += strings.Count(src[i:i+n], "\n")
		i += n
		switch {
		case closing:
			if len(stack) == 0 {
				fault(tagLine, name, "</%s> closes nothing: no <%s> is open", name, name)
				continue
			}
			top := stack[len(stack)-1]
			if top.name != name {
				fault(tagLine, name, "</%s> where <%s> (line %d) must be closed first", name, top.name, top.line)
				// Recover as MJML's parser would: close up to a matching
				// open element, if any.
				for k := len(stack) - 1; k >= 0; k-- {
					if stack[k].name == name {
						stack = stack[:k]
						break
					}
				}
				continue
			}
			stack = stack[:len(stack)-1]
		case selfClosing:
		case mjmlEnding[name]:
			// Its content runs to its end tag; an MJML tag on the way
			// means that end tag is missing.
			end, inner := endOfContent(src[i:], name)
			if end < 0 || inner >= 0 && inner < end {
				fault(tagLine, name, "<%s> is never closed (</%s> is missing)", name, name)
				if inner >= 0 && (end < 0 || inner < end) {
					line += strings.Count(src[i:i+inner], "\n")
					i += inner
					continue
				}
				return out
			}
			closeLen := strings.IndexByte(src[i+end:], '>') + 1
			line += strings.Count(src[i:i+end+closeLen], "\n")
			i += end + closeLen
		default:
			stack = append(stack, open{name, tagLine})
		}
	}
	for k := len(stack) - 1; k >= 0; k-- {
		fault(stack[k].line, stack[k].name, "<%s> is never closed (</%s> is missing)", stack[k].name, stack[k].name)
	}
	return out
}

// mjmlTag reads an MJML start or end tag at the start of s ("<mj-text
// padding="0">", "</mj-column>", "<mj-image src="x" />"): its lower-case
// name, its kind and its length. ok is false for anything else (an HTML
// tag, a lone "<").
func mjmlTag(s string) (name string, closing, selfClosing bool, n int, ok bool) {
	i := 1
	if i < len(s) && s[i] == '/' {
		closing = true
		i++
	}
	start := i
	for i < len(s) && (isNameByte(s[i])) {
		i++
	}
	name = strings.ToLower(s[start:i])
	if name != "mjml" && !strings.HasPrefix(name, "mj-") {
		return "", false, false, 0, false
	}
	// The tag ends at the first '>' outside quotes.
	var quote byte
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			selfClosing = !closing && s[i-1] == '/'
			return name, closing, selfClosing, i + 1, true
		}
	}
	return "", false, false, 0, false
}

func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-'
}

// endOfContent finds, in the content of an ending tag, its end tag
// (</name>) and the first other MJML tag, as offsets in s (-1: none).
func endOfContent(s, name string) (end, inner int) {
	end, inner = -1, -1
	for i := 0; i < len(s); i++ {
		if s[i] != '<' {
			continue
		}
		tag, closing, _, _, ok := mjmlTag(s[i:])
		if !ok {
			continue
		}
		if closing && tag == name {
			return i, inner
		}
		if inner < 0 {
			inner = i
		}
	}
	return end, inner
}
