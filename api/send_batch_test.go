package api

import (
	"strings"
	"testing"
)

// POST /api/send/batch: each message checked and sent as POST /api/send
// would, in order; a malformed or failing message is an error item and
// stops nothing; the batch itself is refused only when it is not a batch.
func TestSendBatch(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_batch")
	b := f.b
	b.expect("POST", "/api/contacts", f.key, map[string]any{"email": "bob@example.com"}, 201)
	f.exec(`UPDATE tenants SET sandbox_whitelist = '{ann@example.com,bob@example.com}' WHERE id = $1`, f.org)
	r := b.expect("POST", "/api/send/batch", f.key, map[string]any{"messages": []any{
		map[string]any{"to": "ann@example.com", "template": "welcome", "variables": map[string]any{"name": "Ann"}},
		map[string]any{"to": "nobody@example.com", "template": "welcome"},
		map[string]any{"to": "bob@example.com", "template": "welcome", "tempalte": "x"},
		"not an object",
		map[string]any{"to": "bob@example.com", "template": "missing"},
		map[string]any{"to": "bob@example.com", "template": "welcome"},
	}}, 200)
	items := r.items()
	want := []string{"sent", "CONTACT_NOT_FOUND", "VALIDATION_ERROR", "VALIDATION_ERROR", "TEMPLATE_NOT_FOUND", "sent"}
	if len(items) != len(want) {
		t.Fatalf("%s", r.raw)
	}
	for i, w := range want {
		it := items[i].(map[string]any)
		got := it["status"].(string)
		if got == "error" {
			got = it["error"].(map[string]any)["code"].(string)
		}
		if got != w {
			t.Errorf("item %d: %s, want %s (%s)", i, got, w, r.raw)
		}
		if w == "sent" && (!strings.HasPrefix(it["sendId"].(string), "snd_") || it["messageId"] == "") {
			t.Errorf("item %d: %v", i, it)
		}
	}
	if b.sg.Count() != 2 {
		t.Fatalf("provider took %d", b.sg.Count())
	}
	// Each sent message has its record, listed as /api/send's are.
	if l := b.expect("GET", "/api/sends", f.key, nil, 200); len(l.items()) != 2 {
		t.Fatalf("%s", l.raw)
	}
	b.expectError("POST", "/api/send/batch", f.key, map[string]any{"messages": []any{}}, 400, "VALIDATION_ERROR")
	b.expectError("POST", "/api/send/batch", f.key, map[string]any{"messages": make([]any, 101)}, 400, "VALIDATION_ERROR")
	b.expectError("POST", "/api/send/batch", f.key, map[string]any{"mesages": []any{}}, 400, "VALIDATION_ERROR")
	// Another tenant's contact is not found in this batch's tenant.
	other := b.apiKey(b.tenant("org_batch2"))
	o := b.expect("POST", "/api/send/batch", other, map[string]any{"messages": []any{map[string]any{"to": "ann@example.com", "template": "welcome"}}}, 200)
	if it := o.items()[0].(map[string]any); it["status"] != "error" {
		t.Fatalf("%s", o.raw)
	}
}
