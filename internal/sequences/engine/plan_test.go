package engine

import (
	"testing"
	"time"

	"tidings/internal/sequences/definition"
)

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempts int
		want     time.Duration
	}{{1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second}, {9, 2560 * time.Second}, {10, time.Hour}, {64, time.Hour}} {
		if got := Backoff(tc.attempts); got != tc.want {
			t.Errorf("Backoff(%d) = %v, want %v", tc.attempts, got, tc.want)
		}
	}
}

func TestPlan(t *testing.T) {
	def, err := definition.Parse([]byte("trigger: {event: e}\nsteps: [{delay: 1h}, {send: a}, {delay: 1d}, {delay: 2h}, {send: b}, {delay: 1w}]\n"), definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc, after, want string
		delay             time.Duration
		ok                bool
	}{
		{"leading delay", "", "step-2", time.Hour, true},
		{"delays accumulate", "step-2", "step-5", 26 * time.Hour, true},
		{"trailing delay completes", "step-5", "", 0, false},
		{"removed step", "gone", "", 0, false},
	} {
		s, d, ok := plan(def, tc.after, definition.BranchDefault)
		if s.ID != tc.want || d != tc.delay || ok != tc.ok {
			t.Errorf("%s: got %s %v %v", tc.desc, s.ID, d, ok)
		}
	}
}
