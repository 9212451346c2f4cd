package api

import (
	"context"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
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
	// Experiment is an A/B broadcast's (ADDENDUM 20); null for a plain one.
	Experiment *experimentJSON `json:"experiment"`
}

// experimentJSON is an A/B broadcast's settings with defaults filled in,
// its winner once picked, and each variant's figures.
type experimentJSON struct {
	TestFraction float64       `json:"testFraction"`
	Metric       string        `json:"metric"`
	WaitFor      string        `json:"waitFor"`
	AutoWinner   bool          `json:"autoWinner"`
	Winner       *winnerJSON   `json:"winner"`
	Variants     []variantJSON `json:"variants"`
}

type winnerJSON struct {
	VariantID string `json:"variantId"`
	PickedAt  string `json:"pickedAt"`
	Reason    string `json:"reason"`
}

type variantJSON struct {
	VariantID  string    `json:"variantId"`
	Name       string    `json:"name"`
	TemplateID string    `json:"templateId"`
	Subject    *string   `json:"subject"`
	Recipients int64     `json:"recipients"`
	Sent       int64     `json:"sent"`
	Delivered  int64     `json:"delivered"`
	Opened     int64     `json:"opened"`
	Clicked    int64     `json:"clicked"`
	Rate       float64   `json:"rate"`
	Interval   []float64 `json:"interval"`
}

// experimentView shows b's experiment with its variants' figures vs (in
// the experiment's order); nil for a plain broadcast. A variant without a
// template of its own shows the broadcast's.
func experimentView(b queries.Broadcast, vs []broadcasts.VariantStats) *experimentJSON {
	x := broadcasts.ExperimentOf(b)
	if x == nil {
		return nil
	}
	out := &experimentJSON{TestFraction: x.TestFraction, Metric: x.Metric, WaitFor: x.WaitFor, AutoWinner: x.AutoWinner,
		Variants: make([]variantJSON, len(vs))}
	if b.WinnerVariantID != nil && b.WinnerPickedAt != nil && b.WinnerReason != nil {
		out.Winner = &winnerJSON{VariantID: *b.WinnerVariantID, PickedAt: formatTime(*b.WinnerPickedAt),
			Reason: *b.WinnerReason}
	}
	for i, v := range vs {
		tmpl := b.TemplateID
		if v.TemplateID != nil {
			tmpl = *v.TemplateID
		}
		out.Variants[i] = variantJSON{VariantID: v.ID, Name: v.Name, TemplateID: tmpl, Subject: v.Subject,
			Recipients: v.Recipients, Sent: v.Sent, Delivered: v.Delivered, Opened: v.Opened, Clicked: v.Clicked,
			Rate: v.Rate, Interval: []float64{v.Interval[0], v.Interval[1]}}
	}
	return out
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
		vs, err := s.broadcasts.VariantStatsOf(ctx, b)
		if err != nil {
			return nil, err
		}
		out[i].Experiment = experimentView(b, vs)
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
	Name       Opt[string]        `json:"name" min:"1" max:"200"`
	TemplateID Opt[string]        `json:"templateId" pattern:"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"`
	SegmentID  Opt[string]        `json:"segmentId" min:"1" max:"64"`
	From       Opt[string]        `json:"from" max:"320" doc:"addr@domain or Name <addr@domain>."`
	SendAt     Opt[string]        `json:"sendAt" format:"-" nullable:"true" doc:"When to send (with an offset or Z), or with localTime a wall-clock time in each contact's zone."`
	LocalTime  Opt[bool]          `json:"localTime"`
	CampaignID Opt[string]        `json:"campaignId"`
	Topic      Opt[string]        `json:"topic"`
	Experiment Opt[experimentReq] `json:"experiment" nullable:"true" doc:"An A/B test: 2-5 variants (each a template and/or a subject), testFraction 0.05-0.5 (default 0.2), metric opened or clicked, waitFor 10s-72h, autoWinner (default true); null makes the broadcast plain."`
}

// experimentReq is an A/B test as sent; the domain judges it.
type experimentReq struct {
	Variants     []variantReq `json:"variants" required:"true" min:"2" max:"5"`
	TestFraction *float64     `json:"testFraction" doc:"0.05 to 0.5 (default 0.2)."`
	Metric       *string      `json:"metric" required:"true" enum:"opened,clicked"`
	WaitFor      *string      `json:"waitFor" required:"true" doc:"A duration from 10s to 72h, e.g. 4h."`
	AutoWinner   *bool        `json:"autoWinner"`
}

type variantReq struct {
	Name       *string `json:"name" required:"true" min:"1" max:"50"`
	TemplateID *string `json:"templateId"`
	Subject    *string `json:"subject"`
}

func (r experimentReq) input() *broadcasts.ExperimentInput {
	in := &broadcasts.ExperimentInput{TestFraction: r.TestFraction, Metric: r.Metric, WaitFor: r.WaitFor,
		AutoWinner: r.AutoWinner}
	for _, v := range r.Variants {
		in.Variants = append(in.Variants, broadcasts.VariantInput{Name: v.Name, TemplateID: v.TemplateID, Subject: v.Subject})
	}
	return in
}

// validate passes what was sent to the domain, which judges it; a null
// required field arrives as "" and is refused there.
func (r broadcastReq) validate() (broadcasts.Input, error) {
	in := broadcasts.Input{Name: r.Name.Sent(), TemplateID: r.TemplateID.Sent(), SegmentID: r.SegmentID.Sent(),
		From: r.From.Ptr(), SetFrom: r.From.Set, SendAt: r.SendAt.Ptr(), SetSendAt: r.SendAt.Set,
		LocalTime: r.LocalTime.Ptr(), CampaignID: r.CampaignID.Ptr(), SetCampaign: r.CampaignID.Set,
		Topic: r.Topic.Ptr(), SetTopic: r.Topic.Set}
	if x, ok := r.Experiment.Value(); ok {
		in.Experiment = x.input()
	}
	in.SetExperiment = r.Experiment.Set
	return in, nil
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
	// HeldBy names what a queued recipient waits for (a destination
	// throttle, a domain's warm-up); null otherwise.
	HeldBy *string `json:"heldBy"`
	// VariantID is an A/B broadcast's variant for this recipient (the
	// winner's once the rest are sent it); null for the rest before the
	// pick and for a plain broadcast.
	VariantID *string `json:"variantId"`
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
			SendID: r.SendID, ScheduledFor: formatTime(r.ScheduledFor), VariantID: r.VariantID}
		if r.Status == "queued" {
			items[i].HeldBy = r.HeldBy
		}
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

type broadcastWinnerReq struct {
	VariantID string `json:"variantId" required:"true" pattern:"^var_"`
}

func (r broadcastWinnerReq) validate() (string, error) {
	if r.VariantID == "" {
		return "", apperr.Invalid("variantId", "is required")
	}
	return r.VariantID, nil
}

// broadcastWinner picks an A/B broadcast's winner by hand.
func (s *Server) broadcastWinner(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req broadcastWinnerReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	variantID, err := req.validate()
	if err != nil {
		return err
	}
	b, err := s.broadcasts.PickWinner(c.UserContext(), tenantID(c), id, variantID)
	if err != nil {
		return err
	}
	return s.renderBroadcast(c, http.StatusOK, b)
}
