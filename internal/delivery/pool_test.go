package delivery_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"tidings/internal/config"
	"tidings/internal/delivery"
	"tidings/internal/domains"
	"tidings/internal/events"
	"tidings/internal/provider"
	"tidings/internal/provider/providertest"
	"tidings/internal/provider/ses"
	"tidings/internal/provider/ses/sestest"
	"tidings/internal/render"
	"tidings/internal/store"
	"tidings/internal/templates"
	"tidings/internal/testenv"
	"tidings/internal/tracking"
)

// poolFixture is a Sender over a pool of the fake SendGrid then the fake
// SES on both streams, with a tenant, its domain, 100 contacts and a
// transactional template.
type poolFixture struct {
	db     *store.DB
	sg     *providertest.SendGrid
	ses    *sestest.SES
	sender *delivery.Sender
	pool   *provider.Pool
}

const poolTenant = "ten_pool"

func newPoolFixture(tb testing.TB, timeout time.Duration) *poolFixture {
	tb.Helper()
	ctx := context.Background()
	f := &poolFixture{db: testenv.DB(tb), sg: providertest.NewSendGrid(tb), ses: sestest.NewSES(tb)}
	f.sg.KeepMessages(false)
	cfg, err := config.FromLookup(func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	f.sg.Configure(cfg)
	cfg.ProviderTimeout = timeout
	sg, err := provider.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	sp, err := ses.New(ctx, ses.Config{Region: "eu-west-1", Endpoint: f.ses.URL(), Timeout: timeout,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
	if err != nil {
		tb.Fatal(err)
	}
	f.pool = provider.NewPool(map[provider.Stream][]provider.Provider{provider.Transactional: {sg, sp},
		provider.Marketing: {sg, sp}}, time.Minute)
	for _, q := range []string{
		`INSERT INTO tenants (id, name, sending_status, default_from_address) VALUES ('ten_pool', 'Pool', 'enabled', 'Pool <hi@pool.example>')`,
		`INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
			VALUES ('ten_pool', 'pool.example', 'verified', true, 't', '{a,b,c}')`,
		`INSERT INTO contacts (tenant_id, id, email) SELECT 'ten_pool', 'cnt_' || g, 'c' || g || '@example.com' FROM generate_series(1, 100) g`,
	} {
		if _, err := f.db.Pool.Exec(ctx, q); err != nil {
			tb.Fatal(err)
		}
	}
	ts := &templates.Store{DB: f.db, Compiler: templates.Prepare{MJML: testenv.MJML(tb)}, FreeLimit: 100}
	name, subject, content := "Reset", "Reset", `<mjml><mj-body><mj-section><mj-column><mj-text>Reset: <a href="https://app.example/r">here</a></mj-text></mj-column></mj-section></mj-body></mjml>`
	if _, _, err := ts.Put(ctx, poolTenant, "reset", templates.Put{Name: &name, Subject: &subject, Content: &content}); err != nil {
		tb.Fatal(err)
	}
	signer, err := tracking.NewSigner([]byte("pool-secret"))
	if err != nil {
		tb.Fatal(err)
	}
	f.sender = &delivery.Sender{DB: f.db, Templates: &templates.Renderer{DB: f.db, R: render.NewRenderer(render.RendererOptions{})},
		Domains: &domains.Store{DB: f.db}, Pool: f.pool, Tracking: signer, BaseURL: "https://t.example.com",
		Events: &events.Recorder{DB: f.db}, Log: slog.New(slog.DiscardHandler)}
	return f
}

func (f *poolFixture) send(i int) (delivery.Result, error) {
	return f.sender.Send(context.Background(), poolTenant, delivery.Request{To: fmt.Sprintf("c%d@example.com", i%100+1), TemplateID: "reset"})
}

func (f *poolFixture) scalar(tb testing.TB, q string, args ...any) string {
	tb.Helper()
	var v any
	if err := f.db.Pool.QueryRow(context.Background(), q, args...).Scan(&v); err != nil {
		tb.Fatal(err)
	}
	return fmt.Sprint(v)
}

// ADDENDUM 22: SendGrid failing (503) moves the message to SES at once,
// and its record names SES; a message in doubt at SendGrid stays there,
// in doubt, never sent to SES; every provider refusing is 502 and no
// record.
func TestPoolFailoverRecordsProvider(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t, 300*time.Millisecond)

	res, err := f.send(1)
	if err != nil || f.scalar(t, `SELECT provider FROM sends WHERE id = $1`, res.SendID) != "sendgrid" {
		t.Fatalf("healthy: %v", err)
	}
	f.sg.FailNext(1, 503, 0)
	res, err = f.send(2)
	if err != nil || len(f.ses.Emails()) != 1 {
		t.Fatalf("failover: %v, SES has %d", err, len(f.ses.Emails()))
	}
	if got := f.scalar(t, `SELECT provider || ' ' || message_id FROM sends WHERE id = $1`, res.SendID); got != "ses "+f.ses.Emails()[0].MessageID {
		t.Fatalf("record after failover: %s", got)
	}
	if f.ses.Emails()[0].Tags["send_id"] != res.SendID {
		t.Fatal("SES got the message without its send_id tag")
	}

	// In doubt at SES (SendGrid's circuit is open now, so SES is first).
	f.ses.Hang(2 * time.Second)
	res, err = f.send(3)
	if !delivery.IsInDoubt(err) || res.SendID == "" {
		t.Fatalf("in doubt: %+v %v", res, err)
	}
	if got := f.scalar(t, `SELECT provider || ' ' || in_doubt::text FROM sends WHERE id = $1`, res.SendID); got != "ses true" {
		t.Fatalf("in-doubt record: %s", got)
	}
	if n := f.sg.Requests(); n != 2 {
		t.Fatalf("the message in doubt went on to SendGrid (%d requests)", n)
	}

	// Every provider refusing: 502, no record.
	f.ses.Hang(0)
	f.ses.FailWith(503, "ServiceUnavailable")
	f.sg.FailNext(1, 503, 0)
	before := f.scalar(t, `SELECT count(*) FROM sends`)
	if _, err := f.send(4); err == nil {
		t.Fatal("every provider refused: want an error")
	}
	if after := f.scalar(t, `SELECT count(*) FROM sends`); after != before {
		t.Fatalf("records %s -> %s: a refused message keeps no record", before, after)
	}
}

// BenchmarkPoolFailover: transactional sends through the pool (SendGrid,
// then SES), 16 at a time, with SendGrid healthy, then for one second from
// SendGrid's first failure (every request 503): the ratio of the two rates
// in one run (target ≥ 0.9). Both are against the local fakes.
//
//	go test ./internal/delivery -run '^$' -bench PoolFailover -benchtime 1x
func BenchmarkPoolFailover(b *testing.B) {
	f := newPoolFixture(b, 5*time.Second)
	const workers = 16
	rate := func(d time.Duration) float64 {
		var n atomic.Int64
		var i atomic.Int64
		deadline := time.Now().Add(d)
		start := time.Now()
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					if _, err := f.send(int(i.Add(1))); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
	for range b.N {
		rate(500 * time.Millisecond) // warm up both paths' connections
		healthy := rate(2 * time.Second)
		f.sg.FailNext(200_000, 503, 0)
		failing := rate(time.Second)
		f.sg.Reset()
		b.ReportMetric(healthy, "healthy_sends/s")
		b.ReportMetric(failing, "failing_first_second_sends/s")
		b.ReportMetric(failing/healthy, "ratio")
	}
}
