package api

import "time"

// timeLayout is how every response carries a timestamp: ISO 8601, UTC,
// milliseconds (API.md section 2).
const timeLayout = "2006-01-02T15:04:05.000Z"

// formatTime renders t in UTC with milliseconds.
func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// formatTimePtr renders a nullable timestamp; nil stays nil (JSON null).
func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// parseTime reads an ISO 8601 timestamp from a request.
func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }
