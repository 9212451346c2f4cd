package api

import (
	"context"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/broadcasts"
	"tidings/internal/page"
	"tidings/queries"
)

type broadcastStatsJSON struct {
	Recipients   int64 `json:"recipients"`
	Queued       int64 `json:"queued"`
	Sent         int64 `json:"sent"`
	Skipped      int64 `json:"skipped"`
	Failed       int64 `json:"failed"`
	Cancelled    int64 `json:"cancelled"`
	Delivered    int64 `json:"delivered"`
	Opened       int64 `json:"opened"`
	Clicked      int64 `json:"clicked"`
	Bounced      int64 `json:"bounced"`
	Complained   int64 `json:"complained"`
	Unsubscribed int64 `json:"unsubscribed"`
}

// broadcastJSON is a broadcast as every route shows it. sendAt is as it
// was given: an instant, or with localTime a wall-clock time without
// offset. lastScheduledFor is when its last recipient is due (a local-time
// broadcast reaches its last zone then), known once sending has started.
type broadcastJSON struct {
	BroadcastID      string             `json:"broadcastId"`
	Name             string             `json:"name"`
	TemplateID       string             `json:"templateId"`
	SegmentID        string             `json:"segmentId"`
	CampaignID       *string            `json:"campaignId"`
	From             *string            `json:"from"`
	Topic            *string            `json:"topic"`
	Status           string             `json:"status"`
	SendAt           *string            `json:"sendAt" format:"-" doc:"With localTime, a wall-clock time without an offset; else a date-time."`
	LocalTime        bool               `json:"localTime"`
	CreatedAt        string             `json:"createdAt"`
	UpdatedAt        string             `json:"updatedAt"`
	StartedAt        *string            `json:"startedAt"`
	CompletedAt      *string            `json:"completedAt"`
	LastScheduledFor *string            `json:"lastScheduledFor"`
	Stats            broadcastStatsJSON `json:"stats"`
}

func broadcastView(b queries.Broadcast, st broadcasts.Stats) broadcastJSON {
	sendAt := b.LocalSendAt
	if !b.LocalTime {
		sendAt = formatTimePtr(b.SendAt)
	}
	return broadcastJSON{BroadcastID: b.ID, Name: b.Name, TemplateID: b.TemplateID, SegmentID: b.SegmentID,
		CampaignID: b.CampaignID, From: b.FromAddress, Topic: b.Topic, Status: b.Status, SendAt: sendAt,
		LocalTime: b.LocalTime, CreatedAt: formatTime(b.CreatedAt), UpdatedAt: formatTime(b.UpdatedAt),
		StartedAt: formatTimePtr(b.StartedAt), CompletedAt: formatTimePtr(b.CompletedAt),
		LastScheduledFor: formatTimePtr(b.LastScheduledFor),
		Stats: broadcastStatsJSON{Recipients: st.Recipients, Queued: st.Queued, Sent: st.Sent, Skipped: st.Skipped,
			Failed: st.Failed, Cancelled: st.Cancelled, Delivered: st.Delivered, Opened: st.Opened,
			Clicked: st.Clicked, Bounced: st.Bounced, Complained: st.Complained, Unsubscribed: st.Unsubscribed}}
}

// renderBroadcasts shows broadcasts with their stats (one read for all).
func (s *Server) renderBroadcasts(ctx context.Context, tenant string, bs []queries.Broadcast) ([]broadcastJSON, error) {
	stats, err := s.broadcasts.StatsOf(ctx, tenant, bs)
	if err != nil {
		return nil, err
	}
	out := make([]broadcastJSON, len(bs))
	for i, b := range bs {
		out[i] = broadcastView(b, stats[i])
	}
	return out, nil
}

func (s *Server) renderBroadcast(c *fiber.Ctx, status int, b queries.Broadcast) error {
	v, err := s.renderBroadcasts(c.UserContext(), tenantID(c), []queries.Broadcast{b})
	if err != nil {
		return err
	}
	return c.Status(status).JSON(v[0])
}

