// Package sesevents reads Amazon SES's outcomes: SNS notifications whose
// message is an SES event in the event-publishing format (ADDENDUM 22).
// It verifies SNS's signature (versions 1 and 2) against the signing
// certificate, fetched over HTTPS only from an allowed host and cached,
// confirms subscriptions, and maps each event to an outcome.
package sesevents

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // SNS signature version 1 is SHA1withRSA
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// MaxBodyBytes bounds one POST: an SNS message is at most 256 KiB, and its
// envelope adds little.
const MaxBodyBytes = 512 << 10

// SNS message types.
const (
	TypeNotification              = "Notification"
	TypeSubscriptionConfirmation  = "SubscriptionConfirmation"
	TypeUnsubscribeConfirmation   = "UnsubscribeConfirmation"
	maxCachedCerts                = 64
	maxCertBytes                  = 64 << 10
	certFetchTimeout              = 10 * time.Second
	confirmTimeout                = 10 * time.Second
	signatureVersionSHA1          = "1"
	signatureVersionSHA256        = "2"
	errorReasonUnsigned           = "not signed"
	errorReasonCertHostNotAllowed = "signing certificate from a host that is not allowed"
)

// Envelope is an SNS HTTP(S) message: a notification, or a subscription's
// confirmation request.
type Envelope struct {
	Type             string
	MessageID        string `json:"MessageId"`
	Token            string
	TopicArn         string
	Subject          *string
	Message          string
	Timestamp        string
	SignatureVersion string
	Signature        string
	SigningCertURL   string
	SubscribeURL     string
}

// ErrRefused wraps every verification failure: the request is answered
// 403 and changes nothing.
var ErrRefused = errors.New("sesevents: SNS message refused")

// Verifier checks SNS signatures. Safe for concurrent use.
type Verifier struct {
	hosts  []string
	topics []string
	client *http.Client

	mu    sync.Mutex
	certs map[string]*x509.Certificate
}

// NewVerifier takes the hosts (host or host:port) that signing certificates
// and subscription URLs may come from, the topics whose messages are taken
// (none: any topic), and the HTTPS client to fetch with (nil: one with the
// system roots).
func NewVerifier(hosts, topics []string, client *http.Client) *Verifier {
	if client == nil {
		client = &http.Client{Timeout: certFetchTimeout,
			// A redirect could lead anywhere: the host check is on the URL
			// the message named.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	hs := make([]string, len(hosts))
	for i, h := range hosts {
		hs[i] = strings.ToLower(h)
	}
	return &Verifier{hosts: hs, topics: topics, client: client, certs: map[string]*x509.Certificate{}}
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Verify parses body and checks its signature; any failure wraps
// ErrRefused (except a certificate that could not be fetched, which is
// SNS's or the network's trouble: the caller answers 5xx so SNS retries).
func (v *Verifier) Verify(ctx context.Context, body []byte) (*Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, refused("not an SNS message")
	}
	switch e.Type {
	case TypeNotification, TypeSubscriptionConfirmation, TypeUnsubscribeConfirmation:
	default:
		return nil, refused("unknown type %q", e.Type)
	}
	if e.Signature == "" || e.SigningCertURL == "" {
		return nil, refused(errorReasonUnsigned)
	}
	var hash crypto.Hash
	switch e.SignatureVersion {
	case signatureVersionSHA1:
		hash = crypto.SHA1
	case signatureVersionSHA256:
		hash = crypto.SHA256
	default:
		return nil, refused("signature version %q", e.SignatureVersion)
	}
	if len(v.topics) > 0 && !slices.Contains(v.topics, e.TopicArn) {
		return nil, refused("topic %q is not one of SES_SNS_TOPIC_ARNS", e.TopicArn)
	}
	sig, err := base64.StdEncoding.DecodeString(e.Signature)
	if err != nil {
		return nil, refused("signature is not base64")
	}
	if !v.allowed(e.SigningCertURL) {
		return nil, refused(errorReasonCertHostNotAllowed)
	}
	cert, err := v.cert(ctx, e.SigningCertURL)
	if err != nil {
		return nil, err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, refused("signing certificate has no RSA key")
	}
	var digest []byte
	if hash == crypto.SHA1 {
		d := sha1.Sum(StringToSign(&e)) //nolint:gosec // version 1
		digest = d[:]
	} else {
		d := sha256.Sum256(StringToSign(&e))
		digest = d[:]
	}
	if err := rsa.VerifyPKCS1v15(pub, hash, digest, sig); err != nil {
		return nil, refused("bad signature")
	}
	return &e, nil
}

// StringToSign is the text SNS signs: the message's fields in a fixed
// order, each name and value on its own line.
func StringToSign(e *Envelope) []byte {
	var b strings.Builder
	add := func(k, v string) { b.WriteString(k + "\n" + v + "\n") }
	add("Message", e.Message)
	add("MessageId", e.MessageID)
	if e.Type == TypeNotification {
		if e.Subject != nil {
			add("Subject", *e.Subject)
		}
	} else {
		add("SubscribeURL", e.SubscribeURL)
	}
	add("Timestamp", e.Timestamp)
	if e.Type != TypeNotification {
		add("Token", e.Token)
	}
	add("TopicArn", e.TopicArn)
	add("Type", e.Type)
	return []byte(b.String())
}

// allowed says whether raw is an https URL on an allowed host. An entry
// without a port allows only the default one.
func (v *Verifier) allowed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil || u.Host == "" {
		return false
	}
	host := strings.ToLower(u.Host)
	host = strings.TrimSuffix(host, ":443")
	return slices.Contains(v.hosts, host)
}

// cert returns the certificate at raw, fetched once and cached.
func (v *Verifier) cert(ctx context.Context, raw string) (*x509.Certificate, error) {
	v.mu.Lock()
	c, ok := v.certs[raw]
	v.mu.Unlock()
	if ok {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, certFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, refused("bad certificate URL")
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sesevents: fetch signing certificate: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("sesevents: fetch signing certificate: status %d", resp.StatusCode)
	}
	pemBytes, err := io.ReadAll(io.LimitReader(resp.Body, maxCertBytes))
	if err != nil {
		return nil, fmt.Errorf("sesevents: fetch signing certificate: %w", err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, refused("signing certificate is not PEM")
	}
	c, err = x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, refused("signing certificate does not parse")
	}
	if now := time.Now(); now.Before(c.NotBefore) || now.After(c.NotAfter) {
		return nil, refused("signing certificate is not valid now")
	}
	v.mu.Lock()
	if len(v.certs) >= maxCachedCerts {
		clear(v.certs) // SNS rotates rarely: a full cache is an oddity
	}
	v.certs[raw] = c
	v.mu.Unlock()
	return c, nil
}

// Confirm confirms a verified subscription by fetching its SubscribeURL,
// only from an allowed host.
func (v *Verifier) Confirm(ctx context.Context, e *Envelope) error {
	if e.Type != TypeSubscriptionConfirmation {
		return nil
	}
	if !v.allowed(e.SubscribeURL) {
		return refused("SubscribeURL on a host that is not allowed")
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.SubscribeURL, nil)
	if err != nil {
		return refused("bad SubscribeURL")
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("sesevents: confirm subscription: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sesevents: confirm subscription: status %d", resp.StatusCode)
	}
	return nil
}
