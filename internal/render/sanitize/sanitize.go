package sanitize

import (
	"html"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	xhtml "golang.org/x/net/html"
)

// Sanitize keeps what the allowlist (allowlist.go) allows and removes the
// rest: elements outside it lose their tags (their text stays), and
// script, the other raw-text elements, SVG, MathML, frames, plugins,
// templates and form controls go with their content; attributes outside it
// are cut out of their tags, and so are URLs whose scheme is not http,
// https, mailto or tel, style that loads a javascript:, vbscript: or data:
// URL or runs an IE expression, and <meta>, <link> and <input> other than
// the harmless kinds. Case, whitespace, control characters and character
// references do not hide any of this, and the content of comments (Outlook
// renders <!--[if mso]>...<![endif]-->, so there Outlook's VML and Office
// elements are allowed too) and of <style> and <title> is sanitised too.
//
// Everything kept is kept byte for byte: tags are only rewritten to drop an
// attribute, so Liquid in attribute values (href="{{ url }}"), <style>
// blocks, tables, inline styles and conditional comments survive. Content
// with nothing to strip is returned unchanged, with changed false.
//
// Liquid is read the way a browser reads it, as markup, with two
// allowances. Inside a tag, a browser reads Liquid tags as attributes ("<td
// {% if x %}bgcolor=red{% endif %}>" has "{%", "if", "x", "%}bgcolor",
// ...): names no element gives a meaning (meaninglessName: "{%", "%}x",
// "?a" in href="{{ u | append: "?a=1" }}") are kept when what they become
// once Liquid has run is allowed ("%}bgcolor" becomes bgcolor) or means
// nothing either, and so are attributes without a value that lie inside a
// Liquid tag ("if", "x"). Liquid outputs between attributes ("<a {{ attrs
// }}>") get no allowance: they would write attributes of the value's
// choosing. And a "<" inside Liquid that a browser would take for the
// start of a tag ("{% if a<b %}") gets a space after it, which Liquid
// ignores.
//
// Elements and attributes are found with golang.org/x/net/html's tokenizer,
// which follows the HTML5 tokenization rules browsers use; where a
// browser's tree builder could still read the result differently (foreign
// content, which is removed), judge, which parses like a browser, has the
// last word (see Prepare).
func HTML(content string) (out string, changed bool) {
	return sanitize(content, false, true)
}

// MJML is Sanitize for MJML source: MJML's own elements and
// attributes are allowed as well, and some element text is not text:
// <mj-style> holds a style sheet and <mj-html-attribute name="x"> the value
// of attribute x on the compiled elements, so both are sanitised as such
// (an attribute outside the allowlist gets no value). In HTML (the compiled
// or rendered message) MJML elements are not allowed.
func MJML(content string) (out string, changed bool) {
	return sanitize(content, true, true)
}

// sanitizeMessage is Sanitize for a rendered message, which has no Liquid
// left: Liquid syntax is not given the allowances.
func sanitizeMessage(content string) (out string, changed bool) {
	return sanitize(content, false, false)
}

func sanitize(content string, mjml, liquid bool) (out string, changed bool) {
	src := content
	if liquid {
		src = spaceLiquidTagStarts(content)
	}
	out, changed = sanitizePass(src, mjml, liquid)
	changed = changed || src != content
	if !changed {
		return escapeHiddenElements(content)
	}
	// Removing something can join what was around it into something new
	// ("<scr<script></script>ipt>"); repeat until a pass finds nothing. Each
	// pass only deletes, so this ends; the cap is for hostile input.
	for range maxSanitizePasses {
		spaced := out
		if liquid {
			spaced = spaceLiquidTagStarts(out)
		}
		next, again := sanitizePass(spaced, mjml, liquid)
		again = again || spaced != out
		if !again {
			out, _ = escapeHiddenElements(out)
			return out, true
		}
		out = next
	}
	// Still changing: give up on keeping markup rather than return something
	// a pass would still change.
	return html.EscapeString(out), true
}

