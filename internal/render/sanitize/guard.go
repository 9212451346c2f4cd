package sanitize

import (
	"strings"
	"unicode/utf8"

	xhtml "golang.org/x/net/html"
)

// MayNeed is a fast, conservative check run on every rendered
// message: false means the message holds nothing that could run script
// (FuzzMayNeedSanitize checks this against findScript, which parses like a
// browser) and no element outside the allowlist. Values that bring
// attributes or URL schemes outside the allowlist but no script (a
// title="x" in a value, an ftp: link) are not looked for: the template
// itself was judged when it was saved. Tokenizing a 90 KB message costs
// several times what rendering it does, so the tokenizer only runs on
// output that contains one of these ingredients:
//
//   - "<" or "</" followed by the name of an element outside the
//     allowlist (Outlook's, which MJML's conditional comments hold, count
//     as inside it): every script element, foreign content (where CDATA
//     lives), frame and plugin has such a name;
//   - an on* attribute name followed by "=" (dropped attributes have a name
//     that starts after a space, "/" or a quote);
//   - a ":" after letters ending in script, data, binding or behavior, and a
//     "(" after letters ending in expression, with junk characters skipped;
//   - a character reference that decodes to a letter, ":", "(", "\", "/",
//     "*" or a junk character, since those can spell the above in disguise;
//   - "\" anywhere (CSS escapes);
//   - a CSS comment whose removal could join a letter before it to a
//     letter, ":" or "(" after it ("da/* */ta:"); comments between rules or
//     declarations, common in style sheets, cannot.
func MayNeed(s string) bool {
	return hasDisallowedElement(s) || hasOnAttribute(s) || hasSuspectPunctuation(s) ||
		strings.IndexByte(s, '\\') >= 0 || hasJoiningComment(s) || hasSuspectReference(s)
}

// hasJoiningComment reports a "/*" comment with a letter or "-" before it
// and a letter, "-", ":" or "(" after it, looking past junk, and past the
// comments that follow it, which CSS normalisation removes as well. (A
// comment right after another needs no look back: the first of them is
// checked with everything that follows.)
func hasJoiningComment(s string) bool {
	for i := 0; ; {
		k := strings.Index(s[i:], "/*")
		if k < 0 {
			return false
		}
		start := i + k
		end := len(s)
		if e := strings.Index(s[start+2:], "*/"); e >= 0 {
			end = start + 2 + e + 2
		}
		before := byte(0)
		for j := start - 1; j >= 0; j-- {
			if !isJunkByte(s[j]) {
				before = s[j]
				break
			}
		}
		after := significantAfter(s, end)
		if (isASCIILetter(before) || before == '-') &&
			(isASCIILetter(after) || after == '-' || after == ':' || after == '(' || after == 0xff) {
			return true
		}
		i = start + 2
	}
}

// maxCommentSkips bounds how many following comments significantAfter
// looks past; after that it answers 0xff, which hasJoiningComment takes
// for a letter.
const maxCommentSkips = 8

// significantAfter returns the byte at or after s[pos:] that CSS
// normalisation keeps, skipping junk and comments, or 0 at the end.
func significantAfter(s string, pos int) byte {
	for skips := 0; ; {
		for pos < len(s) && isJunkByte(s[pos]) {
			pos++
		}
		if !strings.HasPrefix(s[pos:], "/*") {
			if pos == len(s) {
				return 0
			}
			return s[pos]
		}
		if skips++; skips > maxCommentSkips {
			return 0xff
		}
		e := strings.Index(s[pos+2:], "*/")
		if e < 0 {
			return 0
		}
		pos += 2 + e + 2
	}
}

// isJunkByte reports bytes that may be, or be part of, a junk character:
// the guard's walks skip them all.
func isJunkByte(c byte) bool {
	return c <= 0x20 || c >= 0x7f
}

