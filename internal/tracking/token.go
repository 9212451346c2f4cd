// Package tracking makes and checks the signed tokens behind the open pixel,
// the click redirects and the unsubscribe page (ADDENDUM section 8), and
// rewrites a rendered HTML message so that it carries them. It does no I/O:
// the api's /t/ handlers and the delivery code call it per recipient.
package tracking

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"strings"
)

// Kind says what a token may be used for. It is signed into the token, so an
// open token cannot be replayed at the click or unsubscribe endpoint.
type Kind byte

// Token kinds. The values are part of the wire format: never renumber.
const (
	KindOpen        Kind = 1
	KindClick       Kind = 2
	KindUnsubscribe Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindOpen:
		return "open"
	case KindClick:
		return "click"
	case KindUnsubscribe:
		return "unsubscribe"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// Limits of the token format. They bound what Parse decodes, so a request
// with a huge or hostile path costs nothing before it is refused.
const (
	// MaxIDLen is the longest tenant, send or contact id a token carries:
	// generated ids are 30 bytes, caller-chosen ones at most 64 (ADDENDUM 3).
	MaxIDLen = 64
	// MaxURLLen is the longest link that is tracked. Longer links are left
	// as they are by Rewrite rather than making a token no client keeps.
	MaxURLLen = 2048
	// MaxTokenLen is the longest token string Parse looks at: the base64url
	// length of the largest click token.
	MaxTokenLen = (headerLen + 3*(1+MaxIDLen) + 2 + MaxURLLen + macLen + 2) / 3 * 4
)

const (
	version1  = 1
	headerLen = 2  // version, kind
	macLen    = 16 // HMAC-SHA256 truncated to 128 bits
	// keyLabel is the HKDF "info": it ties the derived key to this purpose
	// and this format version, so TRACKING_SECRET can later derive other
	// keys (or a v2 token key) without one MAC being valid for another use.
	keyLabel = "tidings/tracking-token/v1"
)

// ErrInvalidToken is the only error Parse returns: the handler answers 404
// whatever the reason, and a reason would only help someone probing tokens.
var ErrInvalidToken = errors.New("tracking: invalid token")

// IDs name the send a message belongs to. ContactID is needed only by
// unsubscribe tokens; Topic, in an unsubscribe token, is the topic of the
// message, which its one-click unsubscribe leaves ("" for none).
type IDs struct {
	TenantID  string
	SendID    string
	ContactID string
	Topic     string
}

// Claims is what a valid token says. URL is set for click tokens only; it is
// the link exactly as the email contained it (after the whitespace clean-up
// browsers do), always an absolute http(s) URL free of control characters,
// so a handler can put it in a Location header as it is.
type Claims struct {
	Kind Kind
	IDs
	URL string
}

// Signer makes and checks tokens with a key derived from TRACKING_SECRET.
// It is safe for concurrent use.
type Signer struct {
	key []byte
}

// NewSigner derives the token key from secret (cfg.TrackingSecret). The
// derivation does not make a weak secret strong: it separates purposes.
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) == 0 {
		return nil, errors.New("tracking: empty secret")
	}
	key, err := hkdf.Key(sha256.New, secret, nil, keyLabel, 32)
	if err != nil {
		return nil, fmt.Errorf("tracking: derive key: %w", err)
	}
	return &Signer{key: key}, nil
}

// OpenToken returns the token of the open pixel of one send.
func (s *Signer) OpenToken(ids IDs) (string, error) {
	return s.sign(nil, Claims{Kind: KindOpen, IDs: IDs{TenantID: ids.TenantID, SendID: ids.SendID}})
}