// spaceLiquidTagStarts puts a space after each "<" inside Liquid that a
// browser would read as the start of a tag, an end tag, a comment or a
// processing instruction: in "{% if a<b %}" a browser sees a <b> element.
func spaceLiquidTagStarts(s string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	var b strings.Builder
	copied := 0
	for _, sp := range liquidSpans(s) {
		if sp[2] != 0 {
			continue // unterminated: Liquid rejects it, with its own message
		}
		for i := sp[0]; i < sp[1]-1; i++ {
			if s[i] != '<' {
				continue
			}
			if c := s[i+1]; isASCIILetter(c) || c == '/' || c == '!' || c == '?' {
				b.WriteString(s[copied : i+1])
				b.WriteByte(' ')
				copied = i + 1
			}
		}
	}
	if copied == 0 {
		return s
	}
	b.WriteString(s[copied:])
	return b.String()
}

const (
	maxSanitizePasses = 8
	// maxSanitizeDepth bounds recursion into comments and raw text; deeper
	// content that might need sanitising is dropped.
	maxSanitizeDepth = 4
)

// droppedNames are elements whose name, left inside something else (an
// attribute value, a comment, a longer tag name: "<scr<script>ipt>"), has
// its "<" escaped, since the bytes would read as that element to a parser
// other than a browser.
var droppedNames = []string{"script", "iframe", "object", "embed", "svg", "math"}

// rawTextElements are those whose content the tokenizer returns as one text
// token (golang.org/x/net/html readStartTag). Those that stay (style, title,
// and noscript inside a comment) have their content sanitised as HTML as
// well.
var rawTextElements = map[string]bool{
	"iframe": true, "noembed": true, "noframes": true, "noscript": true, "plaintext": true,
	"script": true, "style": true, "textarea": true, "title": true, "xmp": true,
}

// dangerousSchemes are the URL schemes that run script or carry a document,
// matched after normalizeURL: in CSS, in <meta content>, and in MJML
// attributes that are not URLs but may be copied into one.
var dangerousSchemes = []string{"javascript:", "vbscript:", "data:"}

// dangerousCSS are matched after normalizeCSS: URLs with those schemes in
// url() or @import, IE expressions and behaviours, and Mozilla XBL bindings.
var dangerousCSS = []string{"javascript:", "vbscript:", "data:", "expression(", "behavior:", "-moz-binding:"}

// sanitizePass is one pass of Sanitize.
func sanitizePass(src string, mjml, liquid bool) (string, bool) {
	s := sanitizer{src: src, mjml: mjml, liquid: liquid}
	s.run()
	return s.result()
}

// sanitizer copies src to out lazily: only once something changes is anything
// copied, which keeps untouched regions verbatim and the common case free.
type sanitizer struct {
	src     string
	depth   int
	out     strings.Builder
	copied  int // src[:copied] has been written to out or deliberately dropped
	changed bool
	// complete is false when src ends inside a tag, which the tokenizer
	// silently drops; see leftover.
	complete bool
	// probing is set while sanitising a tag that was completed artificially
	// (leftover); such a probe does not probe again.
	probing bool
	// mjml allows MJML elements and treats the text of mj-style and
	// mj-html-attribute (MJML).
	mjml bool
	// inComment allows Outlook's elements (src is a comment's body).
	inComment bool
	// liquid gives Liquid syntax its allowances; spans are src's Liquid.
	liquid bool
	spans  [][3]int
}

func (s *sanitizer) result() (string, bool) {
	if !s.changed {
		return s.src, false
	}
	s.flush(len(s.src))
	return s.out.String(), true
}

func (s *sanitizer) flush(pos int) {
	s.out.WriteString(s.src[s.copied:pos])
	s.copied = pos
}

// replace puts repl in place of src[start:end].
func (s *sanitizer) replace(start, end int, repl string) {
	s.flush(start)
	s.out.WriteString(repl)
	s.copied = end
	s.changed = true
}

