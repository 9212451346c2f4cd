package api

import (
	"testing"
)

// GET /api/tenant shows the guard's window and, while paused, why and
// since when; a guard's pause is lifted by a dashboard session only, and
// transactional sends answer 403 meanwhile.
func TestTenantGuardFields(t *testing.T) {
	t.Parallel()
	f := newSendFixture(t, "org_guard")
	b := f.b
	sess := b.session(f.org)
	g := b.expect("GET", "/api/tenant", f.key, nil, 200)
	d, ok := g.body["deliverability"].(map[string]any)
	if !ok || d["outcomes"] != float64(0) || d["complaintRateLimit"] != 0.003 || d["bounceRateLimit"] != 0.05 ||
		g.body["pausedReason"] != nil {
		t.Fatalf("%s", g.raw)
	}
	f.exec(`UPDATE tenants SET sending_status = 'paused', paused_reason = 'bounce_rate', paused_at = now() WHERE id = $1`, f.org)
	g = b.expect("GET", "/api/tenant", f.key, nil, 200)
	if g.body["pausedReason"] != "bounce_rate" || g.body["pausedAt"] == nil || g.body["sendingStatus"] != "paused" {
		t.Fatalf("%s", g.raw)
	}
	b.expectError("POST", "/api/send", f.key, map[string]any{"to": "ann@example.com", "template": "welcome"}, 403, "FORBIDDEN")
	b.expectError("PATCH", "/api/tenant", f.key, map[string]any{"sendingStatus": "sandbox"}, 403, "FORBIDDEN")
	r := b.expect("PATCH", "/api/tenant", sess, map[string]any{"sendingStatus": "sandbox"}, 200)
	if r.body["pausedReason"] != nil || r.body["sendingStatus"] != "sandbox" {
		t.Fatalf("%s", r.raw)
	}
	// A pause by hand is the API's to lift.
	if r := b.expect("PATCH", "/api/tenant", f.key, map[string]any{"sendingStatus": "paused"}, 200); r.body["pausedReason"] != "manual" {
		t.Fatalf("%s", r.raw)
	}
	b.expect("PATCH", "/api/tenant", f.key, map[string]any{"sendingStatus": "sandbox"}, 200)

	// The frequency cap: set, shown, refused when malformed, cleared.
	if r := b.expect("PATCH", "/api/tenant", f.key, map[string]any{"frequencyCap": map[string]any{"max": 3, "period": "week"}}, 200); r.body["frequencyCap"].(map[string]any)["max"] != float64(3) {
		t.Fatalf("%s", r.raw)
	}
	for _, bad := range []any{map[string]any{"max": 0, "period": "day"}, map[string]any{"max": 2, "period": "month"},
		map[string]any{"max": 2}, map[string]any{"max": 2, "period": "day", "per": "contact"}, "3/day"} {
		b.expectError("PATCH", "/api/tenant", f.key, map[string]any{"frequencyCap": bad}, 400, "VALIDATION_ERROR")
	}
	if r := b.expect("PATCH", "/api/tenant", f.key, map[string]any{"frequencyCap": nil}, 200); r.body["frequencyCap"] != nil {
		t.Fatalf("%s", r.raw)
	}
}
