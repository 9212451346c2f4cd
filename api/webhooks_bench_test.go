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

	"github.com/gofiber/fiber/v2"
	"github.com/hibiken/asynq"

	"tidings/internal/apikeys"
	"tidings/internal/app"
	"tidings/internal/auth"
	"tidings/internal/config"
	"tidings/internal/keycache"
	"tidings/internal/provider/ses/sestest"
	"tidings/internal/ratelimit"
	"tidings/internal/sendgridevents"
	"tidings/internal/sendgridevents/sgtest"
	"tidings/internal/sesevents"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
	"tidings/worker"
)

// The provider webhook benchmarks (BenchmarkSendgridWebhook,
// BenchmarkSESWebhook) share this driver: one audience of sends, the same
// outcomes of each send (delivered, three opens, a click), shuffled as
// providers mix them, encoded the way each provider posts them, posted to
// its webhook (the accept rate: verify, store, enqueue) and then applied by
// the worker's task run on each stored row in order (the apply rate). An
// arm is one provider's api, worker handler and database; several arms run
// interleaved in chunks of about benchChunkEvents events, so the machine's
// load (shared with other work) falls on each alike and a ratio between
// arms of one run means something where the absolute rates do not.

const benchChunkEvents = 1000

// benchAudience sizes a run: tenants × contactsPer contacts, sendsPer
// sends each.
type benchAudience struct{ tenants, contactsPer, sendsPer int }

func (a benchAudience) sends() int { return a.tenants * a.contactsPer * a.sendsPer }

// benchOutcome is one provider-neutral outcome of a send; its kind indexes
// benchKinds.
type benchOutcome struct {
	tenant, send string
	kind         int
	id           string
}

// benchKinds are each send's outcomes: SendGrid's event name, SES's
// eventType.
var benchKinds = [][2]string{{"delivered", "Delivery"}, {"open", "Open"}, {"open", "Open"}, {"open", "Open"}, {"click", "Click"}}

// benchPost is one POST: its body, headers and how many events it holds.
type benchPost struct {
	body    string
	headers map[string]string
	events  int
}

// webhookArm is one provider's side of a run.
type webhookArm struct {
	name     string
	provider string // delivery.ProviderSendGrid or ProviderSES: the records' and the webhook's
	path     string
	db       *store.DB
	app      *fiber.App
	apply    asynq.Handler
	// encode turns outcomes into posts, as the provider sends them.
	encode func(b *testing.B, outs []benchOutcome, now time.Time) []benchPost
	// outbound gives every tenant an outbound webhook endpoint taking every
	// event type (schema 0016's triggers write a message per outcome).
	outbound bool

	events                 int
	acceptTime, applyTime  time.Duration
	posts                  [][]benchPost // chunks of posts, this iteration
	batches                [][]int64     // chunks of stored row ids, this iteration
	postChunk, applyChunkN int           // posts per chunk, rows per chunk
}

// newSendgridArm is SendGrid's side: signed batches of 1,000 events.
func newSendgridArm(b *testing.B, outbound bool) *webhookArm {
	priv, pub, err := sgtest.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	key, err := sendgridevents.NewVerifier(pub)
	if err != nil {
		b.Fatal(err)
	}
	arm := &webhookArm{name: "sendgrid", provider: "sendgrid", path: "/webhooks/sendgrid", outbound: outbound,
		postChunk: 1, applyChunkN: 1}
	arm.encode = func(b *testing.B, outs []benchOutcome, now time.Time) []benchPost {
		var posts []benchPost
		for start := 0; start < len(outs); start += benchChunkEvents {
			chunk := outs[start:min(start+benchChunkEvents, len(outs))]
			evs := make([]map[string]any, len(chunk))
			for i, o := range chunk {
				evs[i] = map[string]any{"event": benchKinds[o.kind][0], "timestamp": now.Unix(), "sg_event_id": o.id,
					"email": "c@example.com", "url": "https://acme.test/", "tenant_id": o.tenant, "send_id": o.send}
			}
			body, _ := json.Marshal(evs)
			h, err := sgtest.Headers(priv, body, now)
			if err != nil {
				b.Fatal(err)
			}
			posts = append(posts, benchPost{string(body), h, len(chunk)})
		}
		return posts
	}
	arm.start(b, Deps{WebhookKey: key})
	return arm
}