// ClickToken returns the token of one link of one send. The target URL is
// signed into the token rather than referred to by its position in the
// message: the redirect then needs no stored copy of the message, and the
// token can only ever redirect to the URL the email linked (ADDENDUM 8).
// The cost is length: the token grows with the URL. target must be an
// absolute http(s) URL of at most MaxURLLen bytes without control
// characters; CleanLink turns an href into that form.
func (s *Signer) ClickToken(ids IDs, target string) (string, error) {
	if !validTarget(target) {
		return "", errors.New("tracking: click target is not a trackable absolute http(s) URL")
	}
	return s.sign(nil, Claims{Kind: KindClick, IDs: IDs{TenantID: ids.TenantID, SendID: ids.SendID}, URL: target})
}

// UnsubscribeToken returns the token of the unsubscribe page and of the
// List-Unsubscribe header of one send.
func (s *Signer) UnsubscribeToken(ids IDs) (string, error) {
	if ids.ContactID == "" {
		return "", errors.New("tracking: unsubscribe token needs a contact id")
	}
	return s.sign(nil, Claims{Kind: KindUnsubscribe, IDs: ids})
}

// Parse checks token and returns its claims. A token of another kind, made
// with another key, altered, truncated or padded is ErrInvalidToken.
func (s *Signer) Parse(kind Kind, token string) (Claims, error) {
	// The decoder skips \r and \n even in strict mode: refused here, or
	// "<token>%0A" would be a second spelling of a valid token.
	if len(token) == 0 || len(token) > MaxTokenLen || strings.ContainsAny(token, "\r\n") {
		return Claims{}, ErrInvalidToken
	}
	// Strict: the unused bits of the last character must be zero, so every
	// payload has exactly one spelling and a valid token cannot be varied.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) < headerLen+macLen {
		return Claims{}, ErrInvalidToken
	}
	body, mac := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	h := s.mac(nil)
	h.Write(body)
	// The MAC is checked before anything in body is believed.
	if !hmac.Equal(h.Sum(nil)[:macLen], mac) {
		return Claims{}, ErrInvalidToken
	}
	if body[0] != version1 || Kind(body[1]) != kind {
		return Claims{}, ErrInvalidToken
	}
	c := Claims{Kind: kind}
	r := reader{b: body[headerLen:], ok: true}
	c.TenantID = r.id()
	c.SendID = r.id()
	switch kind {
	case KindUnsubscribe:
		c.ContactID = r.id()
		// The topic field is present only for a topic message (tokens
		// made before topics have none); present, it is never empty, so
		// each token has one spelling.
		if len(r.b) > 0 {
			if c.Topic = r.id(); c.Topic == "" {
				return Claims{}, ErrInvalidToken
			}
		}
	case KindClick:
		c.URL = r.url()
	}
	// Checked again although the MAC vouches for the bytes: a token signed
	// by an older, laxer build must still not reach a Location header.
	if !r.ok || len(r.b) != 0 || c.TenantID == "" || c.SendID == "" ||
		(kind == KindUnsubscribe && c.ContactID == "") || (kind == KindClick && !validTarget(c.URL)) {
		return Claims{}, ErrInvalidToken
	}
	return c, nil
}

// sign encodes c as version, kind, length-prefixed fields (1-byte lengths
// for ids, 2-byte big-endian for the URL: fixed widths keep the encoding
// canonical) and the truncated MAC over all of that, in base64url without
// padding. h, when not nil, is a reusable MAC (see Rewrite).
func (s *Signer) sign(h hash.Hash, c Claims) (string, error) {
	b, err := s.appendToken(nil, h, c)
	return string(b), err
}

