// Package sendgridevents reads SendGrid's signed Event Webhook (ADDENDUM
// section 8): it checks the signature and the timestamp of a POST, parses
// the batch of events, maps each to an Outcome, and says how an outcome
// changes a send's deliveryStatus. It does no I/O; the webhook handler and
// the ingestion task do the storing.
package sendgridevents

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
)

// Header names of the signed Event Webhook, re-exported so the handler
// needs no import of sendgrid-go.
const (
	SignatureHeader = eventwebhook.VerificationHTTPHeader
	TimestampHeader = eventwebhook.TimestampHTTPHeader
)

// Default freshness window of a signed POST. A signature covers the
// timestamp, so a captured request can be replayed only inside the window;
// replays inside it are harmless because events are deduplicated by
// sg_event_id. Ten minutes leaves room for SendGrid's queueing; five
// minutes of future skew for clocks that disagree.
const (
	DefaultMaxAge    = 10 * time.Minute
	DefaultMaxFuture = 5 * time.Minute
)

// Errors of Verify. The handler answers 403 to all of them; they are kept
// apart for logs and metrics.
var (
	ErrBadSignature = errors.New("sendgridevents: bad signature")
	ErrStale        = errors.New("sendgridevents: timestamp outside the accepted window")
)

// maxSignatureLen bounds the header before it is decoded: an ASN.1 ECDSA
// P-256 signature is at most 72 bytes, 96 in base64.
const maxSignatureLen = 256

// Verifier checks the signature of Event Webhook POSTs with the account's
// verification key. It is safe for concurrent use.
type Verifier struct {
	key *ecdsa.PublicKey
	// MaxAge and MaxFuture bound the timestamp header against now.
	MaxAge    time.Duration
	MaxFuture time.Duration
}

// NewVerifier builds a Verifier from SENDGRID_WEBHOOK_PUBLIC_KEY, the
// base64 DER (PKIX) public key SendGrid shows for the signed webhook.
//
// The key is parsed here rather than with eventwebhook's
// ConvertPublicKeyBase64ToECDSA, which panics on a well-formed key that is
// not ECDSA; a misconfigured key must fail start-up with an error.
func NewVerifier(publicKeyBase64 string) (*Verifier, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(publicKeyBase64))
	if err != nil {
		return nil, errors.New("sendgridevents: public key is not base64")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("sendgridevents: public key is not a DER public key")
	}
	key, ok := pub.(*ecdsa.PublicKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, errors.New("sendgridevents: public key is not ECDSA P-256")
	}
	return &Verifier{key: key, MaxAge: DefaultMaxAge, MaxFuture: DefaultMaxFuture}, nil
}

// Verify checks that body was signed by SendGrid together with timestamp
// (the two headers, as received), and that the timestamp (unix seconds) is
// within the window around now. body must be the raw request body, before
// any parsing. The timestamp is checked first: it costs nothing, the ECDSA
// verification does.
func (v *Verifier) Verify(body []byte, signature, timestamp string, now time.Time) error {
	if signature == "" || len(signature) > maxSignatureLen || timestamp == "" || len(timestamp) > 20 {
		return ErrBadSignature
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || ts <= 0 {
		return ErrBadSignature
	}
	at := time.Unix(ts, 0)
	if now.Sub(at) > v.MaxAge || at.Sub(now) > v.MaxFuture {
		return ErrStale
	}
	ok, err := eventwebhook.VerifySignature(v.key, body, signature, timestamp)
	if err != nil || !ok {
		return ErrBadSignature
	}
	return nil
}
