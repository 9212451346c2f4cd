package domains

import (
	"strings"
	"time"
)

// Domain statuses (API.md section 3).
const (
	StatusPending   = "pending"
	StatusVerifying = "verifying"
	StatusVerified  = "verified"
	StatusFailed    = "failed"
)

// Health values: what the last check saw, whatever the status. A verified
// domain whose records disappear stays verified and turns degraded.
const (
	HealthUnknown  = "unknown"  // never checked
	HealthHealthy  = "healthy"  // the last check found all four records
	HealthDegraded = "degraded" // the last check missed at least one
)

// FailAfter is how long after it was added an unverified domain turns
// failed (ADDENDUM section 9).
const FailAfter = 72 * time.Hour

// Record purposes and types (API.md, Domain resource).
const (
	PurposeVerification = "Domain verification"
	PurposeDKIM         = "DKIM"
	TypeTXT             = "TXT"
	TypeCNAME           = "CNAME"
)

// DNSRecord is a record the tenant publishes for a domain.
type DNSRecord struct {
	Type    string `json:"type"`
	Name    string `json:"name"`
	Value   string `json:"value"`
	Purpose string `json:"purpose"`
}

// Found is what a check learnt of one record.
type Found struct {
	Record  DNSRecord
	Present bool
	// Err is a failed lookup (timeout, SERVFAIL): the record is not
	// confirmed, and the message says it could not be looked up.
	Err error
}

// Outcome is what a check makes of the records it found.
type Outcome struct {
	Status  string
	Health  string
	Message string
	Missing []string // names of the records not confirmed, in record order
}

// Evaluate decides a domain's status and health from one check. All records
// present: verified, whatever the status was. Otherwise a verified domain
// stays verified (degraded); any other turns verifying, or failed once
// FailAfter has passed since createdAt. It does no I/O.
func Evaluate(found []Found, createdAt, now time.Time, current string) Outcome {
	var missing, shown []string
	for _, f := range found {
		if f.Present {
			continue
		}
		missing = append(missing, f.Record.Name)
		s := f.Record.Type + " " + f.Record.Name
		if f.Err != nil {
			s += " (lookup failed: " + f.Err.Error() + ")"
		}
		shown = append(shown, s)
	}
	if len(missing) == 0 {
		return Outcome{Status: StatusVerified, Health: HealthHealthy, Missing: []string{},
			Message: "All DNS records found; the domain is verified."}
	}
	o := Outcome{Health: HealthDegraded, Missing: missing,
		Message: "Missing DNS records: " + strings.Join(shown, ", ") + ". "}
	switch {
	case current == StatusVerified:
		o.Status = StatusVerified
		o.Message += "The domain stays verified; restore the records to keep mail authenticated."
	case now.Sub(createdAt) >= FailAfter:
		o.Status = StatusFailed
		o.Message += "Verification failed: the records were not found within 72 hours of adding the domain; publish them and verify again."
	default:
		o.Status = StatusVerifying
		o.Message += "Publish them; the domain is checked again periodically until 72 hours after it was added."
	}
	return o
}