func (s *sanitizer) run() {
	s.complete = true
	if strings.IndexByte(s.src, '<') < 0 {
		return
	}
	if s.liquid {
		s.spans = liquidSpans(s.src)
	}
	z := xhtml.NewTokenizer(strings.NewReader(s.src))
	pos := 0
	rawParent := "" // raw-text element whose content the next text token is
	// dropName is the element being removed with its content, dropDepth
	// how many of it are open.
	dropName, dropDepth := "", 0
	// MJML elements whose text content becomes CSS or an attribute value in
	// the compiled HTML; the tokenizer sees them as ordinary elements.
	mjText, mjAttr := "", ""
	for {
		tt := z.Next()
		if tt == xhtml.ErrorToken {
			break
		}
		start := pos
		pos += len(z.Raw())
		if dropDepth > 0 {
			s.replace(start, pos, "")
			nameBytes, _ := z.TagName()
			switch {
			case string(nameBytes) != dropName:
			case tt == xhtml.StartTagToken:
				dropDepth++
			case tt == xhtml.EndTagToken:
				dropDepth--
			}
			continue
		}
		switch tt {
		case xhtml.StartTagToken, xhtml.SelfClosingTagToken:
			nameBytes, hasAttr := z.TagName()
			name := string(nameBytes)
			if !elementAllowed(name, s.mjml, s.inComment) && !(s.mjml && mjmlLeftToMJML(name, "")) {
				s.replace(start, pos, "")
				// A browser honours "/>" on SVG and MathML elements only; the
				// tokenizer reads raw text after these even when written
				// self-closing, and so do browsers.
				foreignEmpty := tt == xhtml.SelfClosingTagToken && (name == "svg" || name == "math")
				if dropWithContent[name] && !foreignEmpty {
					dropName, dropDepth = name, 1
				}
				continue
			}
			if rawTextElements[name] {
				rawParent = name
			}
			if s.mjml && (name == "mj-style" || name == "mj-html-attribute") {
				mjText, mjAttr = name, lowerASCII(attrValue(s.src[start:pos], "name"))
			}
			s.tag(z, hasAttr, start, pos, name)
		case xhtml.EndTagToken:
			nameBytes, _ := z.TagName()
			if !elementAllowed(string(nameBytes), s.mjml, s.inComment) && !(s.mjml && mjmlLeftToMJML(string(nameBytes), "")) {
				s.replace(start, pos, "")
			}
			rawParent = ""
			// Only the element's own end tag ends its text: "</b>" inside
			// <mj-html-attribute> must not let the rest through.
			if string(nameBytes) == mjText {
				mjText = ""
			}
		case xhtml.TextToken:
			if mjText != "" {
				s.mjmlText(start, pos, mjText, mjAttr)
				continue
			}
			if rawParent == "" {
				continue
			}
			s.rawText(start, pos, rawParent)
			rawParent = ""
		case xhtml.CommentToken:
			s.comment(start, pos)
		}
	}
	if pos < len(s.src) {
		s.leftover(pos)
	}
}

// nested sanitises a fragment found inside a comment or raw-text element.
func (s *sanitizer) nested(fragment string, inComment bool) (string, bool) {
	if s.depth+1 > maxSanitizeDepth {
		if strings.IndexByte(fragment, '<') >= 0 {
			return "", true
		}
		return fragment, false
	}
	n := sanitizer{src: fragment, depth: s.depth + 1, mjml: s.mjml, liquid: s.liquid, inComment: inComment}
	n.run()
	return n.result()
}

// comment sanitises a comment's body as HTML: Outlook renders what is inside
// <!--[if mso]>...<![endif]-->, and old IE did for [if IE].
func (s *sanitizer) comment(start, end int) {
	raw := s.src[start:end]
	bodyStart, bodyEnd := 2, len(raw) // bogus comments: <!x>, <?x>, </3>
	if strings.HasPrefix(raw, "<!--") {
		bodyStart = 4
		for _, closer := range []string{"--!>", "-->"} {
			if len(raw) >= bodyStart+len(closer) && strings.HasSuffix(raw, closer) {
				bodyEnd = len(raw) - len(closer)
				break
			}
		}
	} else if strings.HasSuffix(raw, ">") {
		bodyEnd--
	}
	if bodyEnd <= bodyStart {
		return
	}
	body := raw[bodyStart:bodyEnd]
	if clean, changed := s.nested(body, true); changed {
		s.replace(start+bodyStart, start+bodyEnd, clean)
	}
}

// mjmlText sanitises the text of <mj-style> (a style sheet) and of
// <mj-html-attribute name="..."> (the value of that attribute on the
// compiled elements): an attribute outside the allowlist gets no value.
func (s *sanitizer) mjmlText(start, end int, elem, attr string) {
	text := s.src[start:end]
	switch {
	case elem == "mj-style" || attr == "style":
		clean, changed := sanitizeCSS(text)
		// An HTML parser reads this text with its character references
		// decoded ("&#X0" is a character the CSS normaliser drops); what
		// MJML hands on may be either reading, so both must be clean. A
		// sheet clean only raw is hostile input: it goes whole.
		// A style sheet has no use for "<" (outside a string), and markup
		// in one is read as elements by any HTML parser on the way.
		if decoded := xhtml.UnescapeString(clean); cssDangerous(decoded) || (elem == "mj-style" && strings.Contains(decoded, "<")) {
			clean, changed = "", true
		}
		if changed {
			s.replace(start, end, clean)
		}
	case !attrNameAllowed("", attr, false) || !attrValueAllowed("", attr, xhtml.UnescapeString(text)):
		s.replace(start, end, "")
	}
}

