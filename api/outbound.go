package api

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/outbound"
	"tidings/internal/page"
	"tidings/queries"
)

// endpointJSON is a webhook endpoint as every route shows it; secret only
// when it was just made (create, rotate).
type endpointJSON struct {
	WebhookID      string   `json:"webhookId"`
	URL            string   `json:"url"`
	Events         []string `json:"events"`
	Description    string   `json:"description"`
	Enabled        bool     `json:"enabled"`
	DisabledReason *string  `json:"disabledReason,omitempty"`
	Secret         string   `json:"secret,omitempty"`
	CreatedAt      string   `json:"createdAt"`
	UpdatedAt      string   `json:"updatedAt"`
}

func endpointView(e queries.WebhookEndpoint, withSecret bool) endpointJSON {
	v := endpointJSON{WebhookID: e.ID, URL: e.Url, Events: e.Events, Description: e.Description, Enabled: e.Enabled,
		DisabledReason: e.DisabledReason, CreatedAt: formatTime(e.CreatedAt), UpdatedAt: formatTime(e.UpdatedAt)}
	if v.Events == nil {
		v.Events = []string{}
	}
	if withSecret {
		v.Secret = e.Secret
	}
	return v
}

type endpointReq struct {
	URL         Opt[string]   `json:"url" format:"uri" max:"2048" pattern:"^[Hh][Tt][Tt][Pp][Ss]?://" doc:"An https:// (or http://) URL on a public address, port 80, 443 or 1024-65535."`
	Events      Opt[[]string] `json:"events" nullable:"true" enum:"email.sent,email.delivered,email.opened,email.clicked,email.bounced,email.complained,email.unsubscribed,contact.created,contact.updated,contact.deleted,contact.unsubscribed,contact.suppressed,sequence.entered,sequence.exited,sequence.completed,broadcast.sent,tenant.paused,webhook.test" doc:"The event types to deliver; every type when absent."`
	Description Opt[string]   `json:"description" max:"500"`
	Enabled     Opt[bool]     `json:"enabled"`
}

// validate passes what was sent to the domain; a null events list means
// every type, a null description none.
func (r endpointReq) validate() (outbound.Input, error) {
	in := outbound.Input{URL: r.URL.Sent(), Enabled: r.Enabled.Ptr()}
	if r.Events.Set {
		evs := r.Events.V
		if evs == nil {
			evs = []string{}
		}
		in.Events = &evs
	}
	if r.Description.Set {
		d := r.Description.V
		in.Description = &d
	}
	return in, nil
}

func (s *Server) webhookCreate(c *fiber.Ctx) error {
	var req endpointReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate()
	if err != nil {
		return err
	}
	e, err := s.outbound.Create(c.UserContext(), tenantID(c), in)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(endpointView(e, true))
}

func (s *Server) webhookList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.outbound.List(c.UserContext(), tenantID(c), p)
	if err != nil {
		return err
	}
	items := make([]endpointJSON, len(rows))
	for i, r := range rows {
		items[i] = endpointView(r, false)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) webhookGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	e, err := s.outbound.Get(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(endpointView(e, false))
}

func (s *Server) webhookUpdate(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req endpointReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate()
	if err != nil {
		return err
	}
	e, err := s.outbound.Update(c.UserContext(), tenantID(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(endpointView(e, false))
}

func (s *Server) webhookDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.outbound.Delete(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

func (s *Server) webhookRotate(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	e, err := s.outbound.Rotate(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(secretJSON{Secret: e.Secret})
}

func (s *Server) webhookTest(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.outbound.Test(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.Status(http.StatusAccepted).JSON(queuedJSON{Queued: true})
}

type deliveryJSON struct {
	MessageID      string  `json:"messageId"`
	EventType      string  `json:"eventType"`
	Status         string  `json:"status"`
	Attempts       int32   `json:"attempts"`
	LastStatusCode *int32  `json:"lastStatusCode"`
	LastError      *string `json:"lastError"`
	NextAttemptAt  *string `json:"nextAttemptAt"`
	CreatedAt      string  `json:"createdAt"`
}

func (s *Server) webhookDeliveries(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.outbound.Deliveries(c.UserContext(), tenantID(c), id, c.Query("status"), p)
	if err != nil {
		return err
	}
	items := make([]deliveryJSON, len(rows))
	for i, r := range rows {
		items[i] = deliveryJSON{MessageID: r.MessageID, EventType: r.Type, Status: r.Status, Attempts: r.Attempts,
			LastStatusCode: r.LastStatusCode, LastError: r.LastError, CreatedAt: formatTime(r.CreatedAt)}
		if r.Status == "pending" {
			items[i].NextAttemptAt = formatTimePtr(&r.NextAttemptAt)
		}
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) webhookRetry(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	msg, err := pathParam(c, "messageId")
	if err != nil {
		return err
	}
	if err := s.outbound.Retry(c.UserContext(), tenantID(c), id, msg); err != nil {
		return err
	}
	return c.Status(http.StatusAccepted).JSON(queuedJSON{Queued: true})
}

type secretJSON struct {
	Secret string `json:"secret"`
}

type queuedJSON struct {
	Queued bool `json:"queued"`
}
