package rules

import (
	"fmt"
	"strings"
	"time"
)

// Timestamp comparisons on properties are the one place where SQL must parse
// user data: a property string is an ISO 8601 timestamp only if
// parseTimestamp accepts it, and only then may it be cast to timestamptz (a
// failed cast would abort the whole segment compute). PostgreSQL 15 has no
// error-free cast, and its regular expressions cost 2-4 microseconds a row,
// most of the time budget at a million contacts. So validity is decided with
// cheap operations, in an order that guards every cast:
//
//  1. LIKE '____-__-__%' drops most strings that are no timestamps.
//  2. translate() maps digits to 0 and the result must be one of the 25
//     shapes parseTimestamp allows (a hashed IN list), so that every position
//     holds a digit or the right separator; "-MM-DD" must be one of the 366
//     month-days (another hashed IN list); the year must not be 0000.
//  3. 02-29 needs a leap year, and the time fields their ranges, compared as
//     characters.
//
// Bare dates, the common case for properties, then compare as text with a
// date bound (no cast at all); timestamps with a time are cast. Each step
// costs a fraction of a microsecond; string functions are avoided where a
// LIKE does (left() and right() count characters from the start). The tests
// hold all this against parseTimestamp string by string.

// timestampShapes lists every shape parseTimestamp accepts, digits as 0.
var timestampShapes = func() []string {
	shapes := []string{"0000-00-00"}
	for _, t := range []string{"T00:00", "T00:00:00", "T00:00:00.0", "T00:00:00.00", "T00:00:00.000",
		"T00:00:00.0000", "T00:00:00.00000", "T00:00:00.000000"} {
		for _, off := range []string{"Z", "+00:00", "-00:00"} {
			shapes = append(shapes, "0000-00-00"+t+off)
		}
	}
	return shapes
}()

// sqlList renders strings as a parenthesised list of SQL literals. Only for
// the package's constants: user data is always bound.
func sqlList(items []string) string {
	return "('" + strings.Join(items, "', '") + "')"
}

var (
	sqlShapes = sqlList(timestampShapes)
	sqlDays   = func() string {
		var days []string
		for m := time.January; m <= time.December; m++ {
			// 2024 is a leap year, so February has its 29th here; the year
			// is checked separately.
			n := time.Date(2024, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
			for d := 1; d <= n; d++ {
				days = append(days, fmt.Sprintf("-%02d-%02d", int(m), d))
			}
		}
		return sqlList(days)
	}()
)

// timestampSQL returns the SQL that is FALSE unless the text expression s
// holds a timestamp parseTimestamp accepts, and then evaluates dateThen for a
// bare date or timestampThen for a timestamp with a time; only the latter
// may cast s. NULL s gives FALSE.
func timestampSQL(s, dateThen, timestampThen string) string {
	const c = ` COLLATE "C"`
	year := "substr(" + s + ", 1, 4)::int"
	leap := "(" + year + " % 4 = 0 AND (" + year + " % 100 <> 0 OR " + year + " % 400 = 0))"
	// CASE, not AND, orders the steps: the ::int casts and the final cast
	// are safe only once step 2 has held. Within a step AND is fine, as
	// nothing in it can fail.
	return "CASE WHEN " + s + " LIKE '____-__-__%' THEN" +
		" CASE WHEN translate(" + s + ", '123456789', '000000000') IN " + sqlShapes +
		" AND substr(" + s + ", 5, 6) IN " + sqlDays + " AND " + s + " NOT LIKE '0000%' THEN" +
		" CASE WHEN " + s + " LIKE '_____02-29%' AND NOT " + leap + " THEN FALSE" +
		" WHEN length(" + s + ") = 10 THEN " + dateThen +
		// The shape fixed where everything is: HH at 12, MM at 15, seconds
		// after a colon at 17 if any, the offset at the end.
		" WHEN substr(" + s + ", 12, 2)" + c + " <= '23' AND substr(" + s + ", 15, 1)" + c + " <= '5'" +
		" AND (" + s + " NOT LIKE '________________:%' OR substr(" + s + ", 18, 1)" + c + " <= '5')" +
		" AND (" + s + " LIKE '%Z' OR (substr(" + s + ", length(" + s + ") - 4, 2)" + c + " <= '14'" +
		" AND substr(" + s + ", length(" + s + ") - 1, 1)" + c + " <= '5'))" +
		" THEN " + timestampThen +
		" ELSE FALSE END ELSE FALSE END ELSE FALSE END"
}

// timestampCompareSQL compares the text expression s with the instant t: FALSE
// unless s is a timestamp (timestampSQL). A bare date stands for midnight UTC
// and, being fixed-width, orders like its text, so it is compared with the
// date bound that gives the same answer as comparing instants:
//
//	date > t   iff  s > D          date <= t  iff  s <= D
//	date >= t  iff  s >= D if t is midnight UTC, else s > D
//	date < t   iff  s < D  if t is midnight UTC, else s <= D
//
// where D is t's UTC date (a sentinel below or above every date when t falls
// outside years 1-9999 in UTC).
func (c *compiler) timestampCompareSQL(s, op string, t time.Time) string {
	u := t.UTC()
	midnight := u.Equal(time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC))
	var bound string
	switch {
	case u.Year() < 1:
		bound, midnight = "0000-00-00", false
	case u.Year() > 9999:
		bound, midnight = "9999-99-99", false
	default:
		bound = u.Format("2006-01-02")
	}
	dateOp := map[string]string{
		OpGreaterThan:    ">",
		OpLessOrEqual:    "<=",
		OpGreaterOrEqual: ">",
		OpLessThan:       "<=",
	}[op]
	if midnight && op == OpGreaterOrEqual {
		dateOp = ">="
	}
	if midnight && op == OpLessThan {
		dateOp = "<"
	}
	return timestampSQL(s,
		s+` COLLATE "C" `+dateOp+" "+c.arg(bound, "text"),
		s+"::timestamptz "+orderingSQL[op]+" "+c.arg(t, "timestamptz"))
}