// attrValue returns the raw value of attribute key in a start tag, "" when
// absent.
func attrValue(rawTag, key string) string {
	for _, a := range scanAttrs(rawTag) {
		if lowerASCII(rawTag[a.keyStart:a.keyEnd]) == key {
			return xhtml.UnescapeString(rawTag[a.valStart:a.valEnd])
		}
	}
	return ""
}

// rawText sanitises the content of a raw-text element that stays.
func (s *sanitizer) rawText(start, end int, parent string) {
	text := s.src[start:end]
	clean, changed := s.nested(text, s.inComment)
	if parent == "style" {
		var cssChanged bool
		clean, cssChanged = sanitizeCSS(clean)
		changed = changed || cssChanged
	}
	if changed {
		s.replace(start, end, clean)
	}
}

// leftover deals with src ending inside a tag ("...<img src=x onerror=..."),
// which the tokenizer drops without a token. Browsers drop it too, but the
// bytes are still in what we store, and they may be Liquid
// ("{% if a<b %}"), so the tag is completed, sanitised, and kept if nothing
// in it needed removing.
func (s *sanitizer) leftover(pos int) {
	s.complete = false
	if s.probing {
		return
	}
	rest := s.src[pos:]
	for _, closer := range []string{">", `">`, `'>`} {
		probe := sanitizer{src: rest + closer, depth: s.depth, probing: true, mjml: s.mjml, inComment: s.inComment, liquid: s.liquid}
		probe.run()
		if !probe.complete {
			continue
		}
		clean, changed := probe.result()
		switch {
		case !changed:
		case strings.HasSuffix(clean, closer):
			s.replace(pos, len(s.src), strings.TrimSuffix(clean, closer))
		case strings.HasSuffix(clean, ">"):
			s.replace(pos, len(s.src), strings.TrimSuffix(clean, ">"))
		default:
			s.replace(pos, len(s.src), "")
		}
		return
	}
	s.replace(pos, len(s.src), "")
}

// tag removes the start tag src[start:end] if its element is allowed only
// in some forms and this is not one, and otherwise cuts the attributes
// outside the allowlist out of the raw bytes, so the rest of the tag stays
// verbatim.
func (s *sanitizer) tag(z *xhtml.Tokenizer, hasAttr bool, start, end int, name string) {
	raw := s.src[start:end]
	attrs := scanAttrs(raw)
	lookup := func(key string) (string, bool) {
		for _, a := range attrs {
			if lowerASCII(raw[a.keyStart:a.keyEnd]) == key {
				return xhtml.UnescapeString(raw[a.valStart:a.valEnd]), true
			}
		}
		return "", false
	}
	if !elementAttrsAllowed(name, lookup) {
		s.replace(start, end, "")
		return
	}
	if len(attrs) == 0 {
		return
	}
	var cut []attrSpan
	for _, a := range attrs {
		if !s.attrAllowed(name, raw, start, a, attrs) {
			cut = append(cut, a)
		}
	}
	if len(cut) == 0 {
		return
	}
	if !sameKeys(z, hasAttr, raw, attrs) {
		// scanAttrs disagrees with the tokenizer: it should mirror it, but
		// fall back to rebuilding the tag from what the tokenizer saw.
		s.replace(start, end, s.rebuildTag(raw, name))
		return
	}
	var b strings.Builder
	last := 0
	for _, a := range cut {
		b.WriteString(raw[last:a.keyStart])
		last = a.end
	}
	b.WriteString(raw[last:])
	s.replace(start, end, b.String())
}

// rebuildTag re-serialises a start tag with the attributes the allowlist
// keeps; Liquid gets no allowances here.
func (s *sanitizer) rebuildTag(raw, name string) string {
	z := xhtml.NewTokenizer(strings.NewReader(raw))
	z.Next()
	tok := z.Token()
	kept := tok.Attr[:0]
	for _, a := range tok.Attr {
		if attrNameAllowed(name, a.Key, s.inComment) && attrValueAllowed(name, a.Key, a.Val) {
			kept = append(kept, a)
		}
	}
	tok.Attr = kept
	return tok.String()
}

