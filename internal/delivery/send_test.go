package delivery

import (
	"context"
	"strings"
	"testing"

	"tidings/internal/apperr"
)

// A transactional send's from is at most 320 bytes, judged before anything
// is looked up (the Sender here has no database).
func TestRequestFromLength(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		from string
		ok   bool
	}{
		{desc: "none (the tenant's default)", from: "", ok: true},
		{desc: "320 bytes", from: strings.Repeat("a", 308) + "@example.com", ok: true},
		{desc: "321 bytes", from: strings.Repeat("a", 309) + "@example.com"},
		{desc: "321 bytes with a name", from: "N <" + strings.Repeat("a", 305) + "@example.com>"},
	}
	for _, tt := range tests {
		err := Request{From: tt.from}.check()
		if tt.ok {
			if err != nil {
				t.Errorf("%s: %v", tt.desc, err)
			}
			continue
		}
		e, ok := apperr.As(err)
		if !ok || e.Code != "VALIDATION_ERROR" || e.Details["fields"].(map[string]any)["from"] == nil {
			t.Errorf("%s: got %v, want VALIDATION_ERROR on from", tt.desc, err)
		}
		if _, err := (&Sender{}).Send(context.Background(), "ten_a", Request{From: tt.from}); !apperr.IsCode(err, "VALIDATION_ERROR") {
			t.Errorf("%s: Send: got %v, want VALIDATION_ERROR before any lookup", tt.desc, err)
		}
	}
}
