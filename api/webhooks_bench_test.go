package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/apikeys"
	"tidings/internal/app"
	"tidings/internal/auth"
	"tidings/internal/config"
	"tidings/internal/keycache"
	"tidings/internal/ratelimit"
	"tidings/internal/sendgridevents"
	"tidings/internal/sendgridevents/sgtest"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
	"tidings/worker"
)

// BenchmarkSendgridWebhook posts 50,000 SendGrid events in signed batches
// of 1,000 and reports apart the accept rate (the HTTP handler: verify,
// store the body, enqueue the task) and the apply rate (the worker's task
// run on each stored batch: parse, dedup, apply). The audience is 10,000
// sends of 2,000 contacts in 5 tenants; each send gets delivered, three
// opens and a click, shuffled across batches as SendGrid mixes them.
//
// With outbound=on every tenant has an outbound webhook endpoint that takes
// every event type, so each applied outcome also writes its message and
// delivery (schema 0016's triggers): the cost of the outbox, against
// outbound=off in the same run.
//
//	go test ./api/ -run '^$' -bench SendgridWebhook -benchtime 1x
func BenchmarkSendgridWebhook(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("outbound=%v", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			benchSendgridWebhook(b, on)
		})
	}
}

func benchSendgridWebhook(b *testing.B, outboundOn bool) {
	const (
		tenants, contactsPer, sendsPer = 5, 400, 5 // 10,000 sends
		perSend, batchSize             = 5, 1000   // 50,000 events
	)
	ctx := context.Background()
	cfg, err := config.FromLookup(func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	db := testenv.DB(b)
	rdb, prefix := testenv.Redis(b)
	qURL, _ := testenv.RedisDB(b)
	qOpt, err := config.AsynqRedis(qURL)
	if err != nil {
		b.Fatal(err)
	}
	queue := asynq.NewClient(qOpt)
	defer queue.Close()
	priv, pub, err := sgtest.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	key, err := sendgridevents.NewVerifier(pub)
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	app, svc := newAppServices(b, app.Infra{Config: cfg, DB: db, Redis: rdb, RedisPrefix: prefix, Log: quiet,
		Keys: keycache.New(apikeys.Loader(db), rdb, prefix+"evict", 0, quiet), Tasks: tasks.NewClient(queue, nil, quiet)},
		Deps{Limiter: ratelimit.NewPer(rdb, 100, time.Minute, prefix), Sessions: auth.NewSessionVerifier("x", "", ""),
			WebhookKey: key})
	apply := worker.HandleWebhookBatch(svc)

	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO tenants (id, name) SELECT 'ten_' || t, 'T' FROM generate_series(1, %d) t`, tenants),
		fmt.Sprintf(`INSERT INTO contacts (tenant_id, id, email) SELECT 'ten_' || t, 'cnt_' || c, 'c' || c || '@example.com'
			FROM generate_series(1, %d) t, generate_series(1, %d) c`, tenants, contactsPer),
		fmt.Sprintf(`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version, from_address, to_address, subject, sent_at)
			SELECT 'ten_' || t, 'snd_' || c || '_' || s, 'm', 'cnt_' || c, 'welcome', 1, 'a@acme.test', 'c@example.com', 'Hi', now()
			FROM generate_series(1, %d) t, generate_series(1, %d) c, generate_series(1, %d) s`, tenants, contactsPer, sendsPer),
		map[bool]string{false: `SELECT 1`, true: fmt.Sprintf(`INSERT INTO webhook_endpoints (tenant_id, id, url, secret)
			SELECT 'ten_' || t, 'whk_' || t, 'https://8.8.8.8/hook', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' FROM generate_series(1, %d) t`, tenants)}[outboundOn],
		`ANALYZE`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}

	var acceptTime, applyTime time.Duration
	var events int
	for i := 0; i < b.N; i++ {
		now := time.Now()
		var evs []map[string]any
		kinds := []string{"delivered", "open", "open", "open", "click"}
		for t := 1; t <= tenants; t++ {
			for c := 1; c <= contactsPer; c++ {
				for s := 1; s <= sendsPer; s++ {
					for k := 0; k < perSend; k++ {
						evs = append(evs, map[string]any{"event": kinds[k], "timestamp": now.Unix(),
							"sg_event_id": fmt.Sprintf("i%d-%d-%d-%d-%d", i, t, c, s, k), "email": "c@example.com",
							"url": "https://acme.test/", "tenant_id": fmt.Sprintf("ten_%d", t), "send_id": fmt.Sprintf("snd_%d_%d", c, s)})
					}
				}
			}
		}
		rand.Shuffle(len(evs), func(a, z int) { evs[a], evs[z] = evs[z], evs[a] })
		type post struct {
			body    string
			headers map[string]string
		}
		var posts []post
		for start := 0; start < len(evs); start += batchSize {
			body, _ := json.Marshal(evs[start:min(start+batchSize, len(evs))])
			h, err := sgtest.Headers(priv, body, now)
			if err != nil {
				b.Fatal(err)
			}
			posts = append(posts, post{string(body), h})
		}
		events += len(evs)

		b.StartTimer()
		start := time.Now()
		for _, p := range posts {
			req := httptest.NewRequest("POST", "/webhooks/sendgrid", strings.NewReader(p.body))
			for k, v := range p.headers {
				req.Header.Set(k, v)
			}
			res, err := app.Test(req, -1)
			if err != nil || res.StatusCode != 204 {
				body, _ := io.ReadAll(res.Body)
				b.Fatalf("accept: %v %d %s", err, res.StatusCode, body)
			}
			res.Body.Close()
		}
		acceptTime += time.Since(start)
		b.StopTimer()

		rows, err := db.Pool.Query(ctx, `SELECT id FROM webhook_batches WHERE applied_at IS NULL ORDER BY id`)
		if err != nil {
			b.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			_ = rows.Scan(&id)
			ids = append(ids, id)
		}
		rows.Close()

		b.StartTimer()
		start = time.Now()
		for _, id := range ids {
			p, _ := json.Marshal(map[string]int64{"batchId": id})
			if err := apply.ProcessTask(ctx, asynq.NewTask(tasks.TypeWebhookBatch, p)); err != nil {
				b.Fatal(err)
			}
		}
		applyTime += time.Since(start)
		b.StopTimer()
	}
	var applied int64
	if err := db.Pool.QueryRow(ctx, `SELECT sum(applied) FROM webhook_batches`).Scan(&applied); err != nil || applied != int64(events) {
		b.Fatalf("applied %d of %d events (%v)", applied, events, err)
	}
	b.ReportMetric(float64(events)/acceptTime.Seconds(), "accept_events/s")
	b.ReportMetric(float64(events)/applyTime.Seconds(), "apply_events/s")
	if outboundOn {
		var msgs int64
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_outbox`).Scan(&msgs); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(msgs)/applyTime.Seconds(), "outbox_messages/s")
	}
}