// attrAllowed reports whether attribute a of the start tag raw (of element
// tag, at src[tagStart:]) stays; see Sanitize for the Liquid allowances.
func (s *sanitizer) attrAllowed(tag, raw string, tagStart int, a attrSpan, attrs []attrSpan) bool {
	key := lowerASCII(raw[a.keyStart:a.keyEnd])
	val := xhtml.UnescapeString(raw[a.valStart:a.valEnd])
	if attrNameAllowed(tag, key, s.inComment) {
		return attrValueAllowed(tag, key, val)
	}
	if s.mjml && mjmlLeftToMJML(tag, key) {
		return !cssDangerous(val) && !urlDangerous(val)
	}
	if !s.liquid {
		return false
	}
	keyStart, keyEnd := tagStart+a.keyStart, tagStart+a.keyEnd
	if !s.overlapsLiquid(keyStart, keyEnd) || s.outputInTag(keyStart, keyEnd, tagStart, attrs) {
		// An output ({{ }}) between attributes would write attributes of
		// its value's choosing into every message.
		return false
	}
	if meaninglessName(key) {
		// What the name becomes once Liquid has run must be allowed, or
		// mean nothing either.
		effective := lowerASCII(s.outsideLiquid(keyStart, keyEnd))
		if effective == "" || meaninglessName(effective) {
			return true
		}
		return attrNameAllowed(tag, effective, s.inComment) && attrValueAllowed(tag, effective, val)
	}
	// A plain name inside Liquid ("if", "x" in "{% if x %}") is kept
	// without a value only: "{% assign onclick = 'f()' %}" is an onclick.
	return !a.hasValue && s.insideLiquid(keyStart, keyEnd)
}

// outputInTag reports whether src[start:end] has a byte in a Liquid output
// ("{{ ... }}") that begins between the attributes of the tag at tagStart
// rather than inside an attribute's value (href="{{ u | append: "?a" }}").
func (s *sanitizer) outputInTag(start, end, tagStart int, attrs []attrSpan) bool {
	for _, sp := range s.spansFrom(start) {
		if sp[0] >= end {
			break
		}
		if s.src[sp[0]+1] != '{' {
			continue
		}
		inValue := false
		for _, b := range attrs {
			if rel := sp[0] - tagStart; b.hasValue && b.valStart <= rel && rel < b.valEnd {
				inValue = true
				break
			}
		}
		if !inValue {
			return true
		}
	}
	return false
}

// overlapsLiquid reports whether src[start:end] has a byte in a Liquid
// span.
func (s *sanitizer) overlapsLiquid(start, end int) bool {
	sp := s.spansFrom(start)
	return len(sp) > 0 && sp[0][0] < end
}

// outsideLiquid returns the bytes of src[start:end] that lie outside every
// Liquid span.
func (s *sanitizer) outsideLiquid(start, end int) string {
	var b strings.Builder
	pos := start
	for _, sp := range s.spansFrom(start) {
		if sp[0] >= end {
			break
		}
		if sp[0] > pos {
			b.WriteString(s.src[pos:sp[0]])
		}
		pos = max(pos, sp[1])
	}
	if pos < end {
		b.WriteString(s.src[pos:end])
	}
	return b.String()
}

// insideLiquid reports whether src[start:end] lies within one Liquid span.
func (s *sanitizer) insideLiquid(start, end int) bool {
	sp := s.spansFrom(start)
	return len(sp) > 0 && sp[0][0] <= start && end <= sp[0][1]
}

// spansFrom returns the Liquid spans from the first that ends after pos
// (they are in order and do not overlap), so that looking one up costs a
// binary search, not a walk over all of them.
func (s *sanitizer) spansFrom(pos int) [][3]int {
	i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i][1] > pos })
	return s.spans[i:]
}

