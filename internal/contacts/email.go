package contacts

import (
	"net/mail"
	"strings"
)

// NormalizeEmail returns the stored form of an address (trimmed, lower-cased)
// and whether it is valid: a bare addr-spec with a dotted domain (ADDENDUM
// section 3).
func NormalizeEmail(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || len(s) > 254 || strings.ContainsAny(s, " <>\"") {
		return s, false
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" {
		return s, false
	}
	at := strings.LastIndexByte(s, '@')
	domain := s[at+1:]
	if at < 1 || !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") ||
		strings.HasSuffix(domain, ".") || strings.Contains(domain, "..") {
		return s, false
	}
	return s, true
}
