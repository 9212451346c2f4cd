// Package storable is the boundary where input meets PostgreSQL: it says
// whether text and numbers from a request can be stored as given, so that
// the API refuses them as VALIDATION_ERROR naming the field instead of
// letting the database fail (SQLSTATE 22021, 22P02, 22003). It does no I/O.
//
// Text: PostgreSQL's text and jsonb hold valid UTF-8 without NUL; jsonb
// also refuses the escapes \u0000 and unpaired surrogates (\ud800), which
// Go's JSON decoder would silently turn into U+FFFD. Numbers: see Number.
package storable

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Problems, as the ends of "<field> ..." sentences.
const (
	msgUTF8      = "must be valid UTF-8 text"
	msgNUL       = "must not contain NUL characters"
	msgSurrogate = "must not contain unpaired UTF-16 surrogate escapes (such as \\ud800)"
	msgJSON      = "is not valid JSON"
)

// Text returns what is wrong with s as PostgreSQL text, or "" when it can
// be stored.
func Text(s string) string {
	switch {
	case !utf8.ValidString(s):
		return msgUTF8
	case strings.IndexByte(s, 0) >= 0:
		return msgNUL
	}
	return ""
}

// Number limits: written out in full without an exponent, as PostgreSQL's
// numeric (and so jsonb) stores and returns it, a number has at most
// MaxIntDigits digits before the decimal point and MaxScale after it. So
// |x| < 1e20 (every int64 and uint64 fits), the finest step is 1e-20, and no
// stored number is longer than 42 characters: 1e99999 would be stored as a
// 100,000-digit value, 1e131072 overflows numeric.
const (
	MaxIntDigits = 20
	MaxScale     = 20
	// maxExponent keeps the arithmetic below away from overflow; anything
	// near it fails the digit limits anyway.
	maxExponent = 10000
)

// NumberProblem is the message for a number outside the limits.
const NumberProblem = "must be a number with at most 20 digits before and 20 after the decimal point when written out in full"

// Number returns what is wrong with the JSON number literal n, or "" when
// it is within the limits. n must be a valid JSON number.
func Number(n string) string {
	s := strings.TrimPrefix(n, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(expPart, "+"))
		if err != nil || e > maxExponent || e < -maxExponent {
			return NumberProblem
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	// scale is the number of digits after the point as numeric keeps them
	// (trailing zeros included: 1.50 stays 1.50).
	if scale := len(frac) - exp; scale > MaxScale {
		return NumberProblem
	}
	digits := intPart + frac
	lead := len(digits) - len(strings.TrimLeft(digits, "0"))
	if lead == len(digits) {
		return "" // zero
	}
	// The point falls after len(intPart)+exp digits; the integer digits are
	// those before it, less leading zeros.
	if intDigits := len(intPart) + exp - lead; intDigits > MaxIntDigits {
		return NumberProblem
	}
	return ""
}

// JSON finds the first string (object key or value) in the JSON document
// doc that PostgreSQL cannot hold: raw invalid UTF-8, a \u0000 escape, or an
// unpaired surrogate escape. It returns the string's path ("properties.k",
// "items[2]", "" for the document itself) and the problem; ok is true when
// there is none. doc must be valid JSON; a document it cannot follow is
// reported at the path reached.
func JSON(doc []byte) (path, problem string, ok bool) {
	s := scanner{b: doc}
	s.value("")
	if s.problem == "" {
		return "", "", true
	}
	return s.path, s.problem, false
}

type scanner struct {
	b       []byte
	i       int
	path    string
	problem string
}

func (s *scanner) fail(path, problem string) {
	if s.problem == "" {
		s.path, s.problem = path, problem
	}
}

func (s *scanner) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// join names key below at, the key cut by shortKey.
func join(at, key string) string {
	if at == "" {
		return shortKey(key)
	}
	return KeyField(at, key)
}

// value scans one value at path. It is iterative over containers' members
// but recursive over nesting; the body limit (1 MiB) bounds the depth, and
// encoding/json has already refused anything nested over 10,000 levels.
func (s *scanner) value(path string) {
	s.ws()
	if s.i >= len(s.b) || s.problem != "" {
		return
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.i++
		for s.problem == "" {
			s.ws()
			if s.i >= len(s.b) {
				s.fail(path, msgJSON)
				return
			}
			if s.b[s.i] == '}' {
				s.i++
				return
			}
			if s.b[s.i] == ',' {
				s.i++
				continue
			}
			key, bad := s.str()
			if bad != "" {
				s.fail(join(path, key), bad)
				return
			}
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == ':' {
				s.i++
			}
			s.value(join(path, key))
		}
	case c == '[':
		s.i++
		for n := 0; s.problem == ""; {
			s.ws()
			if s.i >= len(s.b) {
				s.fail(path, msgJSON)
				return
			}
			switch s.b[s.i] {
			case ']':
				s.i++
				return
			case ',':
				s.i++
				n++
				continue
			}
			s.value(path + "[" + strconv.Itoa(n) + "]")
		}
	case c == '"':
		if _, bad := s.str(); bad != "" {
			s.fail(path, bad)
		}
	default:
		start := s.i
		for s.i < len(s.b) && !strings.ContainsRune(",]} \t\n\r", rune(s.b[s.i])) {
			s.i++
		}
		if s.i == start {
			s.fail(path, msgJSON)
		}
	}
}

// str scans the string at s.i. It returns its text (with U+FFFD where it
// cannot be read, for naming keys) and its first problem, if any.
func (s *scanner) str() (text, problem string) {
	s.i++ // opening quote
	var out strings.Builder
	bad := ""
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return out.String(), bad
		case c == '\\' && s.i+1 < len(s.b):
			if s.b[s.i+1] != 'u' {
				out.WriteByte(s.b[s.i+1])
				s.i += 2
				continue
			}
			r, ok := hex4(s.b, s.i+2)
			s.i += 6
			switch {
			case !ok:
				bad = cmp.Or(bad, msgJSON)
			case r == 0:
				bad = cmp.Or(bad, msgNUL)
			case r >= 0xDC00 && r <= 0xDFFF:
				bad = cmp.Or(bad, msgSurrogate)
				out.WriteRune(utf8.RuneError)
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := rune(0), false
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					lo, ok = hex4(s.b, s.i+2)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					bad = cmp.Or(bad, msgSurrogate)
					out.WriteRune(utf8.RuneError)
				} else {
					s.i += 6
					out.WriteRune(0x10000 + (r-0xD800)<<10 + (lo - 0xDC00))
				}
			default:
				out.WriteRune(r)
			}
		case c < utf8.RuneSelf:
			out.WriteByte(c)
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size <= 1 {
				bad = cmp.Or(bad, msgUTF8)
				out.WriteRune(utf8.RuneError)
			} else {
				out.WriteRune(r)
			}
			s.i += max(size, 1)
		}
	}
	return out.String(), msgJSON
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(v), err == nil
}