// sameKeys reports whether the tokenizer's attributes for the current tag
// have the keys scanAttrs found (the tokenizer keeps the first of duplicate
// keys, as browsers do).
func sameKeys(z *xhtml.Tokenizer, hasAttr bool, raw string, attrs []attrSpan) bool {
	seen := make(map[string]bool, len(attrs))
	var want []string
	for _, a := range attrs {
		k := lowerASCII(raw[a.keyStart:a.keyEnd])
		if !seen[k] {
			seen[k] = true
			want = append(want, k)
		}
	}
	var got []string
	for more := hasAttr; more; {
		var key []byte
		key, _, more = z.TagAttr()
		got = append(got, string(key))
	}
	return slices.Equal(got, want)
}

// attrSpan locates one attribute inside a raw start tag.
type attrSpan struct {
	keyStart, keyEnd int
	valStart, valEnd int // the value without its quotes; empty when none
	hasValue         bool
	end              int // just past the attribute, closing quote included
}

// scanAttrs finds the attributes of a complete raw start tag ("<a b=c>"),
// mirroring golang.org/x/net/html's Tokenizer.readTag, readTagAttrKey and
// readTagAttrVal step for step, so that the spans are exactly the attributes
// the tokenizer reports. Unlike the tokenizer it keeps duplicate keys:
// browsers ignore them, but they are still in the bytes we store and send.
func scanAttrs(raw string) []attrSpan {
	n := len(raw)
	i := 2 // "<" and the first byte of the name (readTagName)
	for i < n {
		c := raw[i]
		i++
		if isHTMLSpace(c) {
			break
		}
		if c == '/' || c == '>' {
			i--
			break
		}
	}
	skipSpace := func() {
		for i < n && isHTMLSpace(raw[i]) {
			i++
		}
	}
	skipSpace()
	var attrs []attrSpan
	for i < n {
		if raw[i] == '>' {
			break
		}
		a := attrSpan{keyStart: i}
		// readTagAttrKey
		for i < n {
			c := raw[i]
			i++
			if c == '=' && i == a.keyStart+1 {
				continue // "=" before a name is part of it
			}
			if c == '=' || isHTMLSpace(c) || c == '/' || c == '>' {
				i--
				break
			}
		}
		a.keyEnd = i
		// readTagAttrVal
		a.valStart, a.valEnd = i, i
		skipSpace()
		if i < n {
			c := raw[i]
			i++
			switch {
			case c == '/':
			case c != '=':
				i--
			default:
				a.hasValue = true
				skipSpace()
				if i < n {
					q := raw[i]
					i++
					switch q {
					case '>':
						i--
						a.valStart, a.valEnd = i, i
					case '\'', '"':
						a.valStart = i
						for i < n && raw[i] != q {
							i++
						}
						a.valEnd = i
						if i < n {
							i++
						}
					default:
						a.valStart = i - 1
						for i < n && !isHTMLSpace(raw[i]) && raw[i] != '>' {
							i++
						}
						a.valEnd = i
					}
				}
			}
		}
		a.end = i
		if a.keyEnd > a.keyStart {
			attrs = append(attrs, a)
		}
		skipSpace()
	}
	return attrs
}

func isHTMLSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f'
}

func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// isJunk reports runes that browsers (or, historically, IE) skip inside a URL
// scheme or CSS: ASCII control characters and space, DEL, C1 controls, and
// U+FFFD, which the tokenizer puts in place of NUL.
func isJunk(r rune) bool {
	return r <= 0x20 || (r >= 0x7f && r <= 0x9f) || r == utf8.RuneError
}

// normalizeURL drops junk and leading quote characters (IE treated backticks
// as quotes) and lower-cases ASCII, keeping at most max bytes.
func normalizeURL(v string, max int) string {
	var b strings.Builder
	for _, r := range v {
		if isJunk(r) || (b.Len() == 0 && (r == '`' || r == '\'' || r == '"')) {
			continue
		}
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
		if max > 0 && b.Len() >= max {
			break
		}
	}
	return b.String()
}

// urlDangerous reports whether an attribute value (already decoded) is a URL
// with a dangerous scheme.
func urlDangerous(v string) bool {
	n := normalizeURL(v, len("javascript:"))
	for _, scheme := range dangerousSchemes {
		if strings.HasPrefix(n, scheme) {
			return true
		}
	}
	return false
}

// containsDangerousScheme reports whether a dangerous scheme appears anywhere
// in a decoded attribute value.
func containsDangerousScheme(v string) bool {
	n := normalizeURL(v, 0)
	for _, scheme := range dangerousSchemes {
		if strings.Contains(n, scheme) {
			return true
		}
	}
	return false
}