// newSESArm is SES's side: one signed SNS notification per event, as SNS
// posts them (signature version 2); a chunk is 1,000 posts.
func newSESArm(b *testing.B) *webhookArm {
	sns := sestest.NewSNS(b)
	arm := &webhookArm{name: "ses", provider: "ses", path: "/webhooks/ses", postChunk: benchChunkEvents, applyChunkN: benchChunkEvents}
	arm.encode = func(b *testing.B, outs []benchOutcome, now time.Time) []benchPost {
		posts := make([]benchPost, len(outs))
		h := map[string]string{"Content-Type": "text/plain; charset=UTF-8"}
		for i, o := range outs {
			msg := sestest.Event(benchKinds[o.kind][1], o.send, o.tenant, "c@example.com", "", now)
			posts[i] = benchPost{string(sestest.Body(sns.Notification(msg, "2"))), h, 1}
		}
		return posts
	}
	arm.start(b, Deps{SNS: sesevents.NewVerifier([]string{sns.Host()}, nil, sns.Client())})
	return arm
}

// start builds the arm's database, queue, api and worker handler.
func (a *webhookArm) start(b *testing.B, d Deps) {
	cfg, err := config.FromLookup(func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	a.db = testenv.DB(b)
	rdb, prefix := testenv.Redis(b)
	qURL, _ := testenv.RedisDB(b)
	qOpt, err := config.AsynqRedis(qURL)
	if err != nil {
		b.Fatal(err)
	}
	queue := asynq.NewClient(qOpt)
	b.Cleanup(func() { _ = queue.Close() })
	quiet := slog.New(slog.DiscardHandler)
	d.Limiter, d.Sessions = ratelimit.NewPer(rdb, 100, time.Minute, prefix), auth.NewSessionVerifier("x", "", "")
	app, svc := newAppServices(b, app.Infra{Config: cfg, DB: a.db, Redis: rdb, RedisPrefix: prefix, Log: quiet,
		Keys: keycache.New(apikeys.Loader(a.db), rdb, prefix+"evict", 0, quiet), Tasks: tasks.NewClient(queue, nil, quiet)}, d)
	a.app, a.apply = app, worker.HandleWebhookBatch(svc)
}

// seed writes the audience: every send's record names the arm's provider.
func (a *webhookArm) seed(b *testing.B, aud benchAudience) {
	ctx := context.Background()
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO tenants (id, name) SELECT 'ten_' || t, 'T' FROM generate_series(1, %d) t`, aud.tenants),
		fmt.Sprintf(`INSERT INTO contacts (tenant_id, id, email) SELECT 'ten_' || t, 'cnt_' || c, 'c' || c || '@example.com'
			FROM generate_series(1, %d) t, generate_series(1, %d) c`, aud.tenants, aud.contactsPer),
		fmt.Sprintf(`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version, from_address, to_address, subject, sent_at, provider)
			SELECT 'ten_' || t, 'snd_' || c || '_' || s, 'm', 'cnt_' || c, 'welcome', 1, 'a@acme.test', 'c@example.com', 'Hi', now(), '%s'
			FROM generate_series(1, %d) t, generate_series(1, %d) c, generate_series(1, %d) s`, a.provider, aud.tenants, aud.contactsPer, aud.sendsPer),
		map[bool]string{false: `SELECT 1`, true: fmt.Sprintf(`INSERT INTO webhook_endpoints (tenant_id, id, url, secret)
			SELECT 'ten_' || t, 'whk_' || t, 'https://8.8.8.8/hook', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' FROM generate_series(1, %d) t`, aud.tenants)}[a.outbound],
		`ANALYZE`,
	} {
		if _, err := a.db.Pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}

// prepare encodes this iteration's outcomes into the arm's chunks of posts.
func (a *webhookArm) prepare(b *testing.B, outs []benchOutcome, now time.Time) {
	posts := a.encode(b, outs, now)
	a.posts = a.posts[:0]
	for start := 0; start < len(posts); start += a.postChunk {
		a.posts = append(a.posts, posts[start:min(start+a.postChunk, len(posts))])
	}
	a.events += len(outs)
}

func (a *webhookArm) acceptChunk(b *testing.B, k int) {
	start := time.Now()
	for _, p := range a.posts[k] {
		req := httptest.NewRequest("POST", a.path, strings.NewReader(p.body))
		for h, v := range p.headers {
			req.Header.Set(h, v)
		}
		res, err := a.app.Test(req, -1)
		if err != nil || res.StatusCode != 204 {
			body, _ := io.ReadAll(res.Body)
			b.Fatalf("%s accept: %v %d %s", a.name, err, res.StatusCode, body)
		}
		res.Body.Close()
	}
	a.acceptTime += time.Since(start)
}

// stored chunks the rows waiting to be applied, in id order: their tasks
// run in that order (the queue's), each SES chunk's first run applying the
// chunk's waiting rows together and the others finding theirs applied.
func (a *webhookArm) stored(b *testing.B) {
	rows, err := a.db.Pool.Query(context.Background(), `SELECT id FROM webhook_batches WHERE applied_at IS NULL ORDER BY id`)
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
	a.batches = a.batches[:0]
	for start := 0; start < len(ids); start += a.applyChunkN {
		a.batches = append(a.batches, ids[start:min(start+a.applyChunkN, len(ids))])
	}
}

