package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/render"
	"tidings/internal/sequences/engine"
	"tidings/queries"
	"tidings/worker"
)

// Enrolments, sequence status and dry run (ADDENDUM section 6); the engine
// (internal/sequences/engine) does the work.

type enrolmentJSON struct {
	SequenceID  string  `json:"sequenceId"`
	ContactID   string  `json:"contactId"`
	Status      string  `json:"status"`
	EnrolledAt  string  `json:"enrolledAt"`
	CurrentStep int32   `json:"currentStep"`
	EndedAt     *string `json:"endedAt,omitempty"`
	ExitReason  *string `json:"exitReason,omitempty"`
}

func enrolmentView(e queries.Enrolment) enrolmentJSON {
	return enrolmentJSON{SequenceID: e.SequenceID, ContactID: e.ContactID, Status: e.Status,
		EnrolledAt: formatTime(e.EnrolledAt), CurrentStep: e.CurrentStepIndex, EndedAt: formatTimePtr(e.EndedAt),
		ExitReason: e.ExitReason}
}

type enrolReq struct {
	ContactID Opt[string] `json:"contactId"`
}

// enrol is POST /api/sequences/{id}/contacts: 201 with a new enrolment,
// 200 with the open one (or, without reenroll, the ended one that keeps
// the contact out).
func (s *Server) enrol(c *fiber.Ctx) error {
	seqID, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req enrolReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	contactID, ok := req.ContactID.Value()
	if !ok || contactID == "" {
		return apperr.Invalid("contactId", "is required")
	}
	ctx, timers := engine.WithTimers(c.UserContext())
	var e queries.Enrolment
	var created bool
	err = s.db.Tx(ctx, func(q *queries.Queries) error {
		timers.Reset()
		seq, err := engine.LoadSequence(ctx, q, tenantID(c), seqID)
		if err != nil {
			return err
		}
		if _, err := q.ContactGet(ctx, queries.ContactGetParams{TenantID: tenantID(c), ID: contactID}); err != nil {
			return apperr.Specific(err, apperr.KindNotFound, apperr.NotFound("CONTACT_NOT_FOUND", "contact"))
		}
		e, created, err = engine.Enroll(ctx, q, tenantID(c), seq, contactID, nil)
		return err
	})
	if err != nil {
		return err
	}
	worker.EnqueueScheduledSends(ctx, s.queue, s.log, timers.List())
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.Status(status).JSON(enrolmentView(e))
}

