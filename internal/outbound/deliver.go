package outbound

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"tidings/internal/store"
	"tidings/internal/telemetry"
	"tidings/queries"
)

// Timeout bounds one attempt, connection to last byte read (ADDENDUM 14).
const Timeout = 15 * time.Second

// maxResponseBytes is how much of a non-2xx answer is read and kept (as
// the delivery's lastError, for 30 days): enough for a receiver's own
// error message ("invalid signature", a short JSON error), too little for
// a webhook to serve as a reader of whatever a host answers, and a bound
// on what each failed attempt stores.
const maxResponseBytes = 256

// DefaultSchedule is WEBHOOK_RETRY_SCHEDULE's default.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// NewClient is the HTTP client of deliveries: every connection's address
// passes the guard as it is dialled (after DNS: rebinding cannot get
// through), no proxy from the environment, no redirect followed, Timeout
// for the whole attempt.
func NewClient(g *Guard) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: g.control, Resolver: g.Resolver}
	tr := &http.Transport{Proxy: nil, DialContext: dialer.DialContext, ForceAttemptHTTP2: true,
		MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second, ResponseHeaderTimeout: Timeout}
	return &http.Client{Transport: tr, Timeout: Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Deliverer posts due deliveries.
type Deliverer struct {
	DB     *store.DB
	Client *http.Client
	// Schedule is WEBHOOK_RETRY_SCHEDULE: the waits after each failed
	// attempt; past its end a delivery has failed.
	Schedule []time.Duration
	// Parallel bounds a batch's concurrent posts. PerTenant is how many
	// deliveries of one tenant may be in flight at once, across every
	// worker (0: DefaultPerTenant); PerEndpoint how many of one endpoint
	// (0: DefaultPerEndpoint).
	Parallel, PerTenant, PerEndpoint int
	Log                              *slog.Logger
}

// DefaultBatch is how many deliveries one claim takes.
const DefaultBatch = 100

// DefaultPerTenant and DefaultPerEndpoint are a tenant's and an endpoint's
// shares of the deliveries in flight: half a batch for a tenant, so a
// tenant whose endpoints all hang for the whole 15 s holds at most 50
// posts and every claim still has room for others; half of that for an
// endpoint, so one endpoint of a tenant cannot hold its others back.
const (
	DefaultPerTenant   = DefaultBatch / 2
	DefaultPerEndpoint = DefaultPerTenant / 2
)

// lease is how long a claimed delivery is held: longer than an attempt.
const lease = 2 * Timeout

// finishRow is one row of WebhookDeliveryFinish's JSON.
type finishRow struct {
	TenantID      string     `json:"tenant_id"`
	EndpointID    string     `json:"endpoint_id"`
	MessageID     string     `json:"message_id"`
	CreatedAt     time.Time  `json:"created_at"`
	OK            bool       `json:"ok"`
	StatusCode    *int       `json:"status_code"`
	Error         *string    `json:"error"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
}

// fanOutBatch is how many outbox rows one fan-out statement takes.
const fanOutBatch = 1000

// FanOut turns the facts waiting in the outbox into messages and their
// deliveries (schema 0017), a batch per statement, until none is left. It
// returns how many it took.
func (d *Deliverer) FanOut(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := d.DB.WebhookFanOut(ctx, fanOutBatch)
		total += n
		if err != nil || n < fanOutBatch {
			return total, err
		}
	}
}

// Run fans the outbox out, claims a batch of due deliveries (within each
// tenant's share), posts them concurrently, and writes their outcomes as
// they come: an outcome waits for the write in progress, never for the
// batch's slowest attempt, so one tenant's hanging endpoint delays no
// other's delivery. It returns how many it claimed, once every attempt
// has ended.
func (d *Deliverer) Run(ctx context.Context) (int, error) {
	if _, err := d.FanOut(ctx); err != nil {
		return 0, err
	}
	rows, err := d.claim(ctx)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	done := make(chan finishRow, len(rows)) // an attempt never waits for a write
	go func() {
		sem := make(chan struct{}, max(d.Parallel, 1))
		var wg sync.WaitGroup
		for _, r := range rows {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				done <- d.attempt(ctx, r)
			})
		}
		wg.Wait()
		close(done)
	}()
	return len(rows), d.finish(ctx, done)
}

// claim takes a batch under the claim lock (WebhookDeliveryClaimLock).
func (d *Deliverer) claim(ctx context.Context) ([]queries.WebhookDeliveryClaimRow, error) {
	var rows []queries.WebhookDeliveryClaimRow
	err := d.DB.InTx(ctx, func(q *store.Tx) error {
		if err := q.WebhookDeliveryClaimLock(ctx); err != nil {
			return err
		}
		var err error
		rows, err = q.WebhookDeliveryClaim(ctx, queries.WebhookDeliveryClaimParams{
			PerTenant: int32(cmp.Or(d.PerTenant, DefaultPerTenant)), PerEndpoint: int32(cmp.Or(d.PerEndpoint, DefaultPerEndpoint)),
			Lim: DefaultBatch, LeaseSeconds: lease.Seconds()})
		return err
	})
	return rows, err
}

// finish writes the outcomes arriving on done until it closes: whatever
// has arrived while a write was in progress goes in the next one, so a
// fast batch still writes in few statements. It returns the first error,
// after every attempt has ended.
func (d *Deliverer) finish(ctx context.Context, done <-chan finishRow) error {
	var first error
	write := func(out []finishRow) {
		b, err := json.Marshal(out)
		if err == nil {
			// Written even if the task is being stopped: the posts happened.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err = d.DB.WebhookDeliveryFinish(wctx, b)
			cancel()
		}
		if first == nil {
			first = err
		}
	}
	for r := range done {
		out := []finishRow{r}
	more:
		for {
			select {
			case r, ok := <-done:
				if !ok {
					break more
				}
				out = append(out, r)
			default:
				break more
			}
		}
		write(out)
	}
	return first
}

// Body is a delivery's JSON body.
type Body struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// attempt posts one delivery and says what became of it.
func (d *Deliverer) attempt(ctx context.Context, r queries.WebhookDeliveryClaimRow) finishRow {
	res := finishRow{TenantID: r.TenantID, EndpointID: r.EndpointID, MessageID: r.MessageID, CreatedAt: r.CreatedAt}
	start := time.Now()
	code, err := d.post(ctx, r)
	telemetry.WebhookDelivery(err == nil, time.Since(start))
	if err == nil {
		res.OK, res.StatusCode = true, &code
		return res
	}
	if code != 0 {
		res.StatusCode = &code
	}
	// The stored error names no address (describe); the log keeps the
	// whole of it for the operator.
	if d.Log != nil {
		d.Log.Debug("outbound webhook attempt failed", "tenant_id", r.TenantID, "endpoint_id", r.EndpointID,
			"message_id", r.MessageID, "err", err)
	}
	msg := describe(err)
	res.Error = &msg
	if n := int(r.Attempts); n < len(d.Schedule) {
		next := time.Now().Add(d.Schedule[n])
		res.NextAttemptAt = &next
	}
	return res
}

// post sends the signed message; any 2xx is success.
func (d *Deliverer) post(ctx context.Context, r queries.WebhookDeliveryClaimRow) (int, error) {
	body, err := json.Marshal(Body{Type: r.Type, Timestamp: r.MessageAt.UTC().Format("2006-01-02T15:04:05.000Z"),
		Data: r.Data})
	if err != nil {
		return 0, err
	}
	now := time.Now()
	sig, err := Sign(r.MessageID, now, body, r.Secret, r.PreviousSecret)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.Url, strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Tidings-Webhooks/1")
	req.Header.Set("webhook-id", r.MessageID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := d.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, &statusError{code: resp.StatusCode, head: printable(head)}
}

// statusError is a non-2xx answer and the start of its body.
type statusError struct {
	code int
	head string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.head) }

// printable is b as valid UTF-8 with its control characters (but tab)
// replaced: what is kept of an answer is read as text.
func printable(b []byte) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || !unicode.IsControl(r) {
			return r
		}
		return '?'
	}, strings.ToValidUTF8(string(b), "?"))
}

// describe says what failed in an attempt, in words that name no address:
// a Go network error carries the resolver's address ("lookup x on
// 10.0.0.2:53"), the address dialled and the URL, which the API would
// otherwise answer to the tenant (the log keeps them). A non-2xx answer is
// its status and the start of its body, the receiver's own words.
func describe(err error) string {
	var status *statusError
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.As(err, &status):
		return status.Error()
	case errors.Is(err, ErrPort):
		return "refused: the " + ErrPort.Error()
	case errors.Is(err, ErrPrivateTarget):
		return "refused: the host's address is not a public internet address"
	case errors.As(err, &dns) && dns.IsNotFound:
		return "the host name does not resolve"
	case errors.As(err, &dns):
		return "the host name could not be resolved"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		return "no answer within " + Timeout.String()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return "the host is unreachable"
	case errors.As(err, &cert):
		return "TLS: the certificate is not valid for the host"
	case errors.As(err, &record):
		return "TLS: the answer is not TLS"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection was closed before an answer"
	}
	return "the request failed (no HTTP answer)"
}

// Sign is the webhook-signature header of a message: "v1,<base64>" for the
// secret and, during a rotation, for the previous one too, space-separated
// (Standard Webhooks, signed by its reference library).
func Sign(msgID string, at time.Time, body []byte, secrets ...string) (string, error) {
	var sigs []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return "", err
		}
		sig, err := wh.Sign(msgID, at, body)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), nil
}
