package provider

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tidings/internal/config"
)

// rawSMTP is a bare SMTP server for the exchanges go-smtp will not misbehave
// in: it accepts MAIL, RCPT and DATA, and then, as mode says, answers the
// end of DATA and QUIT well ("ok"), drops the connection at QUIT
// ("quit-drop"), answers 421 to QUIT ("quit-421"), or drops the connection
// after the whole body without answering it ("data-drop"). It counts the
// messages whose body it read to the end.
type rawSMTP struct {
	addr     string
	mode     string
	received atomic.Int32
}

func newRawSMTP(t *testing.T, mode string) *rawSMTP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawSMTP{addr: ln.Addr().String(), mode: mode}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *rawSMTP) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	say := func(line string) { _, _ = c.Write([]byte(line + "\r\n")) }
	say("220 raw.test ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.ToUpper(strings.TrimSpace(line))
		switch {
		case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
			say("250 raw.test")
		case strings.HasPrefix(cmd, "MAIL"), strings.HasPrefix(cmd, "RCPT"), cmd == "RSET", cmd == "NOOP":
			say("250 ok")
		case cmd == "DATA":
			say("354 go on")
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
			}
			s.received.Add(1)
			if s.mode == "data-drop" {
				return
			}
			say("250 2.0.0 queued")
		case cmd == "QUIT":
			switch s.mode {
			case "quit-drop":
				return
			case "quit-421":
				say("421 4.3.0 going away")
				return
			}
			say("221 bye")
			return
		default:
			say("502 unknown")
		}
	}
}

func (s *rawSMTP) provider(t *testing.T, timeout time.Duration) Provider {
	t.Helper()
	p, err := New(&config.Config{EmailProvider: "smtp", SMTPURL: "smtp://" + s.addr + "?tls=none", ProviderTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// An SMTP server that answered 250 to the end of DATA has the message: a
// QUIT that fails (the connection dropped, or 421) is not a failure of the
// send, which would send it again (issue 20, defect 1).
func TestSMTPAcceptedMessageSurvivesAFailedQuit(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"ok", "quit-drop", "quit-421"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			srv := newRawSMTP(t, mode)
			id, err := srv.provider(t, 5*time.Second).Send(context.Background(), testMessage())
			if err != nil || id == "" {
				t.Fatalf("Send: %q, %v; want accepted", id, err)
			}
			if n := srv.received.Load(); n != 1 {
				t.Fatalf("server received %d messages", n)
			}
		})
	}
}

// A connection that breaks after the whole message was written, before the
// server answered it, leaves the message in doubt: it may have been taken.
func TestSMTPNoAnswerToTheMessageIsInDoubt(t *testing.T) {
	t.Parallel()
	srv := newRawSMTP(t, "data-drop")
	_, err := srv.provider(t, 5*time.Second).Send(context.Background(), testMessage())
	if !IsInDoubt(err) {
		t.Fatalf("Send: %v; want in doubt", err)
	}
}

// Nothing reached the provider (connection refused): a definite, temporary
// failure, never in doubt.
func TestProviderRefusedConnectionIsNotInDoubt(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	for name, cfg := range map[string]*config.Config{
		"smtp":     {EmailProvider: "smtp", SMTPURL: "smtp://" + addr + "?tls=none", ProviderTimeout: time.Second},
		"sendgrid": {EmailProvider: "sendgrid", SendgridAPIKey: "SG.x", SendgridAPIURL: "http://" + addr, ProviderTimeout: time.Second},
	} {
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Send(context.Background(), testMessage())
		if err == nil || IsInDoubt(err) || !IsTemporary(err) {
			t.Errorf("%s: %v; want a temporary failure, not in doubt", name, err)
		}
	}
}

// SendGrid: a request written but never answered within PROVIDER_TIMEOUT,
// or whose connection is cut after the body was read, is in doubt; an
// answer (even a refusal) is not.
func TestSendGridNoAnswerIsInDoubt(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = bufio.NewReader(r.Body).ReadString(0)
		switch {
		case strings.Contains(r.URL.RawQuery, "hang"):
			<-release
		case strings.Contains(r.URL.RawQuery, "drop"):
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			_ = c.Close()
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"errors":[{"message":"bad"}]}`))
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: the hanging handler returns
	for _, tc := range []struct {
		query   string
		inDoubt bool
	}{{"hang", true}, {"drop", true}, {"refuse", false}} {
		p, err := New(&config.Config{EmailProvider: "sendgrid", SendgridAPIKey: "SG.x",
			SendgridAPIURL: srv.URL + "/?" + tc.query + "#", ProviderTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = p.Send(context.Background(), testMessage())
		var pe *Error
		if !errors.As(err, &pe) || IsInDoubt(err) != tc.inDoubt {
			t.Errorf("%s: %v; want in doubt %v", tc.query, err, tc.inDoubt)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s: took %v, past PROVIDER_TIMEOUT", tc.query, took)
		}
	}
}
