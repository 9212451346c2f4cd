package delivery

import (
	"context"
	"strings"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/config"
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

// The writes after the provider's answers fit in the allowance that
// SEND_CLAIM_TIMEOUT's floor gives them (config.SettleAllowance), with
// room for clock skew: a longer settle would let a claim be taken over
// while its attempt still writes.
func TestSettleFitsTheClaimFloor(t *testing.T) {
	t.Parallel()
	if settleTimeout+5*time.Second > config.SettleAllowance {
		t.Fatalf("settleTimeout %v leaves less than 5 s of config.SettleAllowance %v", settleTimeout, config.SettleAllowance)
	}
}
