package provider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"tidings/internal/config"
)

// smtpServer is an in-test SMTP relay (go-smtp) that offers STARTTLS with a
// self-signed certificate and AUTH PLAIN only after TLS, like a submission
// port, and records what it receives.
type smtpServer struct {
	addr   string
	scheme string
	pool   *x509.CertPool

	mu       sync.Mutex
	received []smtpReceived
}

type smtpReceived struct {
	User string
	TLS  bool
	From string
	To   []string
	Data []byte
}

const (
	smtpUser = "relay-user"
	smtpPass = "s3cret pass"
	// Recipients that make the test server answer RCPT with an error.
	rcptTempFail = "greylisted@example.com"
	rcptPermFail = "nobody@example.com"
)

func newSMTPServer(t *testing.T) *smtpServer { return startSMTPServer(t, false) }

// startSMTPServer starts the server; implicitTLS makes it an smtps server
// (TLS from the first byte, RFC 8314) instead of STARTTLS.
func startSMTPServer(t *testing.T, implicitTLS bool) *smtpServer {
	t.Helper()
	cert, pool := selfSignedCert(t)
	s := &smtpServer{pool: pool}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{srv: s, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.AllowInsecureAuth = false
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	s.scheme = "smtp"
	if implicitTLS {
		l = tls.NewListener(l, srv.TLSConfig)
		s.scheme = "smtps"
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *smtpServer) messages() []smtpReceived {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]smtpReceived(nil), s.received...)
}

// provider returns the smtp provider for this server, trusting its
// certificate; userinfo is "user:pass@" or "".
func (s *smtpServer) provider(t *testing.T, userinfo string) Provider {
	t.Helper()
	cfg := &config.Config{EmailProvider: "smtp", SMTPURL: s.scheme + "://" + userinfo + s.addr}
	p, err := New(cfg, WithTLSConfig(&tls.Config{RootCAs: s.pool, ServerName: "localhost"}))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if p.Name() != "smtp" {
		t.Fatalf("Name %q", p.Name())
	}
	return p
}

type smtpSession struct {
	srv  *smtpServer
	conn *smtp.Conn
	user string
	msg  smtpReceived
}

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != smtpUser || pass != smtpPass {
			return smtp.ErrAuthFailed
		}
		s.user = user
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.user == "" {
		return smtp.ErrAuthRequired
	}
	_, tlsOn := s.conn.TLSConnectionState()
	s.msg = smtpReceived{User: s.user, TLS: tlsOn, From: from}
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	switch to {
	case rcptTempFail:
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "Greylisted, try again later"}
	case rcptPermFail:
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user"}
	}
	s.msg.To = append(s.msg.To, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.msg.Data = b
	s.srv.mu.Lock()
	s.srv.received = append(s.srv.received, s.msg)
	s.srv.mu.Unlock()
	return nil
}

func (s *smtpSession) Reset()        { s.msg = smtpReceived{} }
func (s *smtpSession) Logout() error { return nil }

// selfSignedCert makes a certificate for localhost and 127.0.0.1 and a pool
// that trusts it.
func selfSignedCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func TestSMTPSendsMultipartAlternativeOverSTARTTLSWithAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		edit func(*Message)
	}{
		{desc: "ASCII", edit: func(*Message) {}},
		{desc: "non-ASCII subject and name", edit: func(m *Message) { m.Subject = "Grüße"; m.From.Name = "Jörg Müller" }},
		{desc: "dot-stuffing and long lines", edit: func(m *Message) {
			m.Text = "line\n.\n..starts with dots\n" + strings.Repeat("x", 1200)
			m.HTML = "<p>" + strings.Repeat("y", 1200) + "</p>\n.\n"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			srv := newSMTPServer(t)
			p := srv.provider(t, smtpUser+":"+strings.ReplaceAll(smtpPass, " ", "%20")+"@")
			msg := testMessage(tt.edit)
			id, err := p.Send(context.Background(), msg)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := srv.messages()
			if len(got) != 1 {
				t.Fatalf("server received %d messages", len(got))
			}
			r := got[0]
			if !r.TLS || r.User != smtpUser {
				t.Errorf("TLS %v, authenticated as %q", r.TLS, r.User)
			}
			if r.From != msg.From.Address || len(r.To) != 1 || r.To[0] != msg.To {
				t.Errorf("envelope from %q to %v", r.From, r.To)
			}
			checkAlternative(t, parseMail(t, r.Data), msg, id)
		})
	}
}

