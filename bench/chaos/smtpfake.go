package main

import (
	"bytes"
	"encoding/base64"
	"io"
	"log"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
)

// fakeSMTP is the pool's second provider (PROVIDERS=sendgrid,smtp): a
// plain SMTP server that takes every message and logs it in the fake
// SendGrid's log, so the oracle judges both providers' requests as one
// provider's truth (a unit taken by each is a duplicate). It is the
// fallback of the provider outage (fault "provider-outage"): while
// SendGrid answers 503 to everything, the pool's circuits move messages
// here. It answers 250 to every message; its own faults are not the test.
type fakeSMTP struct {
	srv *smtp.Server
	log *fakeSendGrid
}

func (f *fakeSMTP) start() (string, error) {
	f.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &smtpSession{f: f}, nil
	}))
	f.srv.Domain = "localhost"
	f.srv.ReadTimeout = 10 * time.Second
	f.srv.WriteTimeout = 10 * time.Second
	f.srv.MaxMessageBytes = 32 << 20
	f.srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = f.srv.Serve(l) }()
	return l.Addr().String(), nil
}

func (f *fakeSMTP) stop() { _ = f.srv.Close() }

type smtpSession struct {
	f  *fakeSMTP
	to string
}

func (s *smtpSession) Mail(string, *smtp.MailOptions) error { return nil }

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = to
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	req := parseSMTP(raw)
	req.To, req.Provider, req.Answer, req.Taken = s.to, "smtp", "250", true
	s.f.log.record(req)
	return nil
}

func (s *smtpSession) Reset()        { s.to = "" }
func (s *smtpSession) Logout() error { return nil }

// parseSMTP reads the send id (the Message-ID's local part: the SMTP
// provider sets <send_id@domain>) and the unit (from any text part,
// decoded) of a message.
func parseSMTP(raw []byte) Request {
	var req Request
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return req
	}
	id := strings.Trim(m.Header.Get("Message-Id"), "<> ")
	req.SendID, _, _ = strings.Cut(id, "@")
	body, _ := io.ReadAll(m.Body)
	req.Unit = findUnit(m.Header.Get("Content-Type"), m.Header.Get("Content-Transfer-Encoding"), body)
	return req
}

// findUnit looks for UNIT[...] in a MIME entity and its parts.
func findUnit(contentType, encoding string, body []byte) string {
	switch strings.ToLower(encoding) {
	case "quoted-printable":
		if b, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body))); err == nil {
			body = b
		}
	case "base64":
		if b, err := io.ReadAll(base64.NewDecoder(base64.StdEncoding, bytes.NewReader(bytes.ReplaceAll(body, []byte("\r\n"), nil)))); err == nil {
			body = b
		}
	}
	media, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.HasPrefix(media, "multipart/") {
		if m := unitRE.FindSubmatch(body); m != nil {
			return string(m[1])
		}
		return ""
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextRawPart()
		if err != nil {
			return ""
		}
		b, _ := io.ReadAll(p)
		if u := findUnit(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), b); u != "" {
			return u
		}
	}
}
