// Package sgtest signs Event Webhook batches the way SendGrid does, so the
// webhook's HTTP tests and benchmarks can post batches that verify. It is
// for tests only: nothing in the product imports it.
package sgtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"strconv"
	"time"
)

// NewKey returns a fresh P-256 key and its public half in the form of
// SENDGRID_WEBHOOK_PUBLIC_KEY (base64 DER, PKIX).
func NewKey() (*ecdsa.PrivateKey, string, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", err
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return nil, "", err
	}
	return priv, base64.StdEncoding.EncodeToString(der), nil
}

// Sign returns the X-Twilio-Email-Event-Webhook-Signature value for body
// posted with timestamp ts: an ASN.1 ECDSA signature of SHA-256 over the
// timestamp header's text followed by the body, in standard base64, which
// is what sendgrid-go's eventwebhook.VerifySignature checks.
func Sign(priv *ecdsa.PrivateKey, body []byte, ts string) (string, error) {
	h := sha256.New()
	h.Write([]byte(ts))
	h.Write(body)
	sig, err := ecdsa.SignASN1(rand.Reader, priv, h.Sum(nil))
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// Headers returns the signature and timestamp headers for body posted at
// now, keyed by their names.
func Headers(priv *ecdsa.PrivateKey, body []byte, now time.Time) (map[string]string, error) {
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, err := Sign(priv, body, ts)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"X-Twilio-Email-Event-Webhook-Signature": sig,
		"X-Twilio-Email-Event-Webhook-Timestamp": ts,
	}, nil
}
