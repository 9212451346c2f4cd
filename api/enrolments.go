package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/sequences/engine"
	"tidings/queries"
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
	// Branch is the split branch the enrolment was drawn (ADDENDUM 20),
	// holdout for the control group, default without a split. Never
	// empty; omitempty only keeps it optional in the OpenAPI schema, so
	// that examples recorded before branches existed stay valid until
	// they are recorded again.
	Branch string `json:"branch,omitempty"`
}

func enrolmentView(e queries.Enrolment) enrolmentJSON {
	return enrolmentJSON{SequenceID: e.SequenceID, ContactID: e.ContactID, Status: e.Status,
		EnrolledAt: formatTime(e.EnrolledAt), CurrentStep: e.CurrentStepIndex, EndedAt: formatTimePtr(e.EndedAt),
		ExitReason: e.ExitReason, Branch: e.Branch}
}

type enrolReq struct {
	ContactID Opt[string] `json:"contactId" required:"true" min:"1"`
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
	e, created, err := s.enrolments.Enrol(c.UserContext(), tenantID(c), seqID, contactID)
	if err != nil {
		return err
	}
	return c.Status(upsertStatus(created)).JSON(enrolmentView(e))
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
	if err := s.enrolments.Unenrol(c.UserContext(), tenantID(c), seqID, contactID); err != nil {
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
	Branch      string `json:"branch,omitempty"`
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
	rows, next, err := s.enrolments.Enrolled(c.UserContext(), tenantID(c), seqID, p)
	if err != nil {
		return err
	}
	items := make([]enrolledJSON, len(rows))
	for i, r := range rows {
		items[i] = enrolledJSON{ContactID: r.ContactID, Email: r.Email, Status: r.Status,
			EnrolledAt: formatTime(r.EnrolledAt), CurrentStep: r.CurrentStepIndex, Branch: r.Branch}
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

type sequenceStatusJSON struct {
	SequenceID string `json:"sequenceId"`
	Name       string `json:"name"`
	Enabled    bool   `json:"enabled"`
	Version    string `json:"version"`
	CreatedAt  string `json:"createdAt"`
	UpdatedAt  string `json:"updatedAt"`
	// Contacts counts the enrolments by status.
	Contacts struct {
		Active    int64 `json:"active"`
		Paused    int64 `json:"paused"`
		Completed int64 `json:"completed"`
		Exited    int64 `json:"exited"`
	} `json:"contacts"`
}

// sequenceStatus is GET /api/sequences/{id}/status.
func (s *Server) sequenceStatus(c *fiber.Ctx) error {
	seqID, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	r, err := s.enrolments.Status(c.UserContext(), tenantID(c), seqID)
	if err != nil {
		return err
	}
	v := sequenceStatusJSON{SequenceID: r.ID, Name: r.Name, Enabled: r.Enabled, Version: strconv.Itoa(int(r.Version)),
		CreatedAt: formatTime(r.CreatedAt), UpdatedAt: formatTime(r.UpdatedAt)}
	v.Contacts.Active, v.Contacts.Paused, v.Contacts.Completed, v.Contacts.Exited = r.Active, r.Paused, r.Completed, r.Exited
	return c.JSON(v)
}

// contactSequences is GET /api/contacts/{id}/sequences: every enrolment of
// the contact, newest first.
func (s *Server) contactSequences(c *fiber.Ctx) error {
	id, err := s.contactParam(c)
	if err != nil {
		return err
	}
	rows, err := s.enrolments.OfContact(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	items := make([]enrolmentJSON, len(rows))
	for i, e := range rows {
		items[i] = enrolmentView(e)
	}
	return c.JSON(whole(items))
}

type dryRunReq struct {
	ContactID Opt[string] `json:"contactId" required:"true"`
	StepID    Opt[string] `json:"stepId"`
}

type dryRunJSON struct {
	Outcome      string           `json:"outcome"`
	DecisionPath []map[string]any `json:"decisionPath"`
	StepInfo     struct {
		StepID     string `json:"stepId"`
		TemplateID string `json:"templateId"`
	} `json:"stepInfo"`
	ContactInfo struct {
		ContactID  string `json:"contactId"`
		Email      string `json:"email"`
		Subscribed bool   `json:"subscribed"`
		Suppressed bool   `json:"suppressed"`
	} `json:"contactInfo"`
	SequenceInfo struct {
		SequenceID string `json:"sequenceId"`
		Name       string `json:"name"`
		Enabled    bool   `json:"enabled"`
		Version    string `json:"version"`
	} `json:"sequenceInfo"`
	InSequence bool `json:"inSequence"`
	// Branch is the enrolment's branch, or the one a contact not in the
	// sequence would be drawn (ADDENDUM 20).
	Branch          string               `json:"branch,omitempty"`
	Timestamp       string               `json:"timestamp"`
	TemplatePreview *templatePreviewJSON `json:"templatePreview,omitempty"`
}

type templatePreviewJSON struct {
	Subject     string `json:"subject"`
	TextPreview string `json:"textPreview"`
}

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
	res, preview, err := s.enrolments.DryRunWithPreview(c.UserContext(), tenantID(c), seqID, contactID, stepID)
	if err != nil {
		return err
	}
	out := dryRunJSON{Outcome: res.Outcome, DecisionPath: res.DecisionPath, InSequence: res.Enrolment != nil,
		Branch: res.Branch, Timestamp: formatTime(time.Now())}
	out.StepInfo.StepID, out.StepInfo.TemplateID = res.Step.ID, res.Step.Template
	out.ContactInfo.ContactID, out.ContactInfo.Email = res.Contact.ID, res.Contact.Email
	out.ContactInfo.Subscribed, out.ContactInfo.Suppressed = res.Contact.Subscribed, res.Contact.Suppressed
	out.SequenceInfo.SequenceID, out.SequenceInfo.Name = res.Sequence.ID, res.Sequence.Name
	out.SequenceInfo.Enabled, out.SequenceInfo.Version = res.Sequence.Enabled, strconv.Itoa(int(res.Sequence.Version))
	if preview != nil {
		out.TemplatePreview = &templatePreviewJSON{Subject: preview.Subject, TextPreview: preview.TextPreview}
	}
	return c.JSON(out)
}

// experimentBranchJSON is one branch of a sequence experiment, or its
// holdout.
type experimentBranchJSON struct {
	Branch    string `json:"branch"`
	Entered   int64  `json:"entered"`
	Sent      int64  `json:"sent"`
	Delivered int64  `json:"delivered"`
	Opened    int64  `json:"opened"`
	Clicked   int64  `json:"clicked"`
	Converted int64  `json:"converted"`
	// ConversionRate is converted / entered (0 with none entered).
	ConversionRate float64 `json:"conversionRate"`
	// Interval is the 95% Wilson score interval of the conversion rate
	// over n = entered, [lo, hi].
	Interval []float64 `json:"interval"`
}

type goalJSON struct {
	Event  string `json:"event"`
	Within string `json:"within"`
}

// sequenceExperimentJSON is GET /api/sequences/{id}/experiment.
type sequenceExperimentJSON struct {
	// Goal is the sequence's goal; null without one (nothing converts).
	Goal     *goalJSON              `json:"goal"`
	Branches []experimentBranchJSON `json:"branches"`
	// Holdout is the control group; null when the sequence has none.
	Holdout *experimentBranchJSON `json:"holdout"`
	// Uplift is each branch's conversion rate minus the holdout's; null
	// for every branch while the holdout has no enrolment.
	Uplift map[string]*float64 `json:"uplift"`
}

func experimentBranchView(b engine.BranchStats) experimentBranchJSON {
	return experimentBranchJSON{Branch: b.Branch, Entered: b.Entered, Sent: b.Sent, Delivered: b.Delivered,
		Opened: b.Opened, Clicked: b.Clicked, Converted: b.Converted, ConversionRate: b.ConversionRate,
		Interval: []float64{b.Interval[0], b.Interval[1]}}
}

// sequenceExperiment is GET /api/sequences/{id}/experiment: the
// sequence's branches and holdout, their conversions and the uplift.
func (s *Server) sequenceExperiment(c *fiber.Ctx) error {
	seqID, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	x, err := s.enrolments.Experiment(c.UserContext(), tenantID(c), seqID)
	if err != nil {
		return err
	}
	out := sequenceExperimentJSON{Branches: make([]experimentBranchJSON, len(x.Branches)), Uplift: x.Uplift}
	if x.Goal != nil {
		out.Goal = &goalJSON{Event: x.Goal.Event, Within: x.Goal.WithinSrc}
	}
	for i, b := range x.Branches {
		out.Branches[i] = experimentBranchView(b)
	}
	if x.Holdout != nil {
		h := experimentBranchView(*x.Holdout)
		out.Holdout = &h
	}
	return c.JSON(out)
}
