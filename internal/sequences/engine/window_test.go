package engine_test

import (
	"context"
	"testing"
	"time"

	"tidings/internal/sequences"
)

// A step that comes due outside its sequence's send window waits, untried,
// for the window's next opening on the contact's clock (its scheduledFor
// moves there); inside the window it is sent as due. The contact's
// timezone property decides, else the tenant's zone, else UTC.
func TestSendWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Wednesday 25 November 2026, 12:00 UTC.
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, window, contactTZ, tenantTZ string
		wantSent                          bool
		wantAt                            time.Time
	}{
		{"outside, UTC", `{from: "09:00", to: "10:00"}`, "", "UTC", false, time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)},
		{"inside, UTC", `{from: "11:00", to: "13:00"}`, "", "UTC", true, time.Time{}},
		{"contact's zone (21:00 in Tokyo)", `{from: "20:00", to: "22:00"}`, "Asia/Tokyo", "UTC", true, time.Time{}},
		{"tenant's zone (07:00 in New York)", `{from: "09:00", to: "17:00"}`, "", "America/New_York", false, time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)},
		{"weekdays only, on a Wednesday", `{days: [sat, sun], from: "09:00", to: "17:00"}`, "", "UTC", false, time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newLedgerFixture(t)
			f.svc.Runner.Now = func() time.Time { return now }
			if tc.contactTZ != "" {
				f.exec(`UPDATE contacts SET properties = jsonb_build_object('timezone', $2::text) WHERE tenant_id = $1`, ledgerTenant, tc.contactTZ)
			}
			f.exec(`UPDATE tenants SET timezone = $2 WHERE id = $1`, ledgerTenant, tc.tenantTZ)
			if _, err := f.svc.Sequences.Put(ctx, ledgerTenant, "s", sequences.Put{
				Content: []byte("name: S\ntrigger: {event: go}\nwindow: " + tc.window + "\nsteps: [{send: welcome}]\n")}); err != nil {
				t.Fatal(err)
			}
			id := f.enrol()
			res, err := f.svc.Runner.Run(ctx, ledgerTenant, id)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantSent {
				if res.Outcome != "sent" || f.sg.Count() != 1 {
					t.Fatalf("%+v, %d messages; want sent", res, f.sg.Count())
				}
				return
			}
			if res.Outcome != "held" || f.sg.Count() != 0 {
				t.Fatalf("%+v, %d messages; want held", res, f.sg.Count())
			}
			var status string
			var at time.Time
			var attempts int32
			if err := f.svc.DB.Pool.QueryRow(ctx, `SELECT status, scheduled_for, attempts FROM scheduled_sends WHERE tenant_id = $1 AND id = $2`,
				ledgerTenant, id).Scan(&status, &at, &attempts); err != nil {
				t.Fatal(err)
			}
			if status != "pending" || !at.Equal(tc.wantAt) || attempts != 0 {
				t.Fatalf("%s at %v after %d attempts; want pending at %v, 0 attempts", status, at, attempts, tc.wantAt)
			}
			if n := f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1`, ledgerTenant); n != int64(0) {
				t.Fatalf("%v send records", n)
			}
		})
	}
}
