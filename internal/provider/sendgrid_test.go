package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	sgmail "github.com/sendgrid/sendgrid-go/helpers/mail"

	"tidings/internal/config"
	"tidings/internal/provider/providertest"
)

// newTestSendGrid returns the sendgrid provider (the real sendgrid-go
// client) pointed at a fresh fake SendGrid server.
func newTestSendGrid(t testing.TB) (Provider, *providertest.SendGrid) {
	t.Helper()
	fake := providertest.NewSendGrid(t)
	cfg := &config.Config{}
	fake.Configure(cfg)
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if p.Name() != "sendgrid" {
		t.Fatalf("Name %q", p.Name())
	}
	return p, fake
}

func TestSendGridPostsMailSendJSON(t *testing.T) {
	t.Parallel()
	p, fake := newTestSendGrid(t)
	msg := testMessage(func(m *Message) { m.Subject = "Grüße" })
	id, err := p.Send(context.Background(), msg)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	got := fake.Messages()
	if len(got) != 1 {
		t.Fatalf("fake accepted %d messages", len(got))
	}
	if id == "" || id != got[0].MessageID {
		t.Errorf("message id %q, fake's X-Message-Id %q", id, got[0].MessageID)
	}
	if got[0].Authorization != "Bearer "+providertest.FakeAPIKey {
		t.Errorf("Authorization %q", got[0].Authorization)
	}

	// Check the JSON as SendGrid reads it, not through the library's types.
	var body struct {
		Personalizations []struct {
			To []struct {
				Email string `json:"email"`
				Name  string `json:"name"`
			} `json:"to"`
		} `json:"personalizations"`
		From struct {
			Email string `json:"email"`
			Name  string `json:"name"`
		} `json:"from"`
		Subject string `json:"subject"`
		Content []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"content"`
		CustomArgs       map[string]string `json:"custom_args"`
		Headers          map[string]string `json:"headers"`
		TrackingSettings map[string]struct {
			Enable *bool `json:"enable"`
		} `json:"tracking_settings"`
	}
	if err := json.Unmarshal(got[0].Raw, &body); err != nil {
		t.Fatalf("body: %v\n%s", err, got[0].Raw)
	}
	if len(body.Personalizations) != 1 || len(body.Personalizations[0].To) != 1 || body.Personalizations[0].To[0].Email != msg.To {
		t.Errorf("personalizations %+v", body.Personalizations)
	}
	if body.From.Email != msg.From.Address || body.From.Name != msg.From.Name {
		t.Errorf("from %+v", body.From)
	}
	if body.Subject != "Grüße" {
		t.Errorf("subject %q", body.Subject)
	}
	if len(body.Content) != 2 || body.Content[0].Type != "text/plain" || body.Content[0].Value != msg.Text ||
		body.Content[1].Type != "text/html" || body.Content[1].Value != msg.HTML {
		t.Errorf("content %+v, want text/plain then text/html", body.Content)
	}
	if body.CustomArgs["send_id"] != msg.SendID || body.CustomArgs["tenant_id"] != msg.TenantID || len(body.CustomArgs) != 2 {
		t.Errorf("custom_args %v", body.CustomArgs)
	}
	if body.Headers["List-Unsubscribe"] != "<https://t.example/t/u/tok>" ||
		body.Headers["List-Unsubscribe-Post"] != "List-Unsubscribe=One-Click" || len(body.Headers) != 2 {
		t.Errorf("headers %v", body.Headers)
	}
	for _, s := range []string{"click_tracking", "open_tracking", "subscription_tracking", "ganalytics"} {
		if e := body.TrackingSettings[s].Enable; e == nil || *e {
			t.Errorf("tracking_settings.%s.enable is not false: %s", s, got[0].Raw)
		}
	}
}

func TestSendGridClassifiesFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc           string
		failure        providertest.Failure
		wantStatus     int
		wantTemporary  bool
		wantRetryAfter time.Duration
		wantMessage    string
	}{
		{desc: "429 with Retry-After", failure: providertest.Failure{Status: 429, RetryAfter: 7 * time.Second},
			wantStatus: 429, wantTemporary: true, wantRetryAfter: 7 * time.Second, wantMessage: "Too Many Requests"},
		{desc: "429 without hint", failure: providertest.Failure{Status: 429},
			wantStatus: 429, wantTemporary: true},
		{desc: "500", failure: providertest.Failure{Status: 500},
			wantStatus: 500, wantTemporary: true, wantMessage: "Internal Server Error"},
		{desc: "503 with Retry-After", failure: providertest.Failure{Status: 503, RetryAfter: 2 * time.Second},
			wantStatus: 503, wantTemporary: true, wantRetryAfter: 2 * time.Second},
		{desc: "400 with SendGrid's error JSON", failure: providertest.Failure{Status: 400, Message: "Does not contain a valid address."},
			wantStatus: 400, wantTemporary: false, wantMessage: "Does not contain a valid address."},
		{desc: "401", failure: providertest.Failure{Status: 401},
			wantStatus: 401, wantTemporary: false},
		{desc: "403", failure: providertest.Failure{Status: 403, Message: "The from address does not match a verified Sender Identity."},
			wantStatus: 403, wantTemporary: false, wantMessage: "verified Sender Identity"},
		{desc: "413", failure: providertest.Failure{Status: 413},
			wantStatus: 413, wantTemporary: false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			p, fake := newTestSendGrid(t)
			fake.FailNextWith(tt.failure)
			id, err := p.Send(context.Background(), testMessage())
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Send: id %q, err %v, want *Error", id, err)
			}
			if pe.Provider != "sendgrid" || pe.Status != tt.wantStatus || pe.Temporary() != tt.wantTemporary ||
				IsTemporary(err) != tt.wantTemporary || pe.RetryAfter != tt.wantRetryAfter {
				t.Errorf("error %+v, want status %d temporary %v retryAfter %s", pe, tt.wantStatus, tt.wantTemporary, tt.wantRetryAfter)
			}
			if !strings.Contains(pe.Message, tt.wantMessage) {
				t.Errorf("message %q, want %q", pe.Message, tt.wantMessage)
			}
			// The library must not have retried on its own: the caller decides.
			if fake.Requests() != 1 || fake.Count() != 0 {
				t.Errorf("fake saw %d requests and accepted %d, want 1 and 0", fake.Requests(), fake.Count())
			}
			// The next send goes through.
			if _, err := p.Send(context.Background(), testMessage()); err != nil {
				t.Errorf("send after the failure: %v", err)
			}
		})
	}
}

func TestSendGridErrorJSONWithField(t *testing.T) {
	t.Parallel()
	// SendGrid's error document as its docs show it: several errors, field
	// and help null or set.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"errors":[{"message":"Invalid type. Expected: string","field":"personalizations.0.to.0.email","help":null},{"message":"second","field":null,"help":null}]}`))
	}))
	t.Cleanup(srv.Close)
	p2, err := New(&config.Config{EmailProvider: "sendgrid", SendgridAPIKey: "k", SendgridAPIURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p2.Send(context.Background(), testMessage())
	var pe *Error
	if !errors.As(err, &pe) || pe.Message != "personalizations.0.to.0.email: Invalid type. Expected: string; second" {
		t.Errorf("error %v", err)
	}
}

func TestSendGridNetworkFailuresAreTemporary(t *testing.T) {
	t.Parallel()
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		p, err := New(&config.Config{EmailProvider: "sendgrid", SendgridAPIKey: "k", SendgridAPIURL: url})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Send(context.Background(), testMessage())
		var pe *Error
		if !errors.As(err, &pe) || !pe.Temporary() || pe.Status != 0 || pe.Err == nil {
			t.Errorf("Send to a closed port: %v, want a temporary *Error without status", err)
		}
	})
	t.Run("context deadline", func(t *testing.T) {
		t.Parallel()
		p, fake := newTestSendGrid(t)
		fake.SetLatency(10 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := p.Send(ctx, testMessage())
		if !IsTemporary(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Send past the deadline: %v, want temporary wrapping context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("Send returned after %s, the context allowed 50ms", d)
		}
	})
}

