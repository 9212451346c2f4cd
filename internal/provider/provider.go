// Package provider hands finished messages to an email delivery provider
// (ADDENDUM section 8). Three implementations sit behind one interface,
// chosen by EMAIL_PROVIDER: SendGrid's v3 API, an SMTP relay, and an outbox
// directory of .eml files for development.
//
// The package is the last line before a message leaves the service: it
// validates every message (addresses parse, no CR/LF/NUL in any header
// value, only allowlisted extra headers) whatever the caller already
// checked, so no subject, name or template variable can inject a header.
//
// A Provider never retries. It reports failures as *Error, classified as
// temporary (rate limited, provider down, network) or permanent, so that the
// request path can answer 502 at once and the workers can retry with backoff.
package provider

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"tidings/internal/config"
)

// Message is one rendered email to one recipient. Every message is sent as
// multipart/alternative, so both Text and HTML are required.
type Message struct {
	// SendID identifies the send record; it travels as SendGrid custom_arg
	// send_id (webhook events come back with it), names the outbox file and
	// is the local part of the SMTP and outbox Message-ID.
	SendID string
	// TenantID travels as SendGrid custom_arg tenant_id, so webhook events
	// can be attributed without a lookup.
	TenantID string
	From     Address
	// To is a bare address (no display name): the contact's email.
	To      string
	Subject string
	HTML    string
	Text    string
	// Headers are extra header fields; only List-Unsubscribe and
	// List-Unsubscribe-Post are accepted (see allowedHeaders).
	Headers []Header
}

// Address is a sender: a bare address and an optional display name.
type Address struct {
	Name    string
	Address string
}

// Header is one extra header field of a message.
type Header struct {
	Name  string
	Value string
}

// Header names that callers may set; they carry RFC 8058 one-click
// unsubscribe on sequence sends.
const (
	HeaderListUnsubscribe     = "List-Unsubscribe"
	HeaderListUnsubscribePost = "List-Unsubscribe-Post"
	// ListUnsubscribeOneClick is the only value RFC 8058 allows for
	// List-Unsubscribe-Post.
	ListUnsubscribeOneClick = "List-Unsubscribe=One-Click"
)

// Provider sends one message. Implementations are safe for concurrent use.
type Provider interface {
	// Send hands msg to the provider and returns the provider's id for it
	// (SendGrid's X-Message-Id; the Message-ID without angle brackets for
	// smtp and outbox). A message that fails validation returns an error
	// wrapping ErrInvalidMessage and is never sent; a provider failure
	// returns *Error.
	Send(ctx context.Context, msg Message) (messageID string, err error)
	// Name is the EMAIL_PROVIDER value: "sendgrid", "smtp" or "outbox".
	Name() string
}

// Provider names, as in EMAIL_PROVIDER and PROVIDERS.
const (
	NameSendGrid = "sendgrid"
	NameSMTP     = "smtp"
	NameOutbox   = "outbox"
	NameSES      = "ses"
)

// ErrInvalidMessage is wrapped by every validation error. It means a bug or
// unchecked input upstream, not a provider failure: retrying cannot help.
var ErrInvalidMessage = errors.New("invalid message")

// Error is a failure reported by, or on the way to, a provider. The caller
// decides what to do with it: the request path answers 502 PROVIDER_ERROR,
// workers retry when Temporary reports true and wait at least RetryAfter.
type Error struct {
	// Provider is the provider's Name.
	Provider string
	// Status is the HTTP status (sendgrid) or SMTP reply code (smtp) of the
	// failed exchange; 0 when there was no answer (network, timeout).
	Status int
	// Transient is true for failures worth retrying: rate limited (429),
	// provider errors (5xx, SMTP 4yz), network errors and timeouts.
	Transient bool
	// RetryAfter is the provider's hint (Retry-After or X-RateLimit-Reset)
	// of how long to wait before retrying; 0 when it gave none.
	RetryAfter time.Duration
	// Message is the provider's own explanation, when it gave one.
	Message string
	// Err is the underlying error, if any (network error, context error).
	Err error
	// InDoubt: the message was written to the provider but no answer came
	// (PROVIDER_TIMEOUT passed, or the connection broke after the request
	// was written). It may have been sent and must not be retried.
	InDoubt bool
	// Down: the provider itself failed, not this message: nothing was
	// written to it (connection refused, DNS, TLS, a timeout before the
	// request was written) or it answered as broken (HTTP 5xx, SMTP 421).
	// The pool opens the provider's circuit and moves the message on at
	// once (ADDENDUM 22). Each provider decides what counts.
	Down bool
}

// Error implements error.
func (e *Error) Error() string {
	s := e.Provider + ": "
	if e.Status != 0 {
		s += fmt.Sprintf("status %d", e.Status)
	} else {
		s += "no response"
	}
	if e.Transient {
		s += " (temporary)"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error, so errors.Is sees context errors.
func (e *Error) Unwrap() error { return e.Err }

// Temporary reports whether retrying the same message may succeed.
func (e *Error) Temporary() bool { return e.Transient }

// IsTemporary reports whether err is a provider *Error worth retrying.
// Validation errors and anything that is not an *Error are not.
func IsTemporary(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.Temporary()
}

// IsInDoubt reports whether err is a provider *Error after which the
// message may have been sent (InDoubt).
func IsInDoubt(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.InDoubt
}

// Option adjusts New; tests use them to trust their own servers.
type Option func(*options)

type options struct {
	httpClient *http.Client
	tlsConfig  *tls.Config
	now        func() time.Time
	// timeout is PROVIDER_TIMEOUT: the longest wait for one answer.
	timeout time.Duration
}

// defaultTimeout bounds a call when the configuration names none.
const defaultTimeout = 30 * time.Second

// WithHTTPClient replaces the HTTP client of the sendgrid provider (the
// default has a 10 s timeout and keeps enough idle connections for
// hundreds of sends per second).
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithTLSConfig replaces the TLS configuration of the smtp provider, e.g.
// to trust a test server's certificate. ServerName defaults to the host of
// SMTP_URL when empty.
func WithTLSConfig(c *tls.Config) Option { return func(o *options) { o.tlsConfig = c } }

// WithClock replaces time.Now for the Date header and outbox file names.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// New returns the provider chosen by cfg.EmailProvider. It checks what can
// be checked without sending (the outbox directory is created, SMTP_URL
// parses, a SendGrid key is present), so a misconfiguration stops start-up.
func New(cfg *config.Config, opts ...Option) (Provider, error) {
	return NewNamed(cfg, cfg.EmailProvider, opts...)
}

// NewNamed returns the provider called name (sendgrid, smtp or outbox)
// configured by cfg; ses lives in its own package (internal/provider/ses).
func NewNamed(cfg *config.Config, name string, opts ...Option) (Provider, error) {
	o := options{now: time.Now, timeout: cfg.ProviderTimeout}
	if o.timeout <= 0 {
		o.timeout = defaultTimeout
	}
	for _, opt := range opts {
		opt(&o)
	}
	switch name {
	case NameSendGrid:
		return newSendGrid(cfg.SendgridAPIKey, cfg.SendgridAPIURL, o)
	case NameSMTP:
		return newSMTP(cfg.SMTPURL, o)
	case NameOutbox, "":
		return newOutbox(cfg.OutboxDir, o)
	}
	return nil, fmt.Errorf("provider %q: unknown provider", name)
}
