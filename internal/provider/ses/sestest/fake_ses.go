// Package sestest fakes Amazon SES for tests, without network: a local
// SES v2 endpoint (SendEmail only) that the real SDK client talks to, and
// an SNS signer whose certificate it serves over its own TLS server.
package sestest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Email is one SendEmail request the fake took.
type Email struct {
	MessageID string
	From      string
	To        []string
	Subject   string
	Text      string
	HTML      string
	Headers   map[string]string
	Tags      map[string]string
	ConfigSet string
}

// SES is a fake SES v2 endpoint. By default it accepts every SendEmail;
// FailWith makes it answer an error, Hang makes it keep the request
// without an answer until the client gives up.
type SES struct {
	Server *httptest.Server
	mu     sync.Mutex
	emails []Email
	status int
	code   string
	hang   time.Duration
	n      atomic.Int64
}

// NewSES starts a fake SES v2 endpoint, closed at the test's end.
func NewSES(t testing.TB) *SES {
	f := &SES{}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Server.Close)
	return f
}

// URL is the endpoint to give as SES_ENDPOINT.
func (f *SES) URL() string { return f.Server.URL }

// FailWith makes every next SendEmail answer status with SES's error code
// (e.g. 503 ServiceUnavailable, 400 MessageRejected); 0 accepts again.
func (f *SES) FailWith(status int, code string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.code = status, code
}

// Hang makes every next SendEmail wait d before answering (0: answer at
// once): a client with a shorter timeout sees the request written and no
// answer.
func (f *SES) Hang(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hang = d
}

// Emails are the messages accepted so far.
func (f *SES) Emails() []Email {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Email(nil), f.emails...)
}

// sendEmailBody is the part of SendEmail's JSON the fake reads.
type sendEmailBody struct {
	FromEmailAddress string
	Destination      struct{ ToAddresses []string }
	Content          struct {
		Simple *struct {
			Subject struct{ Data string }
			Body    struct {
				Text *struct{ Data string }
				Html *struct{ Data string }
			}
			Headers []struct{ Name, Value string }
		}
	}
	EmailTags            []struct{ Name, Value string }
	ConfigurationSetName string
}

func (f *SES) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v2/email/outbound-emails" {
		fail(w, http.StatusNotFound, "NotFoundException", "the fake knows only SendEmail")
		return
	}
	// SigV4 signs every request; a request without it is not the SDK's.
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		fail(w, http.StatusForbidden, "AccessDeniedException", "missing SigV4 signature")
		return
	}
	raw, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	status, code, hang := f.status, f.code, f.hang
	f.mu.Unlock()
	if hang > 0 {
		select {
		case <-time.After(hang):
		case <-r.Context().Done():
			return
		}
	}
	if status != 0 {
		fail(w, status, code, "the fake was told to fail")
		return
	}
	var b sendEmailBody
	if err := json.Unmarshal(raw, &b); err != nil || b.Content.Simple == nil {
		fail(w, http.StatusBadRequest, "BadRequestException", "not a simple SendEmail")
		return
	}
	e := Email{MessageID: fmt.Sprintf("0100018fake%08d-ses", f.n.Add(1)), From: b.FromEmailAddress,
		To: b.Destination.ToAddresses, Subject: b.Content.Simple.Subject.Data, Headers: map[string]string{},
		Tags: map[string]string{}, ConfigSet: b.ConfigurationSetName}
	if t := b.Content.Simple.Body.Text; t != nil {
		e.Text = t.Data
	}
	if h := b.Content.Simple.Body.Html; h != nil {
		e.HTML = h.Data
	}
	for _, h := range b.Content.Simple.Headers {
		e.Headers[h.Name] = h.Value
	}
	for _, t := range b.EmailTags {
		e.Tags[t.Name] = t.Value
	}
	f.mu.Lock()
	f.emails = append(f.emails, e)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"MessageId": e.MessageID})
}

// fail answers as SES's restJson1 errors do: the code in
// X-Amzn-ErrorType, the text in the body's message.
func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}
