package localtime

import (
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"UTC": true, "Europe/Amsterdam": true, "America/New_York": true, "Asia/Kathmandu": true,
		"": false, "Local": false, "Mars/Olympus": false, "../etc/passwd": false, "/etc/localtime": false,
		"europe/amsterdam": false,
	} {
		if got := Valid(name); got != want {
			t.Errorf("Valid(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestZone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		contact any
		tenant  string
		want    string
	}{
		{"Asia/Tokyo", "Europe/Paris", "Asia/Tokyo"},
		{"nowhere", "Europe/Paris", "Europe/Paris"},
		{42, "Europe/Paris", "Europe/Paris"},
		{nil, "", "UTC"},
		{nil, "bogus", "UTC"},
	} {
		if got := Zone(tc.contact, tc.tenant).String(); got != tc.want {
			t.Errorf("Zone(%v, %q) = %s, want %s", tc.contact, tc.tenant, got, tc.want)
		}
	}
}

func TestParseWall(t *testing.T) {
	t.Parallel()
	for s, ok := range map[string]bool{
		"2026-12-01T09:00:00": true, "2026-12-01T09:00": true,
		"2026-12-01T09:00:00Z": false, "2026-12-01T09:00:00+01:00": false, "2026-12-01": false, "9am": false,
	} {
		if _, got := ParseWall(s); got != ok {
			t.Errorf("ParseWall(%q) ok = %v, want %v", s, got, ok)
		}
	}
}

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc := Load(name)
	if loc == nil {
		t.Fatalf("no zone %s", name)
	}
	return loc
}

// A wall-clock time is one instant in every zone, on both daylight-saving
// changes: the clocks skip 02:00-03:00 on 29 March 2026 in Amsterdam and
// pass 02:00-03:00 twice on 25 October 2026.
func TestAtAcrossDST(t *testing.T) {
	t.Parallel()
	ams := mustLoad(t, "Europe/Amsterdam")
	for _, tc := range []struct {
		wall string
		want string // UTC
	}{
		{"2026-03-28T09:00:00", "2026-03-28T08:00:00Z"}, // CET, +1
		{"2026-03-29T09:00:00", "2026-03-29T07:00:00Z"}, // CEST, +2
		{"2026-03-29T02:30:00", "2026-03-29T01:30:00Z"}, // in the gap: read at +1, 03:30 CEST
		{"2026-10-25T02:30:00", "2026-10-25T01:30:00Z"}, // twice: Go reads the second, CET
		{"2026-10-25T09:00:00", "2026-10-25T08:00:00Z"}, // CET again
	} {
		w, _ := ParseWall(tc.wall)
		if got := At(w, ams).UTC().Format(time.RFC3339); got != tc.want {
			t.Errorf("At(%s) = %s, want %s", tc.wall, got, tc.want)
		}
	}
}

func TestParseWindow(t *testing.T) {
	t.Parallel()
	if _, err := ParseWindow([]string{"mon", "FRI"}, "09:00", "17:30"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseWindow(nil, "00:00", "24:00"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][3]string{
		{"funday", "09:00", "17:00"}, {"", "9:00", "17:00"}, {"", "09:00", "25:00"},
		{"", "17:00", "09:00"}, {"", "09:00", "09:00"}, {"", "09:00am", "17:00"},
	} {
		var days []string
		if bad[0] != "" {
			days = []string{bad[0]}
		}
		if _, err := ParseWindow(days, bad[1], bad[2]); err == nil {
			t.Errorf("ParseWindow(%v) accepted", bad)
		}
	}
}

func TestWindowNext(t *testing.T) {
	t.Parallel()
	ams := mustLoad(t, "Europe/Amsterdam")
	weekdays, _ := ParseWindow([]string{"mon", "tue", "wed", "thu", "fri"}, "09:00", "17:00")
	night, _ := ParseWindow(nil, "02:30", "04:00")
	utc := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	for _, tc := range []struct {
		name string
		w    Window
		at   string
		want string
	}{
		{"inside", weekdays, "2026-11-25T10:00:00Z", "2026-11-25T10:00:00Z"},          // Wed 11:00 CET
		{"before opening", weekdays, "2026-11-25T06:00:00Z", "2026-11-25T08:00:00Z"},  // Wed 07:00 → 09:00
		{"after closing", weekdays, "2026-11-25T16:30:00Z", "2026-11-26T08:00:00Z"},   // Wed 17:30 → Thu 09:00
		{"closing is open", weekdays, "2026-11-25T15:59:59Z", "2026-11-25T15:59:59Z"}, // 16:59:59
		{"at closing", weekdays, "2026-11-25T16:00:00Z", "2026-11-26T08:00:00Z"},      // 17:00 is shut
		{"weekend", weekdays, "2026-11-28T12:00:00Z", "2026-11-30T08:00:00Z"},         // Sat → Mon 09:00
		{"friday night", weekdays, "2026-11-27T20:00:00Z", "2026-11-30T08:00:00Z"},
		// Across the spring change: Friday 27 March (CET) to Monday 30 March (CEST).
		{"into summer time", weekdays, "2026-03-27T17:00:00Z", "2026-03-30T07:00:00Z"},
		// Across the autumn change: Friday 23 October (CEST) to Monday 26 October (CET).
		{"into winter time", weekdays, "2026-10-23T16:00:00Z", "2026-10-26T08:00:00Z"},
		// An opening the clocks skip: 02:30 on 29 March lands after the gap.
		{"opening in the gap", night, "2026-03-28T23:00:00Z", "2026-03-29T01:30:00Z"},
		// An opening the clocks pass twice opens once (Go reads the second).
		{"opening twice", night, "2026-10-24T23:00:00Z", "2026-10-25T01:30:00Z"},
	} {
		if got := tc.w.Next(utc(tc.at), ams).UTC().Format(time.RFC3339); got != tc.want {
			t.Errorf("%s: Next(%s) = %s, want %s", tc.name, tc.at, got, tc.want)
		}
	}
}
