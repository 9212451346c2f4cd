package localtime

import "time"

// Period is the calendar day or week (from Monday) that holds t in loc, as
// [start, end): the frequency cap's counting period (ADDENDUM 17). Across
// a change of clocks a day is 23 or 25 hours long; midnight is always the
// boundary.
func Period(t time.Time, loc *time.Location, week bool) (start, end time.Time) {
	l := t.In(loc)
	day := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
	if !week {
		return day, time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, loc)
	}
	back := (int(day.Weekday()) + 6) % 7 // days since Monday
	start = time.Date(l.Year(), l.Month(), l.Day()-back, 0, 0, 0, 0, loc)
	return start, time.Date(start.Year(), start.Month(), start.Day()+7, 0, 0, 0, 0, loc)
}
