package broadcasts_test

import (
	"strings"
	"testing"

	"tidings/internal/broadcasts"
	"tidings/internal/templates"
)

// A recipient whose message the template refuses (ADDENDUM 24) fails with
// the reason first in its lastError, and nothing is sent.
func TestRecipientFailsWithTheTemplatesReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": `{"plan":"pro"}`})
	content := `<mjml><mj-body><mj-section><mj-column><mj-text>Hello {{ coupon }}</mj-text></mj-column></mj-section></mj-body></mjml>`
	if _, _, err := f.svc.Templates.Put(f.ctx, tenant, "news", templates.Put{Content: &content, StrictVariables: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	b := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
		t.Fatal(err)
	}
	f.drain(b.ID)
	r := f.recipients(b.ID)["ann@example.com"]
	if r.Status != broadcasts.RecipientFailed || r.LastError == nil || !strings.HasPrefix(*r.LastError, "missing_variables: coupon") {
		t.Fatalf("%+v %v", r, *r.LastError)
	}
	if f.sg.Count() != 0 {
		t.Fatal("a refused message was sent")
	}
}
