package sanitize

import (
	"errors"
	"fmt"
	"strings"

	xhtml "golang.org/x/net/html"
)

// ErrUnsafeStored means a stored template version still fails judge after
// being sanitised again; it has to be saved again (and will be refused
// until what judge reports is removed).
var ErrUnsafeStored = errors.New("render: stored template fails the sanitiser's check; save it again")

// Again is what a template version's compiled HTML goes through when a
// Renderer first parses it: versions saved before the allowlist
// (Prepare's output then) are sanitised and judged as Prepare now would.
// It costs a Sanitize and a parse once per version and process.
func Again(compiled string) (string, error) {
	clean, _ := HTML(compiled)
	if d := Judge(clean, Mode{Liquid: true}); d != "" {
		return "", fmt.Errorf("%w: %s", ErrUnsafeStored, d)
	}
	return clean, nil
}

// Clean sanitises a rendered message that the guard flagged. What
// Sanitize leaves is judged; should judge still object (tokenizer and
// browser disagreeing over what values put in), the message is rebuilt
// from the tree a browser would build, with only what the allowlist allows.
// A message needs no byte-for-byte fidelity, only to be what it shows.
func Clean(html string) string {
	out, _ := sanitizeMessage(html)
	if Judge(out, Mode{}) == "" {
		return out
	}
	return rebuildMessage(out)
}

// rebuildMessage keeps the allowed part of the tree a browser builds from
// html and serialises it. Comments go (a message's conditional comments
// came from a template that was already judged; values that reached them
// are not worth keeping); so does any <style> whose text is not plain CSS.
func rebuildMessage(html string) string {
	doc, err := xhtml.Parse(strings.NewReader(html))
	if err != nil {
		return xhtml.EscapeString(html)
	}
	prune(doc)
	var b strings.Builder
	if err := xhtml.Render(&b, doc); err != nil {
		return xhtml.EscapeString(html)
	}
	out := b.String()
	if Judge(out, Mode{}) != "" {
		return xhtml.EscapeString(html)
	}
	return out
}

// prune removes what the allowlist does not allow from n's subtree:
// disallowed elements go with their content when dropWithContent or
// foreign, and otherwise give their children to their parent.
func prune(n *xhtml.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		switch c.Type {
		case xhtml.CommentNode:
			n.RemoveChild(c)
		case xhtml.ElementNode:
			attr := func(key string) (string, bool) {
				for _, a := range c.Attr {
					if a.Namespace == "" && a.Key == key {
						return a.Val, true
					}
				}
				return "", false
			}
			switch {
			case c.Namespace != "" || dropWithContent[c.Data] || !elementAttrsAllowed(c.Data, attr):
				n.RemoveChild(c)
			case c.Data == "style" || c.Data == "title":
				if t := c.FirstChild; t != nil && (strings.IndexByte(t.Data, '<') >= 0 || cssDangerous(t.Data)) {
					n.RemoveChild(c)
				}
				pruneAttrs(c)
			case !elementAllowed(c.Data, false, false):
				prune(c)
				for gc := c.FirstChild; gc != nil; {
					gnext := gc.NextSibling
					c.RemoveChild(gc)
					n.InsertBefore(gc, c)
					gc = gnext
				}
				n.RemoveChild(c)
			default:
				pruneAttrs(c)
				prune(c)
			}
		}
		c = next
	}
}

func pruneAttrs(n *xhtml.Node) {
	kept := n.Attr[:0]
	for _, a := range n.Attr {
		if a.Namespace == "" && attrNameAllowed(n.Data, a.Key, false) && attrValueAllowed(n.Data, a.Key, a.Val) {
			kept = append(kept, a)
		}
	}
	n.Attr = kept
}