func TestSendGridRejectsInvalidMessageWithoutRequest(t *testing.T) {
	t.Parallel()
	p, fake := newTestSendGrid(t)
	_, err := p.Send(context.Background(), testMessage(func(m *Message) { m.Subject = "Grüße\r\nBcc: x@evil.com" }))
	if !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("Send: %v, want ErrInvalidMessage", err)
	}
	if fake.Requests() != 0 {
		t.Errorf("the fake saw %d requests", fake.Requests())
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)
	tests := []struct {
		desc   string
		header map[string][]string
		want   time.Duration
	}{
		{desc: "none", header: nil, want: 0},
		{desc: "seconds", header: map[string][]string{"Retry-After": {"30"}}, want: 30 * time.Second},
		{desc: "HTTP date", header: map[string][]string{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, want: 90 * time.Second},
		{desc: "date in the past", header: map[string][]string{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, want: 0},
		{desc: "X-RateLimit-Reset", header: map[string][]string{"X-Ratelimit-Reset": {"1795464060"}}, want: 60 * time.Second},
		{desc: "Retry-After wins", header: map[string][]string{"Retry-After": {"5"}, "X-Ratelimit-Reset": {"1795464060"}}, want: 5 * time.Second},
		{desc: "garbage", header: map[string][]string{"Retry-After": {"soon"}}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			if got := retryAfter(tt.header, now); got != tt.want {
				t.Errorf("retryAfter = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestSendGridBodyIsTheLibrarysLessHTMLEscapes: the body decodes to what
// sgmail.GetRequestBody would have sent, and its HTML is written as it is,
// not as \u003c... (that doubled the size of an HTML message's body).
func TestSendGridBodyIsTheLibrarysLessHTMLEscapes(t *testing.T) {
	t.Parallel()
	msg := testMessage(func(m *Message) {
		m.HTML = `<p class="x">Hi &amp; <a href="https://e.example/?a=1&b=2">go</a></p>`
		m.Subject = "<Sale> & more"
	})
	m := sendgridMail(msg)
	got, err := requestBody(m)
	if err != nil {
		t.Fatal(err)
	}
	want := sgmail.GetRequestBody(m)
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("body: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("body decodes to\n%v\nthe library's to\n%v", a, b)
	}
	if !bytes.Contains(got, []byte(`<a href=\"https://e.example/?a=1&b=2\">`)) || bytes.Contains(got, []byte(`\u003c`)) {
		t.Errorf("HTML escaped in the body: %s", got)
	}
	if len(got) >= len(want) || got[len(got)-1] != '}' {
		t.Errorf("body %d bytes (the library's %d), ends %q", len(got), len(want), got[len(got)-1:])
	}
}
