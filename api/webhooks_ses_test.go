package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/provider/ses/sestest"
	"tidings/internal/sesevents"
	"tidings/internal/tasks"
	"tidings/worker"
)

// setupSES is setupOutcomeAPI with the SNS verifier of a local signer.
func setupSES(t *testing.T) (*outcomeBundle, *sestest.SNS) {
	t.Helper()
	b := setupOutcomeAPI(t, false)
	sns := sestest.NewSNS(t)
	qc := asynq.NewClient(b.queueOpt)
	t.Cleanup(func() { _ = qc.Close() })
	b.app = newApp(t, app.Infra{Config: b.cfg, DB: b.db, Redis: b.rdb, RedisPrefix: b.prefix,
		Tasks: tasks.NewClient(qc, nil, testLog())},
		Deps{SNS: sesevents.NewVerifier([]string{sns.Host()}, nil, sns.Client())})
	return b, sns
}

// ADDENDUM 22: SES outcomes through SNS. Unsigned or badly signed: 403
// and nothing stored; a signed hard bounce (version 1) and a delivery
// (version 2) are applied; a repeat of one notification counts once.
func TestSESWebhook(t *testing.T) {
	t.Parallel()
	b, sns := setupSES(t)
	now := time.Now()
	bounce := sns.Notification(sestest.Event("Bounce", "snd_1", "ten_b", "ann@example.com", "Permanent", now), "1")
	delivered := sns.Notification(sestest.Event("Delivery", "snd_1", "ten_a", "ann@example.com", "", now), "2")
	soft := sns.Notification(sestest.Event("Bounce", "snd_1", "ten_a", "ann@example.com", "Transient", now), "2")

	unsigned := *bounce
	unsigned.Signature = ""
	tampered := *bounce
	tampered.Message = string(sestest.Event("Bounce", "snd_1", "ten_a", "ann@example.com", "Permanent", now))
	for _, e := range []*sesevents.Envelope{&unsigned, &tampered} {
		b.expectErrorRaw("POST", "/webhooks/ses", string(sestest.Body(e)), map[string]string{"Content-Type": "text/plain"}, 403, "FORBIDDEN")
	}
	b.expectErrorRaw("POST", "/webhooks/ses", "not json", nil, 403, "FORBIDDEN")
	if got := b.scalar(`SELECT count(*) FROM webhook_batches`); got != "0" {
		t.Fatalf("refused posts stored %s rows", got)
	}

	for _, e := range []*sesevents.Envelope{bounce, delivered, soft, bounce} {
		if r := b.raw("POST", "/webhooks/ses", string(sestest.Body(e)), map[string]string{"Content-Type": "text/plain"}); r.status != http.StatusNoContent {
			t.Fatalf("signed notification: %d %s", r.status, r.raw)
		}
	}
	if got := b.scalar(`SELECT count(*) FROM webhook_batches WHERE provider = 'ses' AND applied_at IS NULL`); got != "4" {
		t.Fatalf("stored %s", got)
	}
	// The first task's run applies every waiting notification; the others
	// find theirs applied.
	h := worker.HandleWebhookBatch(b.svc)
	rows, err := b.db.Pool.Query(context.Background(), `SELECT id FROM webhook_batches ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var n int64
		_ = rows.Scan(&n)
		ids = append(ids, n)
	}
	rows.Close()
	for _, n := range ids {
		p, _ := json.Marshal(map[string]int64{"batchId": n})
		if err := h.ProcessTask(context.Background(), asynq.NewTask(tasks.TypeWebhookBatch, p)); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.scalar(`SELECT sum(applied)::text || ' ' || sum(duplicates)::text || ' ' || count(*) FILTER (WHERE applied_at IS NULL)::text FROM webhook_batches`); got != "3 1 0" {
		t.Fatalf("applied, duplicates, unapplied: %s", got)
	}
	if got := b.scalar(`SELECT string_agg(tenant_id || ':' || delivery_status || ':' || coalesce(bounce_type, ''), ',' ORDER BY tenant_id) FROM sends`); got != "ten_a:bounced:soft,ten_b:bounced:hard" {
		t.Fatalf("sends %s", got)
	}
	if got := b.scalar(`SELECT string_agg(tenant_id || ':' || suppressed::text, ',' ORDER BY tenant_id) FROM contacts`); got != "ten_a:false,ten_b:true" {
		t.Fatalf("suppressed: %s", got)
	}
}

// A signed subscription confirmation is confirmed at its SubscribeURL.
func TestSESWebhookSubscription(t *testing.T) {
	t.Parallel()
	b, sns := setupSES(t)
	if r := b.raw("POST", "/webhooks/ses", string(sestest.Body(sns.Confirmation("2"))), nil); r.status != http.StatusNoContent || sns.Confirmed() != 1 {
		t.Fatalf("confirmation: %d %s, confirmed %d", r.status, r.raw, sns.Confirmed())
	}
	bad := sns.Confirmation("2")
	bad.SubscribeURL = "https://attacker.example/confirm"
	sns.Sign(bad, "2")
	b.expectErrorRaw("POST", "/webhooks/ses", string(sestest.Body(bad)), nil, 403, "FORBIDDEN")
	if sns.Confirmed() != 1 {
		t.Fatal("a SubscribeURL elsewhere was fetched")
	}
}

// Without an SES configuration every POST is refused.
func TestSESWebhookNotConfigured(t *testing.T) {
	t.Parallel()
	b := setupOutcomeAPI(t, false)
	sns := sestest.NewSNS(t)
	b.expectErrorRaw("POST", "/webhooks/ses", string(sestest.Body(sns.Confirmation("2"))), nil, 403, "FORBIDDEN")
}

// GET /api/tenant lists the pool's circuits, one per provider and stream
// (ADDENDUM 22); the test's pool is its one fake SendGrid.
func TestTenantProviders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.session("org_providers")
	b.tenant("org_providers")
	r := b.expect("GET", "/api/tenant", s, nil, 200)
	got, _ := json.Marshal(r.body["providers"])
	if string(got) != `[{"name":"sendgrid","state":"ok","stream":"transactional"},{"name":"sendgrid","state":"ok","stream":"marketing"}]` {
		t.Fatalf("providers %s", got)
	}
}
