// Package ids generates the prefixed, time-ordered ids of API.md section 2
// and validates the caller-chosen ones of ADDENDUM section 3.
package ids

import (
	"regexp"
	"strings"

	"github.com/oklog/ulid/v2"
)

// Prefixes of generated ids.
const (
	APIKey        = "key_"
	Tenant        = "ten_"
	Contact       = "cnt_"
	Send          = "snd_"
	Segment       = "seg_"
	Campaign      = "cmp_"
	Event         = "evt_"
	ScheduledSend = "sch_"
	Enrolment     = "enr_"
	Broadcast     = "brd_"
	Webhook       = "whk_"
	Audit         = "aud_"
	Variant       = "var_"
)

// New returns prefix followed by a lower-case ULID. ULIDs sort by creation
// time, so ids from one process order like their creation.
func New(prefix string) string { return prefix + strings.ToLower(ulid.Make().String()) }

// Pattern is the shape of every id: the caller-chosen template and sequence
// ids (ADDENDUM 3), the generated ones above, and tenant ids. Ids become
// file names, Message-ID local parts and JSON custom_args, so nothing else
// is accepted where one is expected.
const Pattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`

var pattern = regexp.MustCompile(Pattern)

// Valid reports whether s matches Pattern.
func Valid(s string) bool { return pattern.MatchString(s) }