// appendToken appends the token of c to dst; Rewrite uses it to write
// tokens straight into the tag it builds.
func (s *Signer) appendToken(dst []byte, h hash.Hash, c Claims) ([]byte, error) {
	if !validID(c.TenantID) || !validID(c.SendID) {
		return dst, errors.New("tracking: tenant and send id must be 1-64 bytes")
	}
	if c.Kind == KindUnsubscribe && (!validID(c.ContactID) || len(c.Topic) > MaxIDLen) {
		return dst, errors.New("tracking: contact id must be 1-64 bytes, topic at most 64")
	}
	var arr [512]byte
	b := append(arr[:0], version1, byte(c.Kind))
	b = appendID(b, c.TenantID)
	b = appendID(b, c.SendID)
	switch c.Kind {
	case KindUnsubscribe:
		b = appendID(b, c.ContactID)
		if c.Topic != "" {
			b = appendID(b, c.Topic)
		}
	case KindClick:
		b = binary.BigEndian.AppendUint16(b, uint16(len(c.URL)))
		b = append(b, c.URL...)
	}
	h = s.mac(h)
	h.Write(b)
	var sum [sha256.Size]byte
	b = append(b, h.Sum(sum[:0])[:macLen]...)
	return base64.RawURLEncoding.AppendEncode(dst, b), nil
}

// mac returns h reset to the keyed state, or a new keyed MAC if h is nil.
func (s *Signer) mac(h hash.Hash) hash.Hash {
	if h == nil {
		return hmac.New(sha256.New, s.key)
	}
	h.Reset()
	return h
}

func validID(id string) bool { return id != "" && len(id) <= MaxIDLen }

func appendID(b []byte, id string) []byte { return append(append(b, byte(len(id))), id...) }

// reader decodes the fields of a token body; any overrun clears ok.
type reader struct {
	b  []byte
	ok bool
}

func (r *reader) take(n int) string {
	if n > len(r.b) {
		r.ok = false
		r.b = nil
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) id() string {
	if len(r.b) < 1 {
		r.ok = false
		return ""
	}
	n := int(r.b[0])
	r.b = r.b[1:]
	return r.take(n)
}

func (r *reader) url() string {
	if len(r.b) < 2 {
		r.ok = false
		return ""
	}
	n := int(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	return r.take(n)
}

// validTarget reports whether u is a link a click token may redirect to:
// an absolute http or https URL with a host, bounded, and without bytes
// that could split or corrupt a Location header.
func validTarget(u string) bool {
	if u == "" || len(u) > MaxURLLen {
		return false
	}
	for i := 0; i < len(u); i++ {
		if c := u[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.Opaque != "" {
		return false
	}
	return true
}

// CleanLink returns the URL a browser would follow for an href value
// (already entity-decoded) and whether it is an absolute http(s) link that
// can be tracked. Browsers strip leading and trailing C0 controls and
// spaces and drop every tab and newline inside (WHATWG URL parsing), so
// " HTTP://x/\n" is a link to http://x/; the token signs that cleaned form.
func CleanLink(href string) (string, bool) {
	s := strings.TrimFunc(href, func(r rune) bool { return r <= 0x20 })
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, s)
	}
	if len(s) < len("http://x") || !(hasPrefixFold(s, "http://") || hasPrefixFold(s, "https://")) {
		return "", false
	}
	return s, validTarget(s)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// Paths of the tracking endpoints under PUBLIC_BASE_URL.
const (
	OpenPath        = "/t/o/"
	ClickPath       = "/t/c/"
	UnsubscribePath = "/t/u/"
)

// OpenURL is the address of the open pixel.
func OpenURL(base, token string) string { return strings.TrimRight(base, "/") + OpenPath + token }

// ClickURL is the address a tracked link points to.
func ClickURL(base, token string) string { return strings.TrimRight(base, "/") + ClickPath + token }

// UnsubscribeURL is the address of the unsubscribe page; the same URL takes
// the RFC 8058 one-click POST.
func UnsubscribeURL(base, token string) string {
	return strings.TrimRight(base, "/") + UnsubscribePath + token
}

// ListUnsubscribeHeaders returns the RFC 2369 and RFC 8058 headers that
// sequence sends carry, for the unsubscribe URL u. RFC 8058 asks for an
// https URL; a development base of http://localhost works with clients that
// do not insist.
func ListUnsubscribeHeaders(u string) map[string]string {
	return map[string]string{
		"List-Unsubscribe":      "<" + u + ">",
		"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
	}
}