func (a *webhookArm) applyChunk(b *testing.B, k int) {
	ctx := context.Background()
	start := time.Now()
	for _, id := range a.batches[k] {
		p, _ := json.Marshal(map[string]int64{"batchId": id})
		if err := a.apply.ProcessTask(ctx, asynq.NewTask(tasks.TypeWebhookBatch, p)); err != nil {
			b.Fatal(err)
		}
	}
	a.applyTime += time.Since(start)
}

// check fails the run unless every event was applied.
func (a *webhookArm) check(b *testing.B) {
	var applied int64
	if err := a.db.Pool.QueryRow(context.Background(), `SELECT sum(applied) FROM webhook_batches`).Scan(&applied); err != nil || applied != int64(a.events) {
		b.Fatalf("%s: applied %d of %d events (%v)", a.name, applied, a.events, err)
	}
}

func (a *webhookArm) acceptRate() float64 { return float64(a.events) / a.acceptTime.Seconds() }
func (a *webhookArm) applyRate() float64  { return float64(a.events) / a.applyTime.Seconds() }

// runWebhookArms runs b.N iterations of the audience's outcomes through
// every arm, interleaved chunk by chunk (the arms' order alternating from
// chunk to chunk); the timer runs only while posting and applying.
func runWebhookArms(b *testing.B, aud benchAudience, arms ...*webhookArm) {
	b.StopTimer()
	for _, a := range arms {
		a.seed(b, aud)
	}
	turn := func(k int, f func(a *webhookArm)) {
		for i := range arms {
			if k%2 == 1 {
				i = len(arms) - 1 - i
			}
			f(arms[i])
		}
	}
	for i := range b.N {
		now := time.Now()
		outs := make([]benchOutcome, 0, aud.sends()*len(benchKinds))
		for t := 1; t <= aud.tenants; t++ {
			for c := 1; c <= aud.contactsPer; c++ {
				for s := 1; s <= aud.sendsPer; s++ {
					for k := range benchKinds {
						outs = append(outs, benchOutcome{tenant: fmt.Sprintf("ten_%d", t), send: fmt.Sprintf("snd_%d_%d", c, s),
							kind: k, id: fmt.Sprintf("i%d-%d-%d-%d-%d", i, t, c, s, k)})
					}
				}
			}
		}
		rand.Shuffle(len(outs), func(x, y int) { outs[x], outs[y] = outs[y], outs[x] })
		chunks := 0
		for _, a := range arms {
			a.prepare(b, outs, now)
			chunks = max(chunks, len(a.posts))
		}
		b.StartTimer()
		for k := range chunks {
			turn(k, func(a *webhookArm) {
				if k < len(a.posts) {
					a.acceptChunk(b, k)
				}
			})
		}
		b.StopTimer()
		chunks = 0
		for _, a := range arms {
			a.stored(b)
			chunks = max(chunks, len(a.batches))
		}
		b.StartTimer()
		for k := range chunks {
			turn(k, func(a *webhookArm) {
				if k < len(a.batches) {
					a.applyChunk(b, k)
				}
			})
		}
		b.StopTimer()
	}
	for _, a := range arms {
		a.check(b)
	}
}

// BenchmarkSendgridWebhook posts 50,000 SendGrid events in signed batches
// of 1,000 (10,000 sends of 2,000 contacts in 5 tenants, five outcomes
// each) and reports apart the accept rate (the HTTP handler: verify, store
// the body, enqueue the task) and the apply rate (the worker's task run on
// each stored batch: parse, dedup, apply). Target: apply ≥ 5,000 events/s
// (issue 12).
//
// With outbound=on every tenant has an outbound webhook endpoint that takes
// every event type, so each applied outcome also writes its message and
// delivery (schema 0016's triggers): the cost of the outbox, against
// outbound=off.
//
//	go test ./api/ -run '^$' -bench SendgridWebhook -benchtime 1x
func BenchmarkSendgridWebhook(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("outbound=%v", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			arm := newSendgridArm(b, on)
			runWebhookArms(b, benchAudience{tenants: 5, contactsPer: 400, sendsPer: 5}, arm)
			b.ReportMetric(arm.acceptRate(), "accept_events/s")
			b.ReportMetric(arm.applyRate(), "apply_events/s")
			if on {
				var msgs int64
				if err := arm.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_outbox`).Scan(&msgs); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(msgs)/arm.applyTime.Seconds(), "outbox_messages/s")
			}
		})
	}
}
