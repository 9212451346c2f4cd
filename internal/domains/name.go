package domains

import (
	"crypto/rand"
	"encoding/base32"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// Limits of a domain name (RFC 1035 section 2.3.4). A domain must also
// leave room for its longest record name, "<dkimToken>._domainkey.<domain>".
const (
	maxLabel   = 63
	maxName    = 253
	tokenBytes = 16 // 128 bits: unguessable
	tokenLen   = 26 // base32 characters of tokenBytes
	maxDomain  = maxName - tokenLen - len("._domainkey.")
)

// Normalize turns what a user typed into the stored form of a domain name:
// trimmed, IDNA to ASCII with the Lookup profile (which lower-cases), no
// trailing dot. It returns a message for details.fields.domain when the name
// is not a domain this service can verify: fewer than two labels, a label
// that is not letters, digits and inner hyphens of at most 63 characters, a
// name too long for its DKIM records, or an IP address.
func Normalize(s string) (string, string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", "is required"
	}
	if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return "", "must be a domain name, not an IP address"
	}
	a, err := idna.Lookup.ToASCII(s)
	if err != nil {
		return "", "is not a valid domain name"
	}
	a = strings.TrimSuffix(a, ".")
	if len(a) > maxName {
		return "", "must be at most 253 characters"
	}
	if len(a) > maxDomain {
		return "", "is too long to carry its DKIM records (at most " + strconv.Itoa(maxDomain) + " characters)"
	}
	labels := strings.Split(a, ".")
	if len(labels) < 2 {
		return "", "must have at least two labels, like example.com"
	}
	for _, l := range labels {
		if !ldh(l) {
			return "", "is not a valid domain name: each label is 1-63 letters, digits or inner hyphens"
		}
	}
	if allDigits(labels[len(labels)-1]) {
		return "", "must be a domain name, not an IP address"
	}
	return a, ""
}

func ldh(l string) bool {
	if l == "" || len(l) > maxLabel || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

var tokenEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newToken returns 128 random bits as lower-case base32, a valid DNS label.
func newToken() string {
	b := make([]byte, tokenBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return tokenEncoding.EncodeToString(b)
}
