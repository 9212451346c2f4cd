package sanitize

import (
	"fmt"
	"strings"

	xhtml "golang.org/x/net/html"
)

// Mode says what Judge is looking at.
type Mode struct {
	// MJML allows MJML's elements and attributes (stored MJML source).
	MJML bool
	// Liquid is for a template (stored content, compiled HTML): Liquid
	// syntax read as attributes gets HTML's allowances (names that mean
	// nothing, see meaninglessName, and attributes without a value). A
	// rendered message gets none.
	Liquid bool
}

// maxJudgeDepth bounds how deep judge follows comments and raw text into
// nested HTML.
const maxJudgeDepth = 4

// judge parses s the way a browser does (golang.org/x/net/html's Parse:
// the HTML5 tree construction, foreign content included) and walks the
// tree: any element, attribute or URL outside the allowlist is a finding,
// and so is any element in a foreign namespace (SVG, MathML). The bodies of
// comments, which Outlook renders, and the text of <style>, <title> and
// <noscript> are parsed and judged as well. It returns "" when s is clean.
//
// Sanitize works on tokens, byte for byte; judge is the independent check
// that what it kept means to a browser what it meant to the tokenizer.
func Judge(s string, mode Mode) string {
	return judgeDepth(s, mode, false, 0)
}

func judgeDepth(s string, mode Mode, inComment bool, depth int) string {
	doc, err := xhtml.Parse(strings.NewReader(s))
	if err != nil {
		return "unparsable: " + err.Error()
	}
	j := judgement{mode: mode, inComment: inComment, depth: depth}
	return j.walk(doc)
}

type judgement struct {
	mode      Mode
	inComment bool
	depth     int
}

func (j *judgement) walk(n *xhtml.Node) string {
	switch n.Type {
	case xhtml.ElementNode:
		if d := j.element(n); d != "" {
			return d
		}
	case xhtml.CommentNode:
		if d := j.nested(n.Data, true); d != "" {
			return "in a comment: " + d
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if d := j.walk(c); d != "" {
			return d
		}
	}
	return ""
}

// nested judges text that Outlook, a client without <style> support or a
// later parse could read as HTML.
func (j *judgement) nested(text string, inComment bool) string {
	if strings.IndexByte(text, '<') < 0 {
		return ""
	}
	if j.depth+1 > maxJudgeDepth {
		return "markup nested too deep"
	}
	return judgeDepth(text, j.mode, inComment, j.depth+1)
}

func (j *judgement) element(n *xhtml.Node) string {
	if n.Namespace != "" {
		return fmt.Sprintf("element <%s> in the %s namespace", n.Data, n.Namespace)
	}
	name := n.Data
	if !elementAllowed(name, j.mode.MJML, j.inComment) {
		return fmt.Sprintf("element <%s>", name)
	}
	attr := func(key string) (string, bool) {
		for _, a := range n.Attr {
			if a.Namespace == "" && a.Key == key {
				return a.Val, true
			}
		}
		return "", false
	}
	if !elementAttrsAllowed(name, attr) {
		return fmt.Sprintf("element <%s> of a kind not allowed", name)
	}
	for _, a := range n.Attr {
		key := a.Key
		if a.Namespace != "" {
			key = a.Namespace + ":" + key
		}
		if !attrNameAllowed(name, key, j.inComment) {
			if j.mode.Liquid && a.Namespace == "" && (meaninglessName(key) || a.Val == "") {
				continue
			}
			return fmt.Sprintf("attribute %s on <%s>", key, name)
		}
		if !attrValueAllowed(name, key, a.Val) {
			return fmt.Sprintf("attribute %s=%q on <%s>", key, a.Val, name)
		}
	}
	text := ""
	if c := n.FirstChild; c != nil && c.Type == xhtml.TextNode {
		text = c.Data
	}
	switch name {
	case "style", "mj-style":
		if cssDangerous(text) {
			return fmt.Sprintf("style sheet %q", text)
		}
	case "mj-html-attribute":
		key, _ := attr("name")
		key = strings.ToLower(key)
		if !attrNameAllowed("", key, false) && text != "" || !attrValueAllowed("", key, text) {
			return fmt.Sprintf("mj-html-attribute %s=%q", key, text)
		}
	}
	if rawTextElements[name] && text != "" {
		if d := j.nested(text, j.inComment); d != "" {
			return "in <" + name + ">: " + d
		}
	}
	return ""
}
