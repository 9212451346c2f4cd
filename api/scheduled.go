package api

import (
	"slices"

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
	return v
}

var (
	scheduledStatuses = []string{"pending", "claimed", "sent", "cancelled", "failed", "dead"}
	cancelReasons     = []string{"contact_deleted", "unsubscribed", "suppressed", "sequence_deleted",
		"exit_condition", "gate_blocked", "manual", "step_removed"}
)

// scheduledList is GET /api/scheduled: by status and/or contactId (one is
// required), optionally by cancelReason; sent and cancelled rows only when
// the status asks for them.
func (s *Server) scheduledList(c *fiber.Ctx) error {
	var f apperr.Fields
	var status, contactID, reason *string
	if v := c.Query("status"); v != "" {
		if !slices.Contains(scheduledStatuses, v) {
			f.Add("status", "must be one of pending, claimed, sent, cancelled, failed, dead")
		}
		status = &v
	}
	if v := c.Query("contactId"); v != "" {
		contactID = &v
	}
	if v := c.Query("cancelReason"); v != "" {
		if !slices.Contains(cancelReasons, v) {
			f.Add("cancelReason", "is not a cancel reason")
		}
		reason = &v
	}
	if status == nil && contactID == nil {
		f.Add("status", "or contactId is required")
	}
	limit, err := page.Limit(c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	mergeFields(&f, err)
	if err := f.Err(); err != nil {
		return err
	}
	return s.scheduledPage(c, status, contactID, reason, limit)
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
	return s.scheduledPage(c, nil, &id, nil, limit)
}

func (s *Server) scheduledPage(c *fiber.Ctx, status, contactID, reason *string, limit int) error {
	rows, more, err := s.enrolments.Scheduled(c.UserContext(), tenantID(c),
		engine.ScheduledFilter{Status: status, ContactID: contactID, CancelReason: reason, Limit: limit})
	if err != nil {
		return err
	}
	items := make([]scheduledJSON, len(rows))
	for i, r := range rows {
		items[i] = scheduledView(r)
	}
	return c.JSON(fiber.Map{"items": items, "hasMore": more})
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
