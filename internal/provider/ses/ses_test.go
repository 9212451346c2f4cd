package ses_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"tidings/internal/provider"
	"tidings/internal/provider/conformance"
	"tidings/internal/provider/ses"
	"tidings/internal/provider/ses/sestest"
)

func newSES(t *testing.T, endpoint string, timeout time.Duration) *ses.Provider {
	t.Helper()
	p, err := ses.New(context.Background(), ses.Config{Region: "eu-west-1", ConfigurationSet: "tidings",
		Endpoint: endpoint, Timeout: timeout, Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func message() provider.Message {
	return provider.Message{SendID: "snd_01TEST", TenantID: "ten_1", From: provider.Address{Name: "Acmé", Address: "hi@acme.test"},
		To: "c@example.com", Subject: "Hello", HTML: "<p>Hi</p>", Text: "Hi",
		Headers: []provider.Header{{Name: provider.HeaderListUnsubscribe, Value: "<https://t.test/u/x>"}}}
}

// SendEmail carries the send and tenant ids as tags, the configuration
// set, the headers; SES's MessageId is the message id.
func TestSendThroughFake(t *testing.T) {
	t.Parallel()
	f := sestest.NewSES(t)
	p := newSES(t, f.URL(), 5*time.Second)
	id, err := p.Send(context.Background(), message())
	if err != nil || id == "" {
		t.Fatalf("send: %q %v", id, err)
	}
	got := f.Emails()
	if len(got) != 1 {
		t.Fatalf("%d emails", len(got))
	}
	e := got[0]
	if e.MessageID != id || e.Tags["send_id"] != "snd_01TEST" || e.Tags["tenant_id"] != "ten_1" || e.ConfigSet != "tidings" ||
		e.Headers["List-Unsubscribe"] != "<https://t.test/u/x>" || e.Text != "Hi" || e.HTML != "<p>Hi</p>" ||
		e.From != "=?utf-8?q?Acm=C3=A9?= <hi@acme.test>" {
		t.Fatalf("email %+v", e)
	}
}

// What each failure means (ADDENDUM 12, 22): 5xx is the provider down
// (circuit, failover), a 4xx refusal is the message's, no answer after
// the request was written is in doubt, no connection is down.
func TestSendFailures(t *testing.T) {
	t.Parallel()
	check := func(desc string, err error, down, inDoubt, temporary bool) {
		t.Helper()
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Down != down || pe.InDoubt != inDoubt || pe.Temporary() != temporary {
			t.Errorf("%s: %#v, want down=%v inDoubt=%v temporary=%v", desc, err, down, inDoubt, temporary)
		}
	}
	f := sestest.NewSES(t)
	p := newSES(t, f.URL(), 300*time.Millisecond)
	f.FailWith(503, "ServiceUnavailable")
	_, err := p.Send(context.Background(), message())
	check("503", err, true, false, true)
	f.FailWith(400, "MessageRejected")
	_, err = p.Send(context.Background(), message())
	check("400 MessageRejected", err, false, false, false)
	f.FailWith(429, "TooManyRequestsException")
	_, err = p.Send(context.Background(), message())
	check("429", err, false, false, true)
	f.FailWith(0, "")
	f.Hang(2 * time.Second)
	_, err = p.Send(context.Background(), message())
	check("no answer", err, false, true, true)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	_, err = newSES(t, "http://"+addr, time.Second).Send(context.Background(), message())
	check("refused", err, true, false, true)
	if len(f.Emails()) != 0 {
		t.Fatal("a failed send was recorded as accepted")
	}
}

// SES passes the conformance test every provider passes.
func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Subject{Name: provider.NameSES,
		Accepting: func(t *testing.T) provider.Provider { return newSES(t, sestest.NewSES(t).URL(), 5*time.Second) },
		Unreachable: func(t *testing.T) provider.Provider {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			return newSES(t, "http://"+addr, time.Second)
		}})
}
