package provider

import (
	"context"
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"strconv"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// smtpProvider relays through an SMTP server with go-mail: STARTTLS (or
// implicit TLS for smtps://), SMTP AUTH with the strongest mechanism the
// server offers over the encrypted connection.
//
// Each Send dials its own connection (go-mail's DialAndSendWithContext keeps
// the per-connection state out of the shared Client), which makes it safe
// for concurrent use at the cost of a handshake per message; a pool can come
// when a tenant needs SMTP volume.
type smtpProvider struct {
	client *gomail.Client
	now    func() time.Time
}

// newSMTP reads SMTP_URL: smtp://user:pass@host:port (STARTTLS required,
// default port 587) or smtps://... (implicit TLS, default port 465). The
// query parameter tls=opportunistic or tls=none loosens STARTTLS for local
// catchers such as Mailpit; credentials are then never sent in clear, as
// go-mail only offers challenge mechanisms without TLS.
func newSMTP(rawURL string, o options) (*smtpProvider, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("SMTP_URL is required when EMAIL_PROVIDER=smtp")
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("SMTP_URL must look like smtp://user:pass@host:port")
	}
	host := u.Hostname()
	// go-mail only hands the context to the dial; once connected, its
	// deadline (PROVIDER_TIMEOUT, not the caller's context) bounds the
	// exchange.
	opts := []gomail.Option{gomail.WithTimeout(o.timeout)}

	port := 587
	switch u.Scheme {
	case "smtp":
		policy := gomail.TLSMandatory
		switch u.Query().Get("tls") {
		case "", "mandatory":
		case "opportunistic":
			policy = gomail.TLSOpportunistic
		case "none":
			policy = gomail.NoTLS
		default:
			return nil, fmt.Errorf("SMTP_URL: tls must be mandatory, opportunistic or none")
		}
		opts = append(opts, gomail.WithTLSPolicy(policy))
	case "smtps":
		port = 465
		opts = append(opts, gomail.WithSSL())
	default:
		return nil, fmt.Errorf("SMTP_URL scheme must be smtp or smtps")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("SMTP_URL: bad port %q", p)
		}
		port = n
	}
	opts = append(opts, gomail.WithPort(port))

	if o.tlsConfig != nil {
		tc := o.tlsConfig.Clone()
		if tc.ServerName == "" {
			tc.ServerName = host
		}
		opts = append(opts, gomail.WithTLSConfig(tc))
	}
	if u.User != nil && u.User.Username() != "" {
		pass, _ := u.User.Password()
		opts = append(opts,
			gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(u.User.Username()),
			gomail.WithPassword(pass))
	}
	c, err := gomail.NewClient(host, opts...)
	if err != nil {
		return nil, fmt.Errorf("SMTP_URL: %w", err)
	}
	return &smtpProvider{client: c, now: o.now}, nil
}

// Name implements Provider.
func (p *smtpProvider) Name() string { return NameSMTP }

// Send implements Provider; the message id is the Message-ID it set.
func (p *smtpProvider) Send(ctx context.Context, msg Message) (string, error) {
	msg, err := validate(msg)
	if err != nil {
		return "", err
	}
	id := messageIDFor(msg)
	m := buildMIME(msg, id, p.now())
	err = p.client.DialAndSendWithContext(ctx, m)
	// A server that answered 250 to the end of DATA has the message, even
	// if what follows (RSET, QUIT) fails: go-mail marks it delivered, and
	// the error of the goodbye is no reason to send it again.
	if err == nil || m.IsDelivered() {
		return id, nil
	}
	return "", classifySMTP(err)
}

// classifySMTP maps an SMTP failure to *Error by its reply code: 4yz is
// temporary, 5yz permanent (RFC 5321 section 4.2.1). Failures without a
// reply (refused connection, TLS handshake, timeout) count as temporary:
// the relay may be back in a minute, and a retry of a misconfiguration only
// costs the attempts. One failure is in doubt: the whole message, ending
// dot included, was written and no reply to it came (ErrSMTPDataClose
// without a code); the server may have taken it. A connection that broke
// while the body was being written never carried the dot, so nothing was
// accepted.
func classifySMTP(err error) *Error {
	e := &Error{Provider: NameSMTP, Transient: true, Err: err}
	var se *gomail.SendError
	var te *textproto.Error
	switch {
	case errors.As(err, &se):
		// ErrorCode is 0 when the failure carried no reply (a connection
		// dropped during DATA, say): temporary like any network failure.
		e.Status = se.ErrorCode()
		e.Transient = e.Status < 500
		e.InDoubt = se.Reason == gomail.ErrSMTPDataClose && e.Status == 0
	case errors.As(err, &te):
		e.Status = te.Code
		e.Transient = te.Code < 500
	}
	// The relay is down when no reply came and nothing is in doubt (the
	// dial, TLS or greeting failed), or it said it is closing (421).
	e.Down = (e.Status == 0 && !e.InDoubt) || e.Status == 421
	return e
}
