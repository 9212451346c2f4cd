// Package throttle holds background mail to the rate each mailbox provider
// accepts (DESTINATION_LIMITS): a recipient's domain belongs to the group
// of its most preferred MX host's suffix, and each group has one token
// bucket in Redis that every worker takes from before a sequence or
// broadcast message gets its record. A message the bucket cannot take now
// is held until the time the bucket will take it (the caller moves it
// there), so a held message is not looked at again before then and never
// slows messages to other groups.
package throttle

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limit is one destination group's rate: messages per minute to recipient
// domains whose most preferred MX host ends in Suffix.
type Limit struct {
	Suffix    string
	PerMinute int
}

// Burst is how many messages the group's bucket lets go at once: a tenth
// of its per-minute limit, rounded down, at least 1.
func (l Limit) Burst() int { return max(1, l.PerMinute/10) }

// Interval is the time between two tokens at the group's rate.
func (l Limit) Interval() time.Duration { return time.Minute / time.Duration(l.PerMinute) }

// ParseLimits reads DESTINATION_LIMITS: comma-separated `suffix=N/unit`
// (unit `s`, `m` or `h`; the rate is kept per minute, rounded down, at
// least 1). Suffixes are lower-cased host names without a trailing dot;
// a suffix named twice is an error.
func ParseLimits(s string) ([]Limit, error) {
	var out []Limit
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		suffix, rate, ok := strings.Cut(part, "=")
		suffix = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(suffix)), ".")
		if !ok || !validSuffix(suffix) {
			return nil, fmt.Errorf("DESTINATION_LIMITS: %q: want suffix=N/m, e.g. google.com=600/m", part)
		}
		n, unit, ok := strings.Cut(strings.TrimSpace(rate), "/")
		v, err := strconv.Atoi(n)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("DESTINATION_LIMITS: %q: the rate must be a positive integer per s, m or h", part)
		}
		var perMinute int
		switch unit {
		case "s":
			perMinute = v * 60
		case "m":
			perMinute = v
		case "h":
			perMinute = max(1, v/60)
		default:
			return nil, fmt.Errorf("DESTINATION_LIMITS: %q: the unit must be s, m or h", part)
		}
		if slices.ContainsFunc(out, func(l Limit) bool { return l.Suffix == suffix }) {
			return nil, fmt.Errorf("DESTINATION_LIMITS: %q is named twice", suffix)
		}
		out = append(out, Limit{Suffix: suffix, PerMinute: perMinute})
	}
	return out, nil
}

// validSuffix accepts a host name: dot-separated labels of letters,
// digits and hyphens.
func validSuffix(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// groupOf is the suffix among limits that host ends in on a label
// boundary (the longest when several do), or "".
func groupOf(limits []Limit, host string) string {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	best := ""
	for _, l := range limits {
		if (host == l.Suffix || strings.HasSuffix(host, "."+l.Suffix)) && len(l.Suffix) > len(best) {
			best = l.Suffix
		}
	}
	return best
}
