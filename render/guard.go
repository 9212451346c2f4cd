package render

import (
	"strings"
	"unicode/utf8"

	xhtml "golang.org/x/net/html"
)

// mayNeedSanitize is a fast, conservative check run on every rendered
// message: false means Sanitize would return s unchanged (the one exception,
// on* attributes without a value, runs no code). Tokenizing a 90 KB message
// costs several times what rendering it does, so the tokenizer only runs on
// output that contains one of the ingredients every removal needs:
//
//   - "<" or "</" followed by script, iframe, object or embed;
//   - an on* attribute name followed by "=" (dropped attributes have a name
//     that starts after a space, "/" or a quote);
//   - a ":" after letters ending in script, data, binding or behavior, and a
//     "(" after letters ending in expression, with junk characters skipped;
//   - a character reference that decodes to a letter, ":", "(", "\", "/",
//     "*" or a junk character, since those can spell the above in disguise;
//   - "\" or "/*" anywhere (CSS escapes and comments).
//
// FuzzMayNeedSanitize checks the claim against Sanitize.
func mayNeedSanitize(s string) bool {
	return hasDroppedElement(s) || hasOnAttribute(s) || hasSuspectPunctuation(s) ||
		strings.IndexByte(s, '\\') >= 0 || strings.Contains(s, "/*") || hasSuspectReference(s)
}

var droppedNames = []string{"script", "iframe", "object", "embed"}

func hasDroppedElement(s string) bool {
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
		for _, name := range droppedNames {
			if hasPrefixFold(s[j:], name) {
				return true
			}
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
			if !hasPrefixFold(s[p:], "on") {
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
// letters before it (skipping bytes below 0x21, DEL and all non-ASCII bytes,
// which covers every junk character) end with one of words.
func lettersBeforeEndIn(s string, sep byte, words []string) bool {
	var buf [10]byte // letters, nearest first
	for i := 0; ; {
		k := strings.IndexByte(s[i:], sep)
		if k < 0 {
			return false
		}
		at := i + k
		i = at + 1
		n := 0
	walk:
		for j := at - 1; j >= 0 && n < len(buf); j-- {
			switch c := s[j]; {
			case c <= 0x20 || c >= 0x7f:
			case 'a' <= c && c <= 'z':
				buf[n] = c
				n++
			case 'A' <= c && c <= 'Z':
				buf[n] = c + 'a' - 'A'
				n++
			default:
				break walk
			}
		}
		for _, w := range words {
			if n >= len(w) && reversedEqual(buf[:len(w)], w) {
				return true
			}
		}
	}
}

// reversedEqual reports whether rev, read backwards, is w.
func reversedEqual(rev []byte, w string) bool {
	for k := range rev {
		if rev[k] != w[len(w)-1-k] {
			return false
		}
	}
	return true
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

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
