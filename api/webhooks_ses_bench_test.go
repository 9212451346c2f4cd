package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	"tidings/internal/provider/ses/sestest"
	"tidings/internal/ratelimit"
	"tidings/internal/sesevents"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
	"tidings/worker"
)

// BenchmarkSESWebhook posts 20,000 signed SNS notifications (one SES event
// each, as SNS posts them: Delivery, two Opens, a Click per send, 5,000
// sends of 1,000 contacts in 5 tenants) and reports the accept rate (the
// handler: verify the signature, store, enqueue) and the apply rate (the
// worker's task run on each stored notification: the first run applies up
// to 1,000 waiting ones together; the others find theirs applied).
// Target: apply ≥ 5,000 events/s, as SendGrid's.
//
//	go test ./api/ -run '^$' -bench SESWebhook -benchtime 1x
func BenchmarkSESWebhook(b *testing.B) {
	const tenants, contactsPer, sendsPer = 5, 200, 5 // 5,000 sends, 20,000 events
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
	sns := sestest.NewSNS(b)
	quiet := slog.New(slog.DiscardHandler)
	app, svc := newAppServices(b, app.Infra{Config: cfg, DB: db, Redis: rdb, RedisPrefix: prefix, Log: quiet,
		Keys: keycache.New(apikeys.Loader(db), rdb, prefix+"evict", 0, quiet), Tasks: tasks.NewClient(queue, nil, quiet)},
		Deps{Limiter: ratelimit.NewPer(rdb, 100, time.Minute, prefix), Sessions: auth.NewSessionVerifier("x", "", ""),
			SNS: sesevents.NewVerifier([]string{sns.Host()}, nil, sns.Client())})
	apply := worker.HandleWebhookBatch(svc)
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO tenants (id, name) SELECT 'ten_' || t, 'T' FROM generate_series(1, %d) t`, tenants),
		fmt.Sprintf(`INSERT INTO contacts (tenant_id, id, email) SELECT 'ten_' || t, 'cnt_' || c, 'c' || c || '@example.com'
			FROM generate_series(1, %d) t, generate_series(1, %d) c`, tenants, contactsPer),
		fmt.Sprintf(`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version, from_address, to_address, subject, sent_at, provider)
			SELECT 'ten_' || t, 'snd_' || c || '_' || s, 'm', 'cnt_' || c, 'welcome', 1, 'a@acme.test', 'c@example.com', 'Hi', now(), 'ses'
			FROM generate_series(1, %d) t, generate_series(1, %d) c, generate_series(1, %d) s`, tenants, contactsPer, sendsPer),
		`ANALYZE`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	var acceptTime, applyTime time.Duration
	var events int
	for range b.N {
		now := time.Now()
		var bodies []string
		for t := 1; t <= tenants; t++ {
			for c := 1; c <= contactsPer; c++ {
				for s := 1; s <= sendsPer; s++ {
					for _, kind := range []string{"Delivery", "Open", "Open", "Click"} {
						msg := sestest.Event(kind, fmt.Sprintf("snd_%d_%d", c, s), fmt.Sprintf("ten_%d", t), "c@example.com", "", now)
						bodies = append(bodies, string(sestest.Body(sns.Notification(msg, "2"))))
					}
				}
			}
		}
		events += len(bodies)
		b.StartTimer()
		start := time.Now()
		for _, body := range bodies {
			req := httptest.NewRequest("POST", "/webhooks/ses", strings.NewReader(body))
			req.Header.Set("Content-Type", "text/plain; charset=UTF-8")
			res, err := app.Test(req, -1)
			if err != nil || res.StatusCode != 204 {
				b.Fatalf("accept: %v %v", err, res.StatusCode)
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
}
