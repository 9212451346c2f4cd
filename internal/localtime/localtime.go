// Package localtime answers "what time is it for this contact": the IANA
// time zone names a tenant and its contacts may carry (ADDENDUM 13), and a
// wall-clock time read in such a zone. Go's own zone database decides
// (embedded with time/tzdata, so a machine without /usr/share/zoneinfo
// reads zones the same way); the database never converts zones itself.
package localtime

import (
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // the same zone rules on every machine
)

// UTC is the default zone of a tenant.
const UTC = "UTC"

var cache sync.Map // name → *time.Location, or nil for a name that is not a zone

// Load returns the zone an IANA name names, or nil when it names none.
// "Local" and names with path tricks are refused: only the zone database's
// own names count, e.g. "Europe/Amsterdam", "UTC".
func Load(name string) *time.Location {
	if v, ok := cache.Load(name); ok {
		loc, _ := v.(*time.Location)
		return loc
	}
	var loc *time.Location
	if name != "" && name != "Local" && len(name) <= 64 && !strings.Contains(name, "..") &&
		!strings.HasPrefix(name, "/") {
		if l, err := time.LoadLocation(name); err == nil {
			loc = l
		}
	}
	// Bounded: a name is cached only once it is a zone, so hostile
	// contact properties cannot grow the cache.
	if loc != nil {
		cache.Store(name, loc)
	}
	return loc
}

// Valid reports whether name is an IANA zone name.
func Valid(name string) bool { return Load(name) != nil }

// Zone is the zone of a contact: its `timezone` property when that is a
// zone, else the tenant's, else UTC.
func Zone(contactTZ any, tenantTZ string) *time.Location {
	if s, ok := contactTZ.(string); ok {
		if loc := Load(s); loc != nil {
			return loc
		}
	}
	if loc := Load(tenantTZ); loc != nil {
		return loc
	}
	return time.UTC
}

// WallLayout is how a wall-clock time without offset is written
// (a localTime broadcast's sendAt).
const WallLayout = "2006-01-02T15:04:05"

// ParseWall reads a wall-clock time without offset ("2026-12-01T09:00:00",
// seconds optional).
func ParseWall(s string) (time.Time, bool) {
	for _, layout := range []string{WallLayout, "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// At is the instant a wall-clock time occurs in loc. Across daylight-saving
// changes it is always exactly one instant, never two and never none: a
// time the clocks skip (the spring gap) or pass twice (autumn) is read in
// one of the two offsets around the change (time.Date's rule; the tests
// pin which). A recipient has one row with one instant, so a change of
// clocks can move its message by the gap's length but never send it twice
// or skip it.
func At(wall time.Time, loc *time.Location) time.Time {
	return time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), 0, loc)
}