// Limits of a properties object (contacts and events share them).
const (
	MaxProperties  = 200 // keys in one object (one write, for contacts)
	MaxPropertyKey = 128 // characters in a key
)

// Properties judges a properties object by the rules contacts and events
// share: the number of keys, each key, and, through value, each value. value
// is called in key order, only for keys that are fine, and returns what is
// wrong with the value ("" when fine). Every problem is reported through
// add, under "properties" or "properties.<key>" (KeyField).
func Properties[V any](props map[string]V, value func(key string, v V) string, add func(field, problem string)) {
	keys, keyProblems, whole := propertyKeys(props)
	if whole != "" {
		add("properties", whole)
	}
	for _, k := range keys {
		problem := keyProblems[k]
		if problem == "" {
			problem = value(k, props[k])
		}
		if problem != "" {
			add(KeyField("properties", k), problem)
		}
	}
}

// propertyKeys returns the keys of a properties object in order, each with
// what is wrong with it as a key ("" when fine), and what is wrong with the
// object as a whole (too many keys; "" when fine).
func propertyKeys[V any](props map[string]V) (keys []string, keyProblems map[string]string, whole string) {
	if len(props) > MaxProperties {
		whole = "at most " + strconv.Itoa(MaxProperties) + " properties"
	}
	keys = make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
		if p := PropertyKey(k); p != "" {
			keyProblems = setProblem(keyProblems, k, p)
		}
	}
	slices.Sort(keys)
	return keys, keyProblems, whole
}

// PropertyKey returns what is wrong with k as a property key, "" when it
// is fine: 1-MaxPropertyKey characters of storable text.
func PropertyKey(k string) string {
	switch {
	case k == "" || utf8.RuneCountInString(k) > MaxPropertyKey:
		return "keys must be 1-" + strconv.Itoa(MaxPropertyKey) + " characters"
	case Text(k) != "":
		return "keys " + Text(k)
	}
	return ""
}

// KeyField is the field name "<prefix>.<key>" that a problem with a
// property is reported under, the key cut as shortKey does.
func KeyField(prefix, key string) string {
	return prefix + "." + shortKey(key)
}

// shortKey cuts a key longer than any valid one to MaxPropertyKey
// characters and marks it "...": a body of one 1 MiB key must not get
// that key back in the answer and the log.
func shortKey(key string) string {
	n := 0
	for i := range key {
		if n == MaxPropertyKey {
			return key[:i] + "..."
		}
		n++
	}
	return key
}

func setProblem(m map[string]string, k, p string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = p
	return m
}
