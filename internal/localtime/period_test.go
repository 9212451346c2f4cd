package localtime

import (
	"testing"
	"time"
)

func TestPeriod(t *testing.T) {
	t.Parallel()
	ams := Load("Europe/Amsterdam")
	ny := Load("America/New_York")
	for _, tc := range []struct {
		name       string
		t          time.Time
		loc        *time.Location
		week       bool
		start, end string
	}{
		{"a day in UTC", time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC), time.UTC, false, "2026-11-25T00:00:00Z", "2026-11-26T00:00:00Z"},
		{"late evening UTC is the next day in Amsterdam", time.Date(2026, 11, 25, 23, 30, 0, 0, time.UTC), ams, false, "2026-11-26T00:00:00+01:00", "2026-11-27T00:00:00+01:00"},
		{"the week from Monday (a Wednesday)", time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC), time.UTC, true, "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"},
		{"a Sunday belongs to the week before", time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), time.UTC, true, "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"},
		{"a Monday starts its week", time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), time.UTC, true, "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"},
		{"the spring-forward day is 23 hours", time.Date(2026, 3, 8, 15, 0, 0, 0, time.UTC), ny, false, "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00"},
		{"a week across the clock change", time.Date(2026, 10, 28, 12, 0, 0, 0, time.UTC), ams, true, "2026-10-26T00:00:00+01:00", "2026-11-02T00:00:00+01:00"},
	} {
		s, e := Period(tc.t, tc.loc, tc.week)
		if got := s.Format(time.RFC3339); got != tc.start {
			t.Errorf("%s: start %s, want %s", tc.name, got, tc.start)
		}
		if got := e.Format(time.RFC3339); got != tc.end {
			t.Errorf("%s: end %s, want %s", tc.name, got, tc.end)
		}
	}
}
