// Package providertest holds test doubles of email providers for the tests
// and benchmarks of other packages: a fake SendGrid Mail Send API that
// accepts what the real one would, records it, and fails on demand.
package providertest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sgmail "github.com/sendgrid/sendgrid-go/helpers/mail"

	"tidings/internal/config"
)

// FakeAPIKey is the key Configure puts in the configuration. The fake
// accepts any non-empty bearer token; a missing one is 401, as at SendGrid.
const FakeAPIKey = "SG.fake-key"

// SendGrid is a fake of SendGrid's v3 Mail Send endpoint (POST
// /v3/mail/send) on an httptest server. It answers 202 with a unique
// X-Message-Id, 400 with SendGrid's error JSON for a body SendGrid would
// refuse, and whatever FailNext queued. It is safe for concurrent use and
// cheap per request, so load tests can measure the service, not the fake.
type SendGrid struct {
	// URL is the base URL to use as SENDGRID_API_URL.
	URL string

	srv      *httptest.Server
	prefix   string
	seq      atomic.Uint64
	requests atomic.Int64
	accepted atomic.Int64
	keep     atomic.Bool
	trust    atomic.Bool
	latency  atomic.Int64 // time.Duration

	mu       sync.Mutex
	failures []Failure
	messages []Accepted
}

// Accepted is one message the fake answered 202 to.
type Accepted struct {
	MessageID string
	// Mail is the decoded request body, in the client library's own types.
	Mail sgmail.SGMailV3
	// Raw is the request body as posted, for checks of the exact JSON.
	Raw           []byte
	Authorization string
	ReceivedAt    time.Time
}

// Failure is an answer the fake gives instead of accepting a message.
type Failure struct {
	// Status is the HTTP status, e.g. 429, 500, 400.
	Status int
	// RetryAfter, when positive, is sent as Retry-After in whole seconds
	// (rounded up).
	RetryAfter time.Duration
	// Message goes into SendGrid's error JSON; a default per status when
	// empty.
	Message string
	// Hang gives no answer at all: the request is held until the client
	// gives up (its timeout). Drop reads the request and cuts the
	// connection. Either leaves the client without an answer: a send in
	// doubt. With Accept, the message is taken first (counted, recorded),
	// as when SendGrid accepted it and its answer was lost.
	Hang, Drop, Accept bool
}

// NewSendGrid starts a fake SendGrid server, closed when the test ends. It
// records accepted messages; see KeepMessages for long load tests.
func NewSendGrid(tb testing.TB) *SendGrid {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	f := &SendGrid{prefix: base64.RawURLEncoding.EncodeToString(b[:])}
	f.keep.Store(true)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	tb.Cleanup(f.srv.Close)
	return f
}

// Configure points cfg at the fake: EMAIL_PROVIDER=sendgrid, the fake's
// URL and FakeAPIKey.
func (f *SendGrid) Configure(cfg *config.Config) {
	cfg.EmailProvider = "sendgrid"
	cfg.SendgridAPIURL = f.URL
	cfg.SendgridAPIKey = FakeAPIKey
}

// FailNext makes the next n requests fail with status (and a Retry-After of
// retryAfter when positive), then the fake accepts again. Calls queue up.
func (f *SendGrid) FailNext(n int, status int, retryAfter time.Duration) {
	for range n {
		f.FailNextWith(Failure{Status: status, RetryAfter: retryAfter})
	}
}

// FailNextWith queues one failure answer.
func (f *SendGrid) FailNextWith(fl Failure) {
	f.mu.Lock()
	f.failures = append(f.failures, fl)
	f.mu.Unlock()
}

// KeepMessages switches recording of accepted messages on (the default) or
// off; off keeps memory flat in benchmarks, Count still counts.
func (f *SendGrid) KeepMessages(keep bool) { f.keep.Store(keep) }

// TrustBodies(true) makes the fake take every well-authorised request
// without decoding or checking its body, where SendGrid would refuse a bad
// one: for throughput benchmarks, in which reading the JSON was a fifth of
// the process's CPU (a remote provider reads it on its own machines) and
// recording is off anyway. Tests of what we send leave it off.
func (f *SendGrid) TrustBodies(trust bool) { f.trust.Store(trust) }

// SetLatency delays every answer by d, to stand in for the real API's
// round trip in load tests.
func (f *SendGrid) SetLatency(d time.Duration) { f.latency.Store(int64(d)) }

// Messages returns a copy of the accepted messages, oldest first.
func (f *SendGrid) Messages() []Accepted {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Accepted(nil), f.messages...)
}

// Count is the number of messages accepted (recorded or not).
func (f *SendGrid) Count() int { return int(f.accepted.Load()) }

// Requests is the number of Mail Send requests received, failed ones
// included: a retry test checks it to see the client did not retry itself.
func (f *SendGrid) Requests() int { return int(f.requests.Load()) }

