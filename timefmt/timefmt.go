// Package timefmt formats timestamps the way every response carries them:
// ISO 8601, UTC, milliseconds (API.md section 2).
package timefmt

import "time"

// Layout is the response timestamp layout.
const Layout = "2006-01-02T15:04:05.000Z"

// Format renders t in UTC with milliseconds.
func Format(t time.Time) string { return t.UTC().Format(Layout) }

// Ptr renders a nullable time; nil stays nil (JSON null).
func Ptr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := Format(*t)
	return &s
}

// Parse accepts RFC 3339 with or without fractional seconds.
func Parse(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }
