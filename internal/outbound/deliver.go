package outbound

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"tidings/internal/store"
	"tidings/internal/telemetry"
	"tidings/queries"
)

// Timeout bounds one attempt, connection to last byte read (ADDENDUM 14).
const Timeout = 15 * time.Second

// maxResponseBytes is how much of an answer is read (and kept as the
// error): a receiver cannot make us read more.
const maxResponseBytes = 1024

// DefaultSchedule is WEBHOOK_RETRY_SCHEDULE's default.
var DefaultSchedule = []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// NewClient is the HTTP client of deliveries: every connection's address
// passes the guard as it is dialled (after DNS: rebinding cannot get
// through), no proxy from the environment, no redirect followed, Timeout
// for the whole attempt.
func NewClient(g *Guard) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: g.control}
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
	// Parallel bounds a batch's concurrent posts; PerEndpoint how many of
	// one endpoint a batch takes.
	Parallel, PerEndpoint int
	Log                   *slog.Logger
}

// DefaultBatch is how many deliveries one claim takes.
const DefaultBatch = 100

// lease is how long a claimed delivery is held: longer than an attempt.
const lease = 2 * Timeout

// finishRow is one row of WebhookDeliveryFinish's JSON.
type finishRow struct {
	TenantID      string     `json:"tenant_id"`
	EndpointID    string     `json:"endpoint_id"`
	MessageID     string     `json:"message_id"`
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

// Run fans the outbox out, claims a batch of due deliveries, posts them
// concurrently, and writes the outcomes in one statement. It returns how
// many it claimed.
func (d *Deliverer) Run(ctx context.Context) (int, error) {
	if _, err := d.FanOut(ctx); err != nil {
		return 0, err
	}
	per := max(d.PerEndpoint, 1)
	rows, err := d.DB.WebhookDeliveryClaim(ctx, queries.WebhookDeliveryClaimParams{Scan: 4 * DefaultBatch,
		PerEndpoint: int32(per), Lim: DefaultBatch, LeaseSeconds: lease.Seconds()})
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	out := make([]finishRow, len(rows))
	sem := make(chan struct{}, max(d.Parallel, 1))
	var wg sync.WaitGroup
	for i, r := range rows {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = d.attempt(ctx, r)
		})
	}
	wg.Wait()
	b, err := json.Marshal(out)
	if err != nil {
		return len(rows), err
	}
	// Written even if the task is being stopped: the posts happened.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return len(rows), d.DB.WebhookDeliveryFinish(wctx, b)
}

// Body is a delivery's JSON body.
type Body struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// attempt posts one delivery and says what became of it.
func (d *Deliverer) attempt(ctx context.Context, r queries.WebhookDeliveryClaimRow) finishRow {
	res := finishRow{TenantID: r.TenantID, EndpointID: r.EndpointID, MessageID: r.MessageID}
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
	msg := err.Error()
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
	return resp.StatusCode, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.ToValidUTF8(string(head), "?"))
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
