package engine

import (
	"slices"
	"strings"

	"tidings/internal/apperr"
)

// Scheduled-send statuses (ADDENDUM 7; the schema's CHECK holds the same).
const (
	StatusPending   = "pending"
	StatusClaimed   = "claimed"
	StatusSent      = "sent"
	StatusCancelled = "cancelled"
	StatusFailed    = "failed"
	StatusDead      = "dead"
)

// scheduledStatuses are the states of a scheduled send, in the order
// ADDENDUM 7 lists them.
var scheduledStatuses = []string{StatusPending, StatusClaimed, StatusSent, StatusCancelled, StatusFailed, StatusDead}

// Check judges a filter of GET /api/scheduled (ADDENDUM 7). A status or a
// contact is required, so that no list walks every row of the tenant;
// status must be a state and cancelReason a cancel reason. What the filter
// means is Scheduled's: without a status, the open rows (pending, claimed,
// failed, dead); with one, only rows in it, so sent and cancelled rows show
// only when asked for; cancelReason narrows either.
func (f ScheduledFilter) Check() error {
	var fields apperr.Fields
	if f.Status != nil {
		fields.Check(slices.Contains(scheduledStatuses, *f.Status), "status",
			"must be one of "+strings.Join(scheduledStatuses, ", "))
	}
	if f.CancelReason != nil {
		fields.Check(cancelReason(*f.CancelReason), "cancelReason", "is not a cancel reason")
	}
	fields.Check(f.Status != nil || f.ContactID != nil, "status", "or contactId is required")
	return fields.Err()
}
