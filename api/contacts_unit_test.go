package api

import (
	"testing"
	"time"

	"tidings/queries"
)

func TestInactiveDays(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	last := now.Add(-49 * time.Hour)
	tests := []struct {
		c    queries.Contact
		want int64
	}{
		{queries.Contact{CreatedAt: now.Add(-10 * 24 * time.Hour)}, 10},
		{queries.Contact{CreatedAt: now.Add(-10 * 24 * time.Hour), LastEventAt: &last}, 2},
		{queries.Contact{CreatedAt: now.Add(-time.Hour)}, 0},
		{queries.Contact{CreatedAt: now.Add(time.Hour)}, 0},
	}
	for _, tt := range tests {
		if got := inactiveDays(tt.c, now); got != tt.want {
			t.Errorf("%+v: %d, want %d", tt.c, got, tt.want)
		}
	}
}