// unenrol is DELETE /api/sequences/{id}/contacts/{contactId}: the open
// enrolment exits (manual), its pending sends are cancelled.
func (s *Server) unenrol(c *fiber.Ctx) error {
	seqID, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	contactID, err := pathParam(c, "contactId")
	if err != nil {
		return err
	}
	err = s.db.Tx(c.UserContext(), func(q *queries.Queries) error {
		if _, err := engine.LoadSequence(c.UserContext(), q, tenantID(c), seqID); err != nil {
			return err
		}
		_, err := engine.Exit(c.UserContext(), q, tenantID(c), seqID, contactID, engine.ReasonManual)
		return err
	})
	if err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

type enrolledJSON struct {
	ContactID   string `json:"contactId"`
	Email       string `json:"email"`
	Status      string `json:"status"`
	EnrolledAt  string `json:"enrolledAt"`
	CurrentStep int32  `json:"currentStep"`
}

// enrolled is GET /api/sequences/{id}/contacts: active and paused
// enrolments, newest first.
func (s *Server) enrolled(c *fiber.Ctx) error {
	seqID, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	if _, err := engine.LoadSequence(ctx, s.db.Queries, tenantID(c), seqID); err != nil {
		return err
	}
	rows, next, err := page.List(p, func(pq page.Query) ([]queries.EnrolmentListBySequenceRow, error) {
		return s.db.EnrolmentListBySequence(ctx, queries.EnrolmentListBySequenceParams{TenantID: tenantID(c),
			SequenceID: seqID, BeforeTime: pq.BeforeTime, BeforeID: pq.BeforeID, Lim: pq.Limit})
	}, func(r queries.EnrolmentListBySequenceRow) page.Cursor {
		return page.Cursor{Time: r.EnrolledAt, ID: r.ID}
	})
	if err != nil {
		return err
	}
	items := make([]enrolledJSON, len(rows))
	for i, r := range rows {
		items[i] = enrolledJSON{ContactID: r.ContactID, Email: r.Email, Status: r.Status,
			EnrolledAt: formatTime(r.EnrolledAt), CurrentStep: r.CurrentStepIndex}
	}
	return c.JSON(fiber.Map{"items": items, "nextCursor": s.pages.Next(next)})
}

// sequenceStatus is GET /api/sequences/{id}/status.
func (s *Server) sequenceStatus(c *fiber.Ctx) error {
	seqID, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	r, err := s.db.EnrolmentSequenceStatus(c.UserContext(), queries.EnrolmentSequenceStatusParams{TenantID: tenantID(c), ID: seqID})
	if err != nil {
		return apperr.Specific(err, apperr.KindNotFound, engine.NotFound())
	}
	return c.JSON(fiber.Map{"sequenceId": r.ID, "name": r.Name, "enabled": r.Enabled,
		"version": strconv.Itoa(int(r.Version)), "createdAt": formatTime(r.CreatedAt), "updatedAt": formatTime(r.UpdatedAt),
		"contacts": fiber.Map{"active": r.Active, "paused": r.Paused, "completed": r.Completed, "exited": r.Exited}})
}

// contactSequences is GET /api/contacts/{id}/sequences: every enrolment of
// the contact, newest first.
func (s *Server) contactSequences(c *fiber.Ctx) error {
	id, err := s.contactParam(c)
	if err != nil {
		return err
	}
	rows, err := s.db.EnrolmentListByContact(c.UserContext(), queries.EnrolmentListByContactParams{
		TenantID: tenantID(c), ContactID: id, Lim: 1000})
	if err != nil {
		return err
	}
	items := make([]enrolmentJSON, len(rows))
	for i, e := range rows {
		items[i] = enrolmentView(e)
	}
	return c.JSON(fiber.Map{"items": items})
}

type dryRunReq struct {
	ContactID Opt[string] `json:"contactId"`
	StepID    Opt[string] `json:"stepId"`
}

const textPreviewChars = 200

// dryRun is POST /api/sequences/{id}/dry-run: what a step would do for a
// contact now, persisting and sending nothing.
func (s *Server) dryRun(c *fiber.Ctx) error {
	seqID, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req dryRunReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	contactID, ok := req.ContactID.Value()
	if !ok || contactID == "" {
		return apperr.Invalid("contactId", "is required")
	}
	stepID, _ := req.StepID.Value()
	ctx := c.UserContext()
	res, err := engine.DryRun(ctx, s.db.Queries, tenantID(c), seqID, contactID, stepID)
	if err != nil {
		return err
	}
	out := fiber.Map{"outcome": res.Outcome, "decisionPath": res.DecisionPath,
		"stepInfo":    fiber.Map{"stepId": res.Step.ID, "templateId": res.Step.Template},
		"contactInfo": fiber.Map{"contactId": res.Contact.ID, "email": res.Contact.Email, "subscribed": res.Contact.Subscribed, "suppressed": res.Contact.Suppressed},
		"sequenceInfo": fiber.Map{"sequenceId": res.Sequence.ID, "name": res.Sequence.Name, "enabled": res.Sequence.Enabled,
			"version": strconv.Itoa(int(res.Sequence.Version))},
		"inSequence": res.Enrolment != nil, "timestamp": formatTime(time.Now())}
	if res.Outcome == engine.WouldSend {
		preview, err := s.stepPreview(c, res)
		if err != nil {
			return err
		}
		out["templatePreview"] = preview
	}
	return c.JSON(out)
}

// stepPreview renders the step's template for the contact as a send would
// (the enrolling event in context), with a placeholder unsubscribe link.
func (s *Server) stepPreview(c *fiber.Ctx, res engine.DryRunResult) (fiber.Map, error) {
	ctx := c.UserContext()
	tmpl, err := s.db.TemplateGet(ctx, queries.TemplateGetParams{TenantID: tenantID(c), ID: res.Step.Template})
	if err != nil {
		return nil, apperr.Specific(err, apperr.KindNotFound, apperr.NotFound("TEMPLATE_NOT_FOUND", "template"))
	}
	var props map[string]any
	_ = json.Unmarshal(res.Contact.Properties, &props)
	userID := ""
	if res.Contact.UserID != nil {
		userID = *res.Contact.UserID
	}
	rc := render.Context{UnsubscribeURL: s.cfg.PublicBaseURL + "/t/u/dry-run",
		Contact: &render.Contact{ContactID: res.Contact.ID, Email: res.Contact.Email, UserID: userID,
			Subscribed: res.Contact.Subscribed, Properties: props}}
	if ev := res.TriggerEvent; ev != nil {
		var ep map[string]any
		_ = json.Unmarshal(ev.Properties, &ep)
		rc.Event = &render.Event{Name: ev.Name, Properties: ep, Timestamp: ev.OccurredAt}
	}
	msg, err := s.renderer.RenderCurrent(ctx, tenantID(c), tmpl, rc)
	if err != nil {
		return nil, err
	}
	text := msg.Text
	if utf8.RuneCountInString(text) > textPreviewChars {
		text = string([]rune(text)[:textPreviewChars])
	}
	return fiber.Map{"subject": msg.Subject, "textPreview": text}, nil
}
