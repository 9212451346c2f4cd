package api

import (
	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/sequences/engine"
	"tidings/queries"
)

// Scheduled sends (ADDENDUM section 7): read-only views of the rows the
// sequence engine writes.

type scheduledJSON struct {
	ScheduledSendID string  `json:"scheduledSendId"`
	ContactID       string  `json:"contactId"`
	SequenceID      string  `json:"sequenceId"`
	SequenceVersion int32   `json:"sequenceVersion"`
	StepID          string  `json:"stepId"`
	TemplateID      string  `json:"templateId"`
	ScheduledFor    string  `json:"scheduledFor"`
	Status          string  `json:"status"`
	Attempts        int32   `json:"attempts"`
	CreatedAt       string  `json:"createdAt"`
	CancelReason    *string `json:"cancelReason,omitempty"`
	LastError       *string `json:"lastError,omitempty"`
	SendID          *string `json:"sendId,omitempty"`
	// HeldBy names what a waiting send waits for (a destination throttle,
	// a domain's warm-up); null otherwise.
	HeldBy *string `json:"heldBy"`
}

func scheduledView(r queries.ScheduledSend) scheduledJSON {
	v := scheduledJSON{ScheduledSendID: r.ID, ContactID: r.ContactID, SequenceID: r.SequenceID,
		SequenceVersion: r.SequenceVersion, StepID: r.StepID, TemplateID: r.TemplateID,
		ScheduledFor: formatTime(r.ScheduledFor), Status: r.Status, Attempts: r.Attempts,
		CreatedAt: formatTime(r.CreatedAt), SendID: r.SendID}
	if r.Status == "cancelled" {
		v.CancelReason = r.CancelReason
	}
	if r.Status == "failed" || r.Status == "dead" {
		v.LastError = r.LastError
	}
	if r.Status == "pending" || r.Status == "claimed" {
		v.HeldBy = r.HeldBy
	}
	return v
}

// scheduledList is GET /api/scheduled: by status and/or contactId,
// optionally by cancelReason (engine.ScheduledFilter.Check says what they
// mean).
func (s *Server) scheduledList(c *fiber.Ctx) error {
	filter := engine.ScheduledFilter{Status: queryPtr(c, "status"), ContactID: queryPtr(c, "contactId"),
		CancelReason: queryPtr(c, "cancelReason")}
	var f apperr.Fields
	mergeFields(&f, filter.Check())
	limit, err := page.Limit(c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	mergeFields(&f, err)
	if err := f.Err(); err != nil {
		return err
	}
	filter.Limit = limit
	return s.scheduledPage(c, filter)
}

// queryPtr is a query parameter, nil when absent or empty.
func queryPtr(c *fiber.Ctx, key string) *string {
	if v := c.Query(key); v != "" {
		return &v
	}
	return nil
}

// contactScheduled is GET /api/contacts/{id}/scheduled: the contact's
// pending, claimed, failed and dead sends.
func (s *Server) contactScheduled(c *fiber.Ctx) error {
	id, err := s.contactParam(c)
	if err != nil {
		return err
	}
	limit, err := page.Limit(c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	return s.scheduledPage(c, engine.ScheduledFilter{ContactID: &id, Limit: limit})
}

func (s *Server) scheduledPage(c *fiber.Ctx, filter engine.ScheduledFilter) error {
	rows, more, err := s.enrolments.Scheduled(c.UserContext(), tenantID(c), filter)
	if err != nil {
		return err
	}
	items := make([]scheduledJSON, len(rows))
	for i, r := range rows {
		items[i] = scheduledView(r)
	}
	return c.JSON(scheduledPageJSON{Items: items, HasMore: more})
}

// scheduledGet is GET /api/scheduled/{id}?scheduledFor=: the instant must
// be the record's scheduledFor.
func (s *Server) scheduledGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	raw := c.Query("scheduledFor")
	if raw == "" {
		return apperr.Invalid("scheduledFor", "is required")
	}
	at, err := parseTime(raw)
	if err != nil {
		return apperr.Invalid("scheduledFor", "must be an ISO 8601 timestamp")
	}
	r, err := s.enrolments.ScheduledGet(c.UserContext(), tenantID(c), id, at)
	if err != nil {
		return err
	}
	return c.JSON(scheduledView(r))
}

// scheduledPageJSON is a list of scheduled sends; hasMore says the limit
// cut it.
type scheduledPageJSON struct {
	Items   []scheduledJSON `json:"items"`
	HasMore bool            `json:"hasMore"`
}