// hasDisallowedElement reports a "<" or "</" followed by the name of an
// element that is neither in htmlElements nor in msoElements (Outlook's
// elements appear in MJML's conditional comments; the guard does not tell
// comments apart). The name ends where the tokenizer ends it.
func hasDisallowedElement(s string) bool {
	var buf [24]byte
	for i := 0; ; {
		k := strings.IndexByte(s[i:], '<')
		if k < 0 {
			return false
		}
		i += k + 1
		j := i
		if j < len(s) && s[j] == '/' {
			j++
		}
		if j >= len(s) || !isASCIILetter(s[j]) {
			continue
		}
		n := 0
		for ; j < len(s) && !isHTMLSpace(s[j]) && s[j] != '/' && s[j] != '>'; j++ {
			if n == len(buf) {
				return true // longer than any allowed name
			}
			c := s[j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			buf[n] = c
			n++
		}
		if name := buf[:n]; !htmlElements[string(name)] && !msoElements[string(name)] {
			return true
		}
	}
}

func hasOnAttribute(s string) bool {
	for i := 0; ; {
		k := strings.IndexByte(s[i:], '=')
		if k < 0 {
			return false
		}
		eq := i + k
		i = eq + 1
		j := eq
		for j > 0 && isHTMLSpace(s[j-1]) {
			j--
		}
		nameEnd := j
		for j > 0 && !isNameStop(s[j-1]) {
			j--
		}
		// The tokenizer's attribute name may start where this run starts
		// (after a space or "/") or after a quote inside it (the closing
		// quote of the previous value, "a="x"onclick=").
		for p := j; p+2 <= nameEnd; p++ {
			if s[p]|0x20 != 'o' || s[p+1]|0x20 != 'n' {
				continue
			}
			if p == j && p > 0 && (isHTMLSpace(s[p-1]) || s[p-1] == '/') ||
				p > j && (s[p-1] == '"' || s[p-1] == '\'') {
				return true
			}
		}
	}
}

// isNameStop ends the backwards walk over an attribute name where the
// tokenizer ends a name.
func isNameStop(c byte) bool {
	return isHTMLSpace(c) || c == '/' || c == '>' || c == '='
}

// suspectWords end the letters before ":" or "(" that make Sanitize look.
var (
	colonWords = []string{"script", "data", "binding", "behavior"}
	parenWords = []string{"expression"}
)

func hasSuspectPunctuation(s string) bool {
	return lettersBeforeEndIn(s, ':', colonWords) || lettersBeforeEndIn(s, '(', parenWords)
}

// lettersBeforeEndIn reports whether, for some occurrence of sep, the ASCII
// letters before it end with one of words (at most 8), skipping bytes below
// 0x21, DEL and all non-ASCII bytes, which covers every junk character. The
// walk back ends at any other byte or once no word can match, so each byte
// is walked at most once: sep itself ends the walk of the next occurrence.
func lettersBeforeEndIn(s string, sep byte, words []string) bool {
	for i := 0; ; {
		k := strings.IndexByte(s[i:], sep)
		if k < 0 {
			return false
		}
		at := i + k
		i = at + 1
		alive := uint8(1)<<len(words) - 1
		n := 0 // letters matched so far
		for j := at - 1; j >= 0 && alive != 0; j-- {
			c := s[j]
			if c <= 0x20 || c >= 0x7f {
				continue
			}
			if !isASCIILetter(c) {
				break
			}
			c |= 0x20
			for w, word := range words {
				if alive&(1<<w) == 0 {
					continue
				}
				if word[len(word)-1-n] != c {
					alive &^= 1 << w
				} else if n == len(word)-1 {
					return true
				}
			}
			n++
		}
	}
}

// hasSuspectReference reports a character reference that decodes to
// something Sanitize's patterns are made of.
func hasSuspectReference(s string) bool {
	for i := 0; ; {
		k := strings.IndexByte(s[i:], '&')
		if k < 0 {
			return false
		}
		i += k + 1
		rest := s[i:]
		if strings.HasPrefix(rest, "#") {
			if suspectNumericReference(rest[1:]) {
				return true
			}
			continue
		}
		n := 0
		for n < len(rest) && n < 40 && (isASCIILetter(rest[n]) || isDigit(rest[n])) {
			n++
		}
		if n == 0 || harmlessReferences[rest[:n]] {
			continue
		}
		ref := "&" + rest[:n]
		if n < len(rest) && rest[n] == ';' {
			ref += ";"
		}
		decoded := xhtml.UnescapeString(ref)
		if decoded == ref {
			continue // not a reference
		}
		for _, r := range decoded {
			if suspectRune(r) {
				return true
			}
		}
	}
}

// harmlessReferences are common in messages and decode to harmless text.
var harmlessReferences = map[string]bool{
	"amp": true, "nbsp": true, "lt": true, "gt": true, "quot": true, "apos": true,
	"zwnj": true, "zwj": true, "shy": true, "copy": true, "reg": true, "trade": true,
	"hellip": true, "mdash": true, "ndash": true, "lsquo": true, "rsquo": true,
	"ldquo": true, "rdquo": true, "middot": true, "bull": true, "euro": true,
}

// suspectNumericReference decodes the number of a numeric reference (what
// follows "&#") the way HTML does, without a length limit, and reports
// whether the character is suspect. Code points that HTML replaces (0,
// surrogates, beyond U+10FFFF) become U+FFFD, which is junk; C1 controls
// count as suspect although HTML maps most of them to Windows-1252.
func suspectNumericReference(s string) bool {
	base, i := rune(10), 0
	if i < len(s) && (s[i] == 'x' || s[i] == 'X') {
		base, i = 16, i+1
	}
	start := i
	v := rune(0)
	for ; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) && !(base == 16 && isHex(c)) {
			break
		}
		v = v*base + rune(hexVal(c))
		if v > utf8.MaxRune {
			v = utf8.MaxRune + 1 // saturate; stays invalid
		}
	}
	if i == start {
		return false
	}
	if v == 0 || v > utf8.MaxRune || (v >= 0xd800 && v <= 0xdfff) {
		v = utf8.RuneError
	}
	return suspectRune(v)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func suspectRune(r rune) bool {
	return isJunk(r) || r < 0x80 && isASCIILetter(byte(r)) ||
		r == ':' || r == '(' || r == '\\' || r == '/' || r == '*'
}

func isASCIILetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