// normalizeCSS removes comments, decodes CSS escapes ("\6a" is "j"), drops
// junk and lower-cases ASCII, so that patterns can be matched as written.
func normalizeCSS(css string) string {
	var b strings.Builder
	write := func(r rune) {
		if isJunk(r) {
			return
		}
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	for i := 0; i < len(css); {
		switch {
		case strings.HasPrefix(css[i:], "/*"):
			end := strings.Index(css[i+2:], "*/")
			if end < 0 {
				return b.String()
			}
			i += 2 + end + 2
		case css[i] == '\\':
			i++
			j := i
			for j < len(css) && j-i < 6 && isHex(css[j]) {
				j++
			}
			if j > i {
				cp := rune(0)
				for _, c := range css[i:j] {
					cp = cp*16 + rune(hexVal(byte(c)))
				}
				if cp == 0 || cp > utf8.MaxRune || (cp >= 0xd800 && cp <= 0xdfff) {
					cp = utf8.RuneError
				}
				write(cp)
				i = j
				// One whitespace after a hex escape belongs to it.
				if strings.HasPrefix(css[i:], "\r\n") {
					i += 2
				} else if i < len(css) && isHTMLSpace(css[i]) {
					i++
				}
				continue
			}
			if i < len(css) {
				r, size := utf8.DecodeRuneInString(css[i:])
				if r != '\n' && r != '\r' && r != '\f' { // escaped newline: line continuation
					write(r)
				}
				i += size
			}
		default:
			r, size := utf8.DecodeRuneInString(css[i:])
			write(r)
			i += size
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexVal(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// cssDangerous reports whether CSS text loads a dangerous URL or runs code.
func cssDangerous(css string) bool {
	n := normalizeCSS(css)
	for _, p := range dangerousCSS {
		if strings.Contains(n, p) {
			return true
		}
	}
	return false
}

// sanitizeCSS removes the dangerous declarations, selectors or at-rules from
// a style sheet, cutting at ; { and }. If what remains is still dangerous
// (a comment or string spanning the cuts), the whole sheet goes.
func sanitizeCSS(css string) (string, bool) {
	if !cssDangerous(css) {
		return css, false
	}
	var b strings.Builder
	segStart := 0
	for i := 0; i <= len(css); i++ {
		if i < len(css) && css[i] != ';' && css[i] != '{' && css[i] != '}' {
			continue
		}
		if seg := css[segStart:i]; !cssDangerous(seg) {
			b.WriteString(seg)
		}
		if i < len(css) {
			b.WriteByte(css[i])
		}
		segStart = i + 1
	}
	if out := b.String(); !cssDangerous(out) {
		return out, true
	}
	return "", true
}

// escapeHiddenElements escapes the "<" of a dropped element's name that
// survives inside something else: in "<scr<script>ipt>" the tokenizer (and a
// browser) sees one tag named "scr<script", harmless, but the bytes still
// read "<script>" to any other parser along the way.
func escapeHiddenElements(s string) (string, bool) {
	var b strings.Builder
	copied := 0 // s[:copied] is in b; one pass, so hostile input stays linear
	for i := strings.IndexByte(s, '<'); i >= 0; {
		if hiddenElementAt(s, i) {
			if copied == 0 {
				b.Grow(len(s) + 64)
			}
			b.WriteString(s[copied:i])
			b.WriteString("&lt;")
			copied = i + 1
		}
		j := strings.IndexByte(s[i+1:], '<')
		if j < 0 {
			break
		}
		i += j + 1
	}
	if copied == 0 {
		return s, false
	}
	b.WriteString(s[copied:])
	return b.String(), true
}

// hiddenElementAt reports whether a dropped element's start tag begins at
// s[i] ("<script", "<iframe", ...) with its name complete there.
func hiddenElementAt(s string, i int) bool {
	for _, name := range droppedNames {
		end := i + 1 + len(name)
		if end > len(s) || !strings.EqualFold(s[i+1:end], name) {
			continue
		}
		if end == len(s) || isHTMLSpace(s[end]) || s[end] == '/' || s[end] == '>' {
			return true
		}
	}
	return false
}

// IsMJML reports whether content is MJML (it starts with "<mjml" after
// leading white space) rather than HTML to be wrapped.
func IsMJML(content string) bool {
	return strings.HasPrefix(strings.TrimLeftFunc(content, unicode.IsSpace), "<mjml")
}
