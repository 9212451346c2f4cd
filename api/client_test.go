package api

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"tidings/internal/apiclient"
)

// A client generated from the document (oapi-codegen, internal/apiclient)
// drives the API over HTTP: a send with an Idempotency-Key, its replay, the
// send record, a contact, and an error decoded as the envelope.
func TestGeneratedClient(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_client")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.b.app.Listener(ln) }()
	t.Cleanup(func() { _ = f.b.app.Shutdown() })
	auth := func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+f.key)
		return nil
	}
	c, err := apiclient.NewClientWithResponses("http://"+ln.Addr().String(),
		apiclient.WithRequestEditorFn(auth), apiclient.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	key := "order-1042"
	vars := map[string]any{"name": "Ada"}
	body := apiclient.SendRequest{To: "ann@example.com", Template: "welcome", Variables: &vars}
	sent, err := c.SendWithResponse(ctx, &apiclient.SendParams{IdempotencyKey: &key}, body)
	if err != nil {
		t.Fatal(err)
	}
	if sent.JSON200 == nil || sent.JSON200.Status != "sent" || sent.JSON200.SendId == "" {
		t.Fatalf("send: %d %s", sent.StatusCode(), sent.Body)
	}
	again, err := c.SendWithResponse(ctx, &apiclient.SendParams{IdempotencyKey: &key}, body)
	if err != nil || again.JSON200 == nil || again.JSON200.SendId != sent.JSON200.SendId {
		t.Fatalf("replay: %v %s", err, again.Body)
	}
	if n := len(f.b.sg.Messages()); n != 1 {
		t.Fatalf("the provider got %d messages, want 1", n)
	}

	rec, err := c.GetSendWithResponse(ctx, sent.JSON200.SendId)
	if err != nil || rec.JSON200 == nil || rec.JSON200.ToAddress != "ann@example.com" || rec.JSON200.TemplateId != "welcome" {
		t.Fatalf("send record: %v %s", err, rec.Body)
	}
	if rec.Headers200 == nil || rec.Headers200.XRateLimitLimit != f.b.cfg.RateLimitPerMinute {
		t.Fatalf("the rate-limit headers are not read: %+v", rec.Headers200)
	}

	created, err := c.CreateContactWithResponse(ctx, nil, apiclient.ContactRequest{Email: ptr("bob@example.com")})
	if err != nil || created.JSON201 == nil || created.JSON201.Email != "bob@example.com" {
		t.Fatalf("create contact: %v %s", err, created.Body)
	}

	bad, err := c.SendWithResponse(ctx, nil, apiclient.SendRequest{To: "ann@example.com", Template: "nope"})
	if err != nil || bad.JSONDefault == nil || bad.JSONDefault.Error.Code != "TEMPLATE_NOT_FOUND" || bad.StatusCode() != 404 {
		t.Fatalf("unknown template: %v %d %s", err, bad.StatusCode(), bad.Body)
	}
}

func ptr[T any](v T) *T { return &v }
