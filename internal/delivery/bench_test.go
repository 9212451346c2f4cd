package delivery_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"tidings/internal/config"
	"tidings/internal/delivery"
	"tidings/internal/domains"
	"tidings/internal/events"
	"tidings/internal/metrics"
	"tidings/internal/provider"
	"tidings/internal/provider/providertest"
	"tidings/internal/render"
	"tidings/internal/templates"
	"tidings/internal/testenv"
	"tidings/internal/tracking"
	"tidings/queries"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// BenchmarkSend measures the transactional send (checks, render of a small
// transactional template and of the 23 KB newsletter, tracking, the real sendgrid-go client, the record)
// against the fake SendGrid, 16 sends at a time over 1,000 contacts of one
// tenant, and in the same run the fake's own raw rate through the same
// provider: the ceiling the send is compared with; send-metrics-off is the
// send with metrics counting turned off. Run:
//
//	go test -run '^$' -bench BenchmarkSend -benchtime 5000x ./internal/delivery/
//
// It reports sends/s, p50/p99 latency and CPU per send (user+system of the
// whole process, the fake included, divided by sends).
func BenchmarkSend(b *testing.B) {
	ctx := context.Background()
	db := testenv.DB(b)
	sg := providertest.NewSendGrid(b)
	sg.KeepMessages(false)
	cfg, err := config.FromLookup(func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	sg.Configure(cfg)
	prov, err := provider.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	const tenant = "ten_bench"
	exec := func(sql string, args ...any) {
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	exec(`INSERT INTO tenants (id, name, sending_status, default_from_address) VALUES ($1, 'Bench', 'enabled', 'News <news@bench.example>')`, tenant)
	exec(`INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
		VALUES ($1, 'bench.example', 'verified', true, 't', '{a,b,c}')`, tenant)
	const contacts = 1000
	exec(`INSERT INTO contacts (tenant_id, id, email, properties)
		SELECT $1, 'cnt_' || g, 'c' || g || '@example.com', jsonb_build_object('firstName', 'C' || g)
		FROM generate_series(1, $2::int) g`, tenant, contacts)
	src, err := os.ReadFile(filepath.Join("..", "mjml", "testdata", "newsletter.mjml"))
	if err != nil {
		b.Fatal(err)
	}
	ts := &templates.Store{DB: db, Compiler: templates.Prepare{MJML: testenv.MJML(b)}, FreeLimit: 100}
	name, subject, content := "News", "Hello {{ contact.firstName }}", string(src)
	news, _, err := ts.Put(ctx, tenant, "news", templates.Put{Name: &name, Subject: &subject, Content: &content})
	if err != nil {
		b.Fatal(err)
	}
	// A typical transactional message: a heading, a paragraph, a button.
	rname, rsubject, rcontent := "Reset", "Reset your password, {{ contact.firstName }}", `<mjml><mj-body><mj-section><mj-column>
<mj-text font-size="20px">Hi {{ contact.firstName }},</mj-text>
<mj-text>Someone asked to reset the password of {{ contact.email }}. If it was you, follow the link; it works for an hour.</mj-text>
<mj-button href="{{ resetUrl }}">Reset password</mj-button>
<mj-text font-size="12px">Not you? Ignore this email. <a href="{{ unsubscribeUrl }}">Unsubscribe</a></mj-text>
</mj-column></mj-section></mj-body></mjml>`
	reset, _, err := ts.Put(ctx, tenant, "reset", templates.Put{Name: &rname, Subject: &rsubject, Content: &rcontent})
	if err != nil {
		b.Fatal(err)
	}
	signer, err := tracking.NewSigner([]byte("bench-secret"))
	if err != nil {
		b.Fatal(err)
	}
	s := &delivery.Sender{DB: db, Templates: &templates.Renderer{DB: db, R: render.NewRenderer(render.RendererOptions{})},
		Domains: &domains.Store{DB: db}, Pool: provider.PoolOf(prov), Tracking: signer, BaseURL: "https://t.example.com",
		Events: &events.Recorder{DB: db}, Log: slog.New(slog.DiscardHandler)}

	const workers = 16
	run := func(b *testing.B, one func(i int) error) {
		var next atomic.Int64
		lat := make([][]time.Duration, workers)
		cpu0 := cpuTime()
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > int64(b.N) {
						return
					}
					t0 := time.Now()
					if err := one(int(i)); err != nil {
						b.Error(err)
						return
					}
					lat[w] = append(lat[w], time.Since(t0))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		all := slices.Concat(lat...)
		slices.Sort(all)
		if len(all) == 0 {
			return
		}
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "sends/s")
		b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(all[(len(all)*99)/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/send")
	}
	for _, tmpl := range []queries.Template{reset, news} {
		b.Run(fmt.Sprintf("%s-%dKB/provider-only", tmpl.ID, len(tmpl.CompiledHtml)>>10), func(b *testing.B) {
			// The same message size as the sends carry, so the ceiling
			// includes the fake's cost of reading it.
			msg := provider.Message{SendID: "snd_raw", TenantID: tenant, From: provider.Address{Address: "news@bench.example"},
				To: "c1@example.com", Subject: "Hello", HTML: tmpl.CompiledHtml, Text: render.HTMLToText(tmpl.CompiledHtml)}
			run(b, func(int) error { _, err := prov.Send(ctx, msg); return err })
		})
		send := func(i int) error {
			_, err := s.Send(ctx, tenant, delivery.Request{To: fmt.Sprintf("c%d@example.com", i%contacts+1), TemplateID: tmpl.ID,
				Variables: map[string]any{"resetUrl": "https://app.example.com/reset?t=abc",
					"items": []any{map[string]any{"name": "socks"}}}})
			return err
		}
		b.Run(fmt.Sprintf("%s-%dKB/send", tmpl.ID, len(tmpl.CompiledHtml)>>10), func(b *testing.B) { run(b, send) })
		// The same without the metrics count in the record's transaction:
		// what counting costs (docs/benchmarks.md).
		b.Run(fmt.Sprintf("%s-%dKB/send-metrics-off", tmpl.ID, len(tmpl.CompiledHtml)>>10), func(b *testing.B) {
			defer metrics.Disable()()
			run(b, send)
		})
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
