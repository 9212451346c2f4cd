package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sendgrid/rest"
	"github.com/sendgrid/sendgrid-go"
	sgmail "github.com/sendgrid/sendgrid-go/helpers/mail"
)

// sendgridProvider posts to SendGrid's v3 Mail Send API with the official
// client library. It sends the request through its own rest.Client rather
// than sendgrid.MakeRequest*, because those use a package-level client
// without a timeout and the *Retry variants sleep and retry on 429 inside
// the call, hiding the rate limit from the caller, whose job retrying is.
type sendgridProvider struct {
	apiKey string
	host   string
	client *rest.Client
	now    func() time.Time
}

// sendgridMailSend is the v3 Mail Send endpoint, appended to SENDGRID_API_URL.
const sendgridMailSend = "/v3/mail/send"

func newSendGrid(apiKey, apiURL string, o options) (*sendgridProvider, error) {
	if apiKey == "" {
		return nil, fmt.Errorf("SENDGRID_API_KEY is required when EMAIL_PROVIDER=sendgrid")
	}
	if apiURL == "" {
		apiURL = "https://api.sendgrid.com"
	}
	hc := o.httpClient
	if hc == nil {
		// http.DefaultTransport keeps two idle connections per host: at
		// hundreds of sends per second every other call would open a new
		// TLS connection to SendGrid.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 256
		t.MaxIdleConnsPerHost = 256
		hc = &http.Client{
			Timeout:   o.timeout,
			Transport: t,
			// SendGrid does not redirect Mail Send; following one would
			// re-post the message somewhere else.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &sendgridProvider{
		apiKey: apiKey,
		host:   strings.TrimRight(apiURL, "/"),
		client: &rest.Client{HTTPClient: hc},
		now:    o.now,
	}, nil
}

// Name implements Provider.
func (p *sendgridProvider) Name() string { return NameSendGrid }

// Send implements Provider; the message id is SendGrid's X-Message-Id,
// which prefixes the sg_message_id of the webhook events for the message.
// An accepted message without the header returns an empty id and no error:
// it was sent, and the events still carry custom_arg send_id.
func (p *sendgridProvider) Send(ctx context.Context, msg Message) (string, error) {
	msg, err := validate(msg)
	if err != nil {
		return "", err
	}
	// A fresh request per call: rest.Request holds a headers map, which
	// concurrent sends must not share.
	req := sendgrid.GetRequest(p.apiKey, sendgridMailSend, p.host)
	req.Method = rest.Post
	req.Body, err = requestBody(sendgridMail(msg))
	if err != nil {
		return "", err
	}

	// Whether the request reached SendGrid decides what a failure means:
	// before it was written (refused, DNS, TLS) nothing was sent; after,
	// no answer leaves the message in doubt (ADDENDUM section 12).
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	})
	resp, err := p.client.SendWithContext(ctx, req)
	if err != nil {
		inDoubt := wrote.Load()
		return "", &Error{Provider: NameSendGrid, Transient: true, Err: err, InDoubt: inDoubt, Down: !inDoubt}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return firstHeader(resp.Headers, "X-Message-Id"), nil
	}
	return "", sendgridError(resp, p.now())
}

// requestBody is the Mail Send body as JSON. It is what
// sgmail.GetRequestBody makes, less the escaping of <, > and & as \u003c,
// \u003e and \u0026 that json.Marshal adds for HTML pages: JSON does not
// ask for it, and a message's HTML is mostly those characters, so the
// escaped body was up to twice as long, for us to write and SendGrid to
// read.
func requestBody(m *sgmail.SGMailV3) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// sendgridMail builds the Mail Send body. Everything is message-level (one
// personalization, one recipient): custom_args and headers apply to it, and
// SendGrid's own click, open, subscription and Google Analytics tracking
// are off because we rewrite links and add our own pixel and unsubscribe
// link; theirs would wrap our tracking links in theirs.
func sendgridMail(msg Message) *sgmail.SGMailV3 {
	m := sgmail.NewV3Mail()
	m.SetFrom(sgmail.NewEmail(msg.From.Name, msg.From.Address))
	m.Subject = msg.Subject
	p := sgmail.NewPersonalization()
	p.AddTos(sgmail.NewEmail("", msg.To))
	m.AddPersonalizations(p)
	// SendGrid requires text/plain first, then text/html.
	// SendGrid refuses an empty content value; a lone space keeps the
	// text part (and multipart/alternative) for a message without text.
	text := msg.Text
	if text == "" {
		text = " "
	}
	m.AddContent(sgmail.NewContent("text/plain", text), sgmail.NewContent("text/html", msg.HTML))
	m.SetCustomArg("send_id", msg.SendID)
	m.SetCustomArg("tenant_id", msg.TenantID)
	for _, h := range msg.Headers {
		m.SetHeader(h.Name, h.Value)
	}
	ts := sgmail.NewTrackingSettings()
	ts.SetClickTracking(sgmail.NewClickTrackingSetting().SetEnable(false).SetEnableText(false))
	ts.SetOpenTracking(sgmail.NewOpenTrackingSetting().SetEnable(false))
	ts.SetSubscriptionTracking(sgmail.NewSubscriptionTrackingSetting().SetEnable(false))
	ts.SetGoogleAnalytics(sgmail.NewGaSetting().SetEnable(false))
	m.SetTrackingSettings(ts)
	return m
}

// sendgridError classifies a non-2xx answer: 429 and 5xx are temporary,
// every other status is permanent (a 400 will be a 400 again). SendGrid's
// error JSON ({"errors":[{"message","field"}]}) becomes Message.
func sendgridError(resp *rest.Response, now time.Time) *Error {
	e := &Error{
		Provider:  NameSendGrid,
		Status:    resp.StatusCode,
		Transient: resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500,
		Message:   sendgridErrorMessage(resp.Body),
		Down:      resp.StatusCode >= 500,
	}
	if e.Transient {
		e.RetryAfter = retryAfter(resp.Headers, now)
	}
	return e
}

func sendgridErrorMessage(body string) string {
	var doc struct {
		Errors []struct {
			Message string  `json:"message"`
			Field   *string `json:"field"`
		} `json:"errors"`
	}
	if json.Unmarshal([]byte(body), &doc) != nil || len(doc.Errors) == 0 {
		if len(body) > 200 {
			body = body[:200]
		}
		return strings.TrimSpace(body)
	}
	parts := make([]string, 0, len(doc.Errors))
	for _, e := range doc.Errors {
		if e.Field != nil && *e.Field != "" {
			parts = append(parts, *e.Field+": "+e.Message)
		} else {
			parts = append(parts, e.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// retryAfter reads the wait a 429 or 503 asks for: Retry-After in seconds
// or as an HTTP date, else SendGrid's X-RateLimit-Reset (a Unix time).
func retryAfter(h map[string][]string, now time.Time) time.Duration {
	if v := firstHeader(h, "Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil && s >= 0 {
			return time.Duration(s) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	if v := firstHeader(h, "X-RateLimit-Reset"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			return max(time.Unix(s, 0).Sub(now), 0)
		}
	}
	return 0
}

// firstHeader reads a header from rest.Response's map, which holds
// http.Header's canonical keys.
func firstHeader(h map[string][]string, name string) string {
	if v := http.Header(h).Get(name); v != "" {
		return strings.TrimSpace(v)
	}
	return ""
}
