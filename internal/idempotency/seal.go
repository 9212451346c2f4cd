package idempotency

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// secretFields are the response fields that carry a secret shown once: an
// API key's rawKey (POST /api/api-keys) and a webhook's signing secret
// (webhook create and rotate-secret). A stored response keeps them sealed
// (ADDENDUM 19): a copy of the database, a backup or a log of it holds no
// usable credential, and the replay answers them opened.
var secretFields = []string{"rawKey", "secret"}

// sealedPrefix marks a sealed value: the version lets a later key or
// cipher coexist with stored responses of the day before.
const sealedPrefix = "tidings-sealed:v1:"

// Sealer seals and opens the secret fields of stored responses with
// AES-256-GCM under a key derived from TRACKING_SECRET.
type Sealer struct{ aead cipher.AEAD }

// NewSealer derives the sealing key from secret (TRACKING_SECRET, which
// every api instance shares): HMAC-SHA256 with a label of its own, so the
// key is not the tracking tokens' key.
func NewSealer(secret []byte) (*Sealer, error) {
	if len(secret) == 0 {
		return nil, errors.New("idempotency: an empty secret cannot seal responses")
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("tidings idempotency response seal v1"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// seal returns body with each top-level secret field's string value sealed;
// a body without one, or that is not a JSON object, is returned as it is.
func (s *Sealer) seal(body []byte) ([]byte, error) {
	return s.transform(body, func(v string) (string, error) {
		nonce := make([]byte, s.aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return "", err
		}
		return sealedPrefix + base64.RawStdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, []byte(v), nil)), nil
	})
}

// open reverses seal.
func (s *Sealer) open(body []byte) ([]byte, error) {
	return s.transform(body, func(v string) (string, error) {
		raw, ok := strings.CutPrefix(v, sealedPrefix)
		if !ok {
			return v, nil
		}
		b, err := base64.RawStdEncoding.DecodeString(raw)
		n := s.aead.NonceSize()
		if err != nil || len(b) < n {
			return "", errors.New("idempotency: a sealed field is malformed")
		}
		plain, err := s.aead.Open(nil, b[:n], b[n:], nil)
		if err != nil {
			return "", errors.New("idempotency: a sealed field does not open (was TRACKING_SECRET changed?)")
		}
		return string(plain), nil
	})
}

// transform rewrites the top-level secret fields' string values with f in
// place, leaving every other byte as it was: a replay answers the first
// response byte for byte.
func (s *Sealer) transform(body []byte, f func(string) (string, error)) ([]byte, error) {
	if s == nil || !mentionsSecret(body) {
		return body, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return body, nil // not an object: nothing of ours to seal
	}
	var out []byte
	last := 0
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return body, nil
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return body, nil
		}
		key, _ := kt.(string)
		if !slices.Contains(secretFields, key) || len(raw) == 0 || raw[0] != '"' {
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return body, nil
		}
		nv, err := f(v)
		if err != nil {
			return nil, err
		}
		enc, err := json.Marshal(nv)
		if err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		out = append(append(out, body[last:start]...), enc...)
		last = end
	}
	if out == nil {
		return body, nil
	}
	return append(out, body[last:]...), nil
}

// mentionsSecret is a cheap pre-check: most stored responses name no
// secret field and skip the decode.
func mentionsSecret(body []byte) bool {
	for _, name := range secretFields {
		if bytes.Contains(body, []byte(`"`+name+`"`)) {
			return true
		}
	}
	return false
}