func TestSMTPSImplicitTLS(t *testing.T) {
	t.Parallel()
	srv := startSMTPServer(t, true)
	p := srv.provider(t, smtpUser+":"+strings.ReplaceAll(smtpPass, " ", "%20")+"@")
	msg := testMessage()
	id, err := p.Send(context.Background(), msg)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := srv.messages()
	if len(got) != 1 || got[0].User != smtpUser {
		t.Fatalf("received %+v", got)
	}
	checkAlternative(t, parseMail(t, got[0].Data), msg, id)
}

func TestSMTPConcurrentSends(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t)
	p := srv.provider(t, smtpUser+":"+strings.ReplaceAll(smtpPass, " ", "%20")+"@")
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := p.Send(context.Background(), testMessage(func(m *Message) { m.SendID = fmt.Sprintf("snd_%d", i) }))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := len(srv.messages()); got != n {
		t.Errorf("server received %d messages, want %d", got, n)
	}
}

func TestSMTPClassifiesFailures(t *testing.T) {
	t.Parallel()
	auth := smtpUser + ":" + strings.ReplaceAll(smtpPass, " ", "%20") + "@"
	tests := []struct {
		desc          string
		userinfo      string
		to            string
		wantStatus    int
		wantTemporary bool
	}{
		{desc: "451 greylisted", userinfo: auth, to: rcptTempFail, wantStatus: 451, wantTemporary: true},
		{desc: "550 no such user", userinfo: auth, to: rcptPermFail, wantStatus: 550, wantTemporary: false},
		{desc: "535 bad credentials", userinfo: smtpUser + ":wrong@", to: "ada@example.com", wantStatus: 535, wantTemporary: false},
		{desc: "no credentials (go-smtp answers 502 5.7.0)", userinfo: "", to: "ada@example.com", wantStatus: 502, wantTemporary: false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			srv := newSMTPServer(t)
			p := srv.provider(t, tt.userinfo)
			_, err := p.Send(context.Background(), testMessage(func(m *Message) { m.To = tt.to }))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Send: %v, want *Error", err)
			}
			if pe.Provider != "smtp" || pe.Status != tt.wantStatus || pe.Temporary() != tt.wantTemporary {
				t.Errorf("error %v (status %d, temporary %v), want status %d temporary %v", err, pe.Status, pe.Temporary(), tt.wantStatus, tt.wantTemporary)
			}
			if len(srv.messages()) != 0 {
				t.Error("the server received a message")
			}
		})
	}
}

func TestSMTPUntrustedCertificateIsRefused(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t)
	// No WithTLSConfig: the system roots do not trust the test certificate,
	// so STARTTLS fails and nothing, credentials included, is sent.
	p, err := New(&config.Config{EmailProvider: "smtp", SMTPURL: "smtp://" + smtpUser + ":x@" + srv.addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Send(context.Background(), testMessage())
	var pe *Error
	if !errors.As(err, &pe) || pe.Status != 0 {
		t.Fatalf("Send: %v, want an *Error without SMTP status", err)
	}
	var cerr *tls.CertificateVerificationError
	if !errors.As(err, &cerr) {
		t.Errorf("error %v does not carry the certificate verification failure", err)
	}
}

func TestSMTPConnectionRefusedIsTemporary(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p, err := New(&config.Config{EmailProvider: "smtp", SMTPURL: "smtp://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Send(context.Background(), testMessage())
	if !IsTemporary(err) {
		t.Errorf("Send to a closed port: %v, want temporary", err)
	}
}

func TestSMTPRejectsInjection(t *testing.T) {
	t.Parallel()
	srv := newSMTPServer(t)
	p := srv.provider(t, "")
	for _, edit := range []func(*Message){
		func(m *Message) { m.Subject = "Grüße\r\nBcc: x@evil.com" },
		func(m *Message) { m.From.Name = "A\nBcc: x@evil.com" },
		func(m *Message) { m.To = "ada@example.com\r\nRCPT TO:<x@evil.com>" },
	} {
		if _, err := p.Send(context.Background(), testMessage(edit)); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("Send: %v, want ErrInvalidMessage", err)
		}
	}
}
