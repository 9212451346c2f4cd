package rules

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Day and Week are the calendar-free lengths used by the d and w duration units
// and by inactiveDays: always 24 and 168 hours, never adjusted for daylight
// saving, so that Go and SQL agree whatever the session time zone.
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

// durationUnits is ordered from largest to smallest so FormatDuration picks the
// largest unit that divides a duration exactly.
var durationUnits = []struct {
	suffix byte
	unit   time.Duration
}{
	{'w', Week},
	{'d', Day},
	{'h', time.Hour},
	{'m', time.Minute},
	{'s', time.Second},
}

// ParseDuration parses the duration syntax shared by rule `within` fields and
// sequence delays: a positive whole number followed by one unit, s, m, h, d or
// w (`30s`, `5m`, `2h`, `1d`, `3w`). Signs, fractions, spaces, combined units
// (`1h30m`) and zero are rejected, as is anything longer than time.Duration can
// hold (about 292 years).
func ParseDuration(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("invalid duration %q: want a whole number and a unit (s, m, h, d, w), e.g. 30s or 1d", s)
	}
	digits, suffix := s[:len(s)-1], s[len(s)-1]
	var unit time.Duration
	for _, u := range durationUnits {
		if u.suffix == suffix {
			unit = u.unit
		}
	}
	if unit == 0 {
		return 0, fmt.Errorf("invalid duration %q: unit must be one of s, m, h, d, w", s)
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, fmt.Errorf("invalid duration %q: want a whole number before the unit", s)
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		return 0, fmt.Errorf("invalid duration %q: %w", s, err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("invalid duration %q: must be positive", s)
	}
	if n > math.MaxInt64/int64(unit) {
		return 0, fmt.Errorf("invalid duration %q: too large", s)
	}
	return time.Duration(n) * unit, nil
}

// FormatDuration renders d in the syntax ParseDuration reads, using the
// largest unit that divides d exactly (86400s is written `1d`). Durations that
// are not a positive whole number of seconds have no such form; they are
// rounded down to whole seconds, and anything below one second is written `0s`.
func FormatDuration(d time.Duration) string {
	if d < time.Second {
		return "0s"
	}
	d = d.Truncate(time.Second)
	for _, u := range durationUnits {
		if d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + string(u.suffix)
		}
	}
	return strconv.FormatInt(int64(d/time.Second), 10) + "s" // unreachable: seconds always divide
}
