package localtime

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Window is a sequence's send window (ADDENDUM 13): the days of the week
// and the hours of the day, in the contact's zone, when its steps may go
// out. From and To are minutes after midnight, From < To; the window is
// [From, To).
type Window struct {
	Days     [7]bool // indexed by time.Weekday; all false means every day
	From, To int
}

var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseWindow reads the YAML form: days (mon..sun, optional), from and to
// ("09:00", 24-hour clock). The error names the part that is wrong.
func ParseWindow(days []string, from, to string) (Window, error) {
	var w Window
	for _, d := range days {
		i := slices.Index(dayNames, strings.ToLower(strings.TrimSpace(d)))
		if i < 0 {
			return w, fmt.Errorf("days: %q is not a day (mon, tue, wed, thu, fri, sat, sun)", d)
		}
		w.Days[i] = true
	}
	var ok bool
	if w.From, ok = clock(from); !ok {
		return w, fmt.Errorf("from: %q is not a time of day (HH:MM, 24-hour clock)", from)
	}
	if w.To, ok = clock(to); !ok {
		// 24:00 closes a window at midnight.
		if to != "24:00" {
			return w, fmt.Errorf("to: %q is not a time of day (HH:MM, 24-hour clock)", to)
		}
		w.To = 24 * 60
	}
	if w.From >= w.To {
		return w, fmt.Errorf("from must be before to")
	}
	return w, nil
}

func clock(s string) (int, bool) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, false
	}
	return t.Hour()*60 + t.Minute(), true
}

func (w Window) day(d time.Weekday) bool {
	return w.Days == [7]bool{} || w.Days[d]
}

// Next is the first instant at or after t inside the window, read in loc:
// t itself when it is inside, else the window's next opening. Each day's
// opening is its From on that day's own clock, so across a daylight-saving
// change the window keeps its local hours; an opening the clocks skip
// (From inside the spring gap) lands just after the gap.
func (w Window) Next(t time.Time, loc *time.Location) time.Time {
	lt := t.In(loc)
	for i := range 8 { // today and a week ahead: some allowed day is in it
		day := time.Date(lt.Year(), lt.Month(), lt.Day()+i, 0, 0, 0, 0, loc)
		if !w.day(day.Weekday()) {
			continue
		}
		open := time.Date(day.Year(), day.Month(), day.Day(), 0, w.From, 0, 0, loc)
		end := time.Date(day.Year(), day.Month(), day.Day(), 0, w.To, 0, 0, loc)
		switch {
		case t.Before(open):
			return open
		case t.Before(end):
			return t
		}
	}
	return t // unreachable with a valid window
}
