package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/delivery"
	"tidings/internal/page"
	"tidings/queries"
)

// sendJSON is the Send record of API.md section 2. sequenceId and stepId
// appear only on sequence sends, broadcastId only on a broadcast's (the
// absence of all three means transactional),
// bounceType only on bounced ones; the outcome times are null until the
// outcome happens.
type sendJSON struct {
	SendID         string  `json:"sendId"`
	MessageID      string  `json:"messageId"`
	ContactID      string  `json:"contactId"`
	TemplateID     string  `json:"templateId"`
	SequenceID     *string `json:"sequenceId,omitempty"`
	StepID         *string `json:"stepId,omitempty"`
	BroadcastID    *string `json:"broadcastId,omitempty"`
	FromAddress    string  `json:"fromAddress"`
	ToAddress      string  `json:"toAddress"`
	Subject        string  `json:"subject"`
	DeliveryStatus string  `json:"deliveryStatus"`
	BounceType     *string `json:"bounceType,omitempty"`
	SentAt         string  `json:"sentAt"`
	DeliveredAt    *string `json:"deliveredAt"`
	OpenedAt       *string `json:"openedAt"`
	ClickedAt      *string `json:"clickedAt"`
	BouncedAt      *string `json:"bouncedAt"`
	ComplainedAt   *string `json:"complainedAt"`
	OpenCount      int32   `json:"openCount"`
	ClickCount     int32   `json:"clickCount"`
	InDoubt        bool    `json:"inDoubt"`
	// Locale is the tag of the template's locale version the message
	// used; null for the template's own (ADDENDUM 24).
	Locale *string `json:"locale"`
}

func sendView(r queries.Send) sendJSON {
	return sendJSON{SendID: r.ID, MessageID: r.MessageID, ContactID: r.ContactID, TemplateID: r.TemplateID,
		SequenceID: r.SequenceID, StepID: r.StepID, BroadcastID: r.BroadcastID, FromAddress: r.FromAddress, ToAddress: r.ToAddress,
		Subject: r.Subject, DeliveryStatus: r.DeliveryStatus, BounceType: r.BounceType,
		SentAt: formatTime(r.SentAt), DeliveredAt: formatTimePtr(r.DeliveredAt), OpenedAt: formatTimePtr(r.OpenedAt),
		ClickedAt: formatTimePtr(r.ClickedAt), BouncedAt: formatTimePtr(r.BouncedAt),
		ComplainedAt: formatTimePtr(r.ComplainedAt), OpenCount: r.OpenCount, ClickCount: r.ClickCount,
		InDoubt: delivery.InDoubt(r), Locale: r.Locale}
}

// sendFilter reads the filters of GET /api/sends; contactID, when given, is
// the path's contact instead of the query's.
func sendFilter(c *fiber.Ctx, contactID string) (delivery.Filter, error) {
	var f apperr.Fields
	flt := delivery.Filter{Status: c.Query("status"), TemplateID: c.Query("templateId"),
		SequenceID: c.Query("sequenceId"), BroadcastID: c.Query("broadcastId"), ContactID: contactID}
	if contactID == "" {
		flt.ContactID = c.Query("contactId")
	}
	if flt.Status != "" && !delivery.ValidStatus(flt.Status) {
		f.Add("status", "must be one of sent, delivered, bounced, complained, rejected")
	}
	switch v := c.Query("inDoubt"); v {
	case "", "false":
	case "true":
		flt.InDoubt = true
	default:
		f.Add("inDoubt", "must be true or false")
	}
	flt.From = timeQuery(c, "from", &f)
	flt.To = timeQuery(c, "to", &f)
	if !flt.From.IsZero() && !flt.To.IsZero() && flt.From.After(flt.To) {
		f.Add("from", "must not be after to")
	}
	return flt, f.Err()
}

// timeQuery reads an optional ISO 8601 query parameter; zero when absent.
func timeQuery(c *fiber.Ctx, name string, f *apperr.Fields) time.Time {
	v := c.Query(name)
	if v == "" {
		return time.Time{}
	}
	t, err := parseTime(v)
	if err != nil {
		f.Add(name, "must be an ISO 8601 timestamp")
	}
	return t
}

func (s *Server) sendList(c *fiber.Ctx) error {
	return s.listSends(c, "")
}

// contactSends is GET /api/contacts/{id}/sends: the send history of one
// contact (404 for an unknown contact, as every contact sub-resource).
func (s *Server) contactSends(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	return s.listSends(c, id)
}

func (s *Server) listSends(c *fiber.Ctx, contactID string) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	flt, err := sendFilter(c, contactID)
	if err != nil {
		return err
	}
	rows, next, err := s.sends.List(c.UserContext(), tenantID(c), flt, p)
	if err != nil {
		return err
	}
	items := make([]sendJSON, len(rows))
	for i, r := range rows {
		items[i] = sendView(r)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) sendGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "sendId")
	if err != nil {
		return err
	}
	r, err := s.sends.Get(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(sendView(r))
}
