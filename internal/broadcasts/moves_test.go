package broadcasts

import "testing"

// The status table of ADDENDUM 13, every status against every move.
func TestNext(t *testing.T) {
	t.Parallel()
	type key struct {
		status string
		move   Move
	}
	want := map[key]string{
		{Draft, MoveSend}: Sending, {Scheduled, MoveSend}: Sending,
		{Scheduled, MovePause}: Paused, {Sending, MovePause}: Paused,
		{Paused, MoveResume}: Scheduled, // resumeTo "" or scheduled
		{Draft, MoveCancel}:  Cancelled, {Scheduled, MoveCancel}: Cancelled, {Sending, MoveCancel}: Cancelled,
		{Paused, MoveCancel}: Cancelled,
	}
	for _, st := range Statuses {
		for _, m := range []Move{MoveSend, MovePause, MoveResume, MoveCancel} {
			got, err := next(st, m, "", false)
			w, ok := want[key{st, m}]
			if ok != (err == nil) || got != w {
				t.Errorf("%s %s: %q %v, want %q", st, m, got, err, w)
			}
		}
	}
	if got, _ := next(Draft, MoveSend, "", true); got != Scheduled {
		t.Errorf("a send that starts later: %s", got)
	}
	if got, _ := next(Paused, MoveResume, Sending, false); got != Sending {
		t.Errorf("resume to sending: %s", got)
	}
}