type broadcastReq struct {
	Name       Opt[string] `json:"name" min:"1" max:"200"`
	TemplateID Opt[string] `json:"templateId" pattern:"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"`
	SegmentID  Opt[string] `json:"segmentId" min:"1" max:"64"`
	From       Opt[string] `json:"from" max:"320" doc:"addr@domain or Name <addr@domain>."`
	SendAt     Opt[string] `json:"sendAt" format:"-" nullable:"true" doc:"When to send (with an offset or Z), or with localTime a wall-clock time in each contact's zone."`
	LocalTime  Opt[bool]   `json:"localTime"`
	CampaignID Opt[string] `json:"campaignId"`
	Topic      Opt[string] `json:"topic"`
}

// validate passes what was sent to the domain, which judges it; a null
// required field arrives as "" and is refused there.
func (r broadcastReq) validate() (broadcasts.Input, error) {
	return broadcasts.Input{Name: r.Name.Sent(), TemplateID: r.TemplateID.Sent(), SegmentID: r.SegmentID.Sent(),
		From: r.From.Ptr(), SetFrom: r.From.Set, SendAt: r.SendAt.Ptr(), SetSendAt: r.SendAt.Set,
		LocalTime: r.LocalTime.Ptr(), CampaignID: r.CampaignID.Ptr(), SetCampaign: r.CampaignID.Set,
		Topic: r.Topic.Ptr(), SetTopic: r.Topic.Set}, nil
}

func (s *Server) broadcastCreate(c *fiber.Ctx) error {
	var req broadcastReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate()
	if err != nil {
		return err
	}
	b, err := s.broadcasts.Create(c.UserContext(), tenantID(c), in)
	if err != nil {
		return err
	}
	return s.renderBroadcast(c, http.StatusCreated, b)
}

func (s *Server) broadcastList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.broadcasts.List(c.UserContext(), tenantID(c), c.Query("status"), p)
	if err != nil {
		return err
	}
	items, err := s.renderBroadcasts(c.UserContext(), tenantID(c), rows)
	if err != nil {
		return err
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) broadcastGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	b, err := s.broadcasts.Get(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return s.renderBroadcast(c, http.StatusOK, b)
}

func (s *Server) broadcastUpdate(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req broadcastReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate()
	if err != nil {
		return err
	}
	b, err := s.broadcasts.Update(c.UserContext(), tenantID(c), id, in)
	if err != nil {
		return err
	}
	return s.renderBroadcast(c, http.StatusOK, b)
}

func (s *Server) broadcastDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.broadcasts.Delete(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

type broadcastSendReq struct {
	SendAt *string `json:"sendAt" format:"-" doc:"When to send; now when absent. With the broadcast's localTime, a wall-clock time without an offset."`
}

// validate has nothing to judge: the domain reads sendAt by the
// broadcast's localTime.
func (r broadcastSendReq) validate() (*string, error) { return r.SendAt, nil }

func (s *Server) broadcastSend(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req broadcastSendReq
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	sendAt, err := req.validate()
	if err != nil {
		return err
	}
	b, err := s.broadcasts.Send(c.UserContext(), tenantID(c), id, sendAt)
	if err != nil {
		return err
	}
	return s.renderBroadcast(c, http.StatusOK, b)
}

// broadcastMove serves pause, resume and cancel.
func (s *Server) broadcastMove(op func(ctx context.Context, tenantID, id string) (queries.Broadcast, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := pathParam(c, "id")
		if err != nil {
			return err
		}
		b, err := op(c.UserContext(), tenantID(c), id)
		if err != nil {
			return err
		}
		return s.renderBroadcast(c, http.StatusOK, b)
	}
}

type recipientJSON struct {
	ContactID    string  `json:"contactId"`
	Email        string  `json:"email"`
	Status       string  `json:"status"`
	SkipReason   *string `json:"skipReason"`
	SendID       *string `json:"sendId"`
	ScheduledFor string  `json:"scheduledFor"`
}

func (s *Server) broadcastRecipients(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, 1000)
	if err != nil {
		return err
	}
	rows, next, err := s.broadcasts.Recipients(c.UserContext(), tenantID(c), id, c.Query("status"), p)
	if err != nil {
		return err
	}
	items := make([]recipientJSON, len(rows))
	for i, r := range rows {
		items[i] = recipientJSON{ContactID: r.ContactID, Email: r.Email, Status: r.Status, SkipReason: r.SkipReason,
			SendID: r.SendID, ScheduledFor: formatTime(r.ScheduledFor)}
	}
	return c.JSON(list(items, s.pages.Next(next)))
}
