package api

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	client "tidings/clients/go"
)

// serve runs the bundle's app on a loopback port for clients that speak
// HTTP (the generated Go and TypeScript clients) and returns its origin.
func (b *bundle) serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.Shutdown() })
	return "http://" + ln.Addr().String()
}

// The Go client generated from the document (oapi-codegen, clients/go)
// drives the API over HTTP as an integrator would: a contact, a template,
// the sandbox whitelist, a send with an Idempotency-Key and its replay,
// the send record with its rate-limit headers, and an error decoded as
// the envelope.
func TestGeneratedClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	key := b.apiKey(b.tenant("org_client"))
	auth := func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+key)
		return nil
	}
	c, err := client.NewClientWithResponses(b.serve(t),
		client.WithRequestEditorFn(auth), client.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	var first client.PropertyValue
	if err := first.FromPropertyValue0("Ann"); err != nil {
		t.Fatal(err)
	}
	props := map[string]*client.PropertyValue{"firstName": &first}
	created, err := c.CreateContactWithResponse(ctx, nil, client.ContactCreateRequest{Email: "ann@example.com", Properties: &props})
	if err != nil || created.JSON201 == nil || created.JSON201.Email != "ann@example.com" {
		t.Fatalf("create contact: %v %s", err, created.Body)
	}
	tpl, err := c.PutTemplateWithResponse(ctx, "welcome", nil, client.TemplatePutRequest{Name: ptr("Welcome"),
		Subject: ptr("Hi {{ contact.properties.firstName }}"),
		Content: ptr(`<mjml><mj-body><mj-section><mj-column><mj-text>Hello {{ name }}!</mj-text></mj-column></mj-section></mj-body></mjml>`)})
	if err != nil || tpl.JSON201 == nil || tpl.JSON201.CurrentVersion != 1 {
		t.Fatalf("put template: %v %d %s", err, tpl.StatusCode(), tpl.Body)
	}
	wl, err := c.AddSandboxWhitelistWithResponse(ctx, nil, client.WhitelistRequest{Email: "ann@example.com"})
	if err != nil || wl.JSON200 == nil {
		t.Fatalf("whitelist: %v %s", err, wl.Body)
	}

	idem := "order-1042"
	vars := map[string]any{"name": "Ada"}
	body := client.SendRequest{To: "ann@example.com", Template: "welcome", Variables: &vars}
	sent, err := c.SendWithResponse(ctx, &client.SendParams{IdempotencyKey: &idem}, body)
	if err != nil {
		t.Fatal(err)
	}
	if sent.JSON200 == nil || sent.JSON200.Status != "sent" || sent.JSON200.SendId == "" {
		t.Fatalf("send: %d %s", sent.StatusCode(), sent.Body)
	}
	again, err := c.SendWithResponse(ctx, &client.SendParams{IdempotencyKey: &idem}, body)
	if err != nil || again.JSON200 == nil || again.JSON200.SendId != sent.JSON200.SendId {
		t.Fatalf("replay: %v %s", err, again.Body)
	}
	if n := len(b.sg.Messages()); n != 1 {
		t.Fatalf("the provider got %d messages, want 1", n)
	}

	rec, err := c.GetSendWithResponse(ctx, sent.JSON200.SendId)
	if err != nil || rec.JSON200 == nil || rec.JSON200.ToAddress != "ann@example.com" || rec.JSON200.TemplateId != "welcome" {
		t.Fatalf("send record: %v %s", err, rec.Body)
	}
	if rec.Headers200 == nil || rec.Headers200.XRateLimitLimit != b.cfg.RateLimitPerMinute {
		t.Fatalf("the rate-limit headers are not read: %+v", rec.Headers200)
	}

	bad, err := c.SendWithResponse(ctx, nil, client.SendRequest{To: "ann@example.com", Template: "nope"})
	if err != nil || bad.JSON404 == nil || bad.JSON404.Error.Code != "TEMPLATE_NOT_FOUND" {
		t.Fatalf("unknown template: %v %d %s", err, bad.StatusCode(), bad.Body)
	}
}

func ptr[T any](v T) *T { return &v }
