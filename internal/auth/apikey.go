// Package auth handles the two credentials of Tidings: API keys, stored only
// as hashes, and dashboard session tokens (JWTs, HS256 or OIDC).
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"math/big"
	"strings"
)

// KeyPrefix starts every API key (ADDENDUM section 2).
const KeyPrefix = "tdk_"

const (
	keyRandomLen    = 40 // base62 characters, about 238 bits
	displayedPrefix = 12
	base62          = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// NewKey is a freshly generated key: Raw is shown once, Hash is stored.
type NewKey struct {
	Raw    string
	Prefix string
	Hash   []byte
}

// GenerateKey makes a random API key.
func GenerateKey() NewKey {
	var sb strings.Builder
	sb.WriteString(KeyPrefix)
	max := big.NewInt(int64(len(base62)))
	for i := 0; i < keyRandomLen; i++ {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		sb.WriteByte(base62[n.Int64()])
	}
	raw := sb.String()
	return NewKey{Raw: raw, Prefix: raw[:displayedPrefix], Hash: HashKey(raw)}
}

// HashKey is the stored form of a key. Keys carry ~238 random bits, so a
// fast unsalted hash is safe and keeps the lookup a single index probe.
func HashKey(raw string) []byte {
	h := sha256.Sum256([]byte(raw))
	return h[:]
}

// LooksLikeKey reports whether raw has the shape of an API key, so garbage
// is rejected without a database round trip.
func LooksLikeKey(raw string) bool {
	if !strings.HasPrefix(raw, KeyPrefix) || len(raw) < len(KeyPrefix)+32 || len(raw) > 256 {
		return false
	}
	for _, r := range raw[len(KeyPrefix):] {
		if !strings.ContainsRune(base62, r) {
			return false
		}
	}
	return true
}

// IsSessionToken applies the ADDENDUM rule: three dot-separated parts make a
// session token, anything else is an API key.
func IsSessionToken(tok string) bool { return strings.Count(tok, ".") == 2 }