// Refuse takes the fake down as a crashed or firewalled host: no new
// connection is accepted (a dial is refused), open connections close after
// their current answer and idle ones at once. There is no way back; the
// test's end still closes the server.
func (f *SendGrid) Refuse() {
	f.srv.Config.SetKeepAlivesEnabled(false)
	_ = f.srv.Listener.Close()
}

// Reset forgets recorded messages, counts and queued failures.
func (f *SendGrid) Reset() {
	f.mu.Lock()
	f.failures, f.messages = nil, nil
	f.mu.Unlock()
	f.accepted.Store(0)
	f.requests.Store(0)
}

func (f *SendGrid) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v3/mail/send" {
		writeError(w, http.StatusNotFound, "not found", "")
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "method not allowed", "")
		return
	}
	f.requests.Add(1)
	// Read the body first: only then does net/http notice a client that
	// hangs up, which ends the latency wait below.
	raw, err := io.ReadAll(io.LimitReader(r.Body, 30<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "could not read the request body", "")
		return
	}
	if d := time.Duration(f.latency.Load()); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done(): // the client gave up; so do we
			t.Stop()
			return
		}
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "Bearer ") || len(auth) == len("Bearer ") {
		writeError(w, http.StatusUnauthorized, "The provided authorization grant is invalid, expired, or revoked", "")
		return
	}
	if fl, ok := f.nextFailure(); ok && (fl.Hang || fl.Drop) {
		if fl.Accept {
			var m sgmail.SGMailV3
			_ = json.Unmarshal(raw, &m)
			f.accept(m, raw, auth)
		}
		if fl.Drop {
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					_ = c.Close()
				}
			}
			return
		}
		<-r.Context().Done()
		return
	} else if ok {
		if fl.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int((fl.RetryAfter+time.Second-1)/time.Second)))
		}
		msg := fl.Message
		if msg == "" {
			msg = http.StatusText(fl.Status)
		}
		writeError(w, fl.Status, msg, "")
		return
	}

	var m sgmail.SGMailV3
	if f.trust.Load() && !f.keep.Load() {
		w.Header().Set("X-Message-Id", f.accept(m, raw, auth))
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		writeError(w, http.StatusBadRequest, "Bad Request", "")
		return
	}
	if msg, field := check(&m); msg != "" {
		writeError(w, http.StatusBadRequest, msg, field)
		return
	}

	w.Header().Set("X-Message-Id", f.accept(m, raw, auth))
	w.WriteHeader(http.StatusAccepted)
}

// accept records and counts a message and returns its X-Message-Id.
func (f *SendGrid) accept(m sgmail.SGMailV3, raw []byte, auth string) string {
	id := f.prefix + strconv.FormatUint(f.seq.Add(1), 36)
	if f.keep.Load() {
		a := Accepted{MessageID: id, Mail: m, Raw: raw, Authorization: auth, ReceivedAt: time.Now()}
		f.mu.Lock()
		f.messages = append(f.messages, a)
		f.mu.Unlock()
	}
	f.accepted.Add(1)
	return id
}

func (f *SendGrid) nextFailure() (Failure, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.failures) == 0 {
		return Failure{}, false
	}
	fl := f.failures[0]
	f.failures = f.failures[1:]
	return fl, true
}

// check applies the Mail Send rules our client could break, with
// SendGrid's own messages and field names.
func check(m *sgmail.SGMailV3) (msg, field string) {
	switch {
	case len(m.Personalizations) == 0:
		return "The personalizations field is required and must have at least one personalization.", "personalizations"
	case m.From == nil || m.From.Address == "":
		return "The from object must be provided for every email send. It is an object that requires the email parameter, but may also contain a name parameter.", "from.email"
	case m.Subject == "" && m.Personalizations[0].Subject == "" && m.TemplateID == "":
		return "The subject is required. You can get around this requirement if you use a template with a subject defined or if every personalization has a subject defined.", "subject"
	case len(m.Content) == 0 && m.TemplateID == "":
		return "Unless a valid template_id is provided, the content parameter is required. There must be at least one defined content block.", "content"
	}
	for i, p := range m.Personalizations {
		if len(p.To) == 0 {
			return "The to array is required for all personalization objects, and must have at least one email object with a valid email address.", "personalizations." + strconv.Itoa(i) + ".to"
		}
	}
	if len(m.Content) > 1 && m.Content[0].Type != "text/plain" {
		return "If present, text/plain and text/html may only be provided in that order and must be first in the content array.", "content"
	}
	return "", ""
}

// writeError answers with SendGrid's error document.
func writeError(w http.ResponseWriter, status int, message, field string) {
	type sgError struct {
		Message string  `json:"message"`
		Field   *string `json:"field"`
		Help    *string `json:"help"`
	}
	e := sgError{Message: message}
	if field != "" {
		e.Field = &field
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Errors []sgError `json:"errors"`
	}{[]sgError{e}})
}
