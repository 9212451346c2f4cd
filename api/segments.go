package api

import (
	"encoding/json"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/segments"
	"tidings/queries"
)

const (
	membersDefault = 100
	membersMax     = 1000
)

type segmentJSON struct {
	SegmentID      string          `json:"segmentId"`
	Name           string          `json:"name"`
	Description    *string         `json:"description"`
	Rules          json.RawMessage `json:"rules"`
	Enabled        bool            `json:"enabled"`
	Live           bool            `json:"live"`
	MemberCount    int64           `json:"memberCount"`
	DependsOn      []string        `json:"dependsOn"`
	DependedBy     []string        `json:"dependedBy"`
	Version        string          `json:"version"`
	LastComputedAt *string         `json:"lastComputedAt"`
	CreatedAt      string          `json:"createdAt"`
	UpdatedAt      string          `json:"updatedAt"`
}

func segmentView(s queries.Segment, dependedBy []string) segmentJSON {
	if dependedBy == nil {
		dependedBy = []string{}
	}
	return segmentJSON{SegmentID: s.ID, Name: s.Name, Description: s.Description, Rules: s.Rules, Enabled: s.Enabled,
		Live: s.Live, MemberCount: s.MemberCount, DependsOn: s.DependsOn, DependedBy: dependedBy, Version: segments.Version(s.Version),
		LastComputedAt: formatTimePtr(s.LastComputedAt), CreatedAt: formatTime(s.CreatedAt), UpdatedAt: formatTime(s.UpdatedAt)}
}

type segmentReq struct {
	Name        Opt[string]          `json:"name" min:"1" max:"256"`
	Description Opt[string]          `json:"description" max:"2000" nullable:"true"`
	Rules       Opt[json.RawMessage] `json:"rules" doc:"The rule tree: {operator: and|or|not, conditions: [...]}, each condition a leaf {type: property|derived, field, operator, value} or {type: segment, segmentId, operator: memberOf|notMemberOf}, or another node."`
	Enabled     Opt[bool]            `json:"enabled"`
	Live        Opt[bool]            `json:"live"`
}

func (r *segmentReq) validate(create bool) (segments.Input, error) {
	var f apperr.Fields
	var in segments.Input
	in.Name = r.Name.Sent()
	in.Description, in.SetDesc = r.Description.Ptr(), r.Description.Set
	if create || r.Rules.Set {
		if !r.Rules.Set || r.Rules.Null {
			f.Add("rules", "is required")
		} else {
			in.Rules = r.Rules.V
		}
	}
	if r.Enabled.Set {
		if v, ok := r.Enabled.Value(); ok {
			in.Enabled = &v
		} else {
			f.Add("enabled", "must be a boolean")
		}
	}
	if r.Live.Set {
		if v, ok := r.Live.Value(); ok {
			in.Live = &v
		} else {
			f.Add("live", "must be a boolean")
		}
	}
	return in, f.Err()
}

func (s *Server) segmentCreate(c *fiber.Ctx) error {
	var req segmentReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate(true)
	if err != nil {
		return err
	}
	seg, err := s.segments.Create(c.UserContext(), tenantID(c), in)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(segmentView(seg, nil))
}

func (s *Server) segmentList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.segments.List(c.UserContext(), tenantID(c), p)
	if err != nil {
		return err
	}
	items := make([]segmentJSON, len(rows))
	for i, r := range rows {
		items[i] = segmentView(r.Segment, r.DependedBy)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) segmentGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	seg, by, err := s.segments.Get(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(segmentView(seg, by))
}

func (s *Server) segmentUpdate(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req segmentReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if !req.Name.Set && !req.Description.Set && !req.Rules.Set && !req.Enabled.Set && !req.Live.Set {
		return apperr.AtLeastOne("name", "description", "rules", "enabled", "live")
	}
	in, err := req.validate(false)
	if err != nil {
		return err
	}
	seg, by, err := s.segments.Update(c.UserContext(), tenantID(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(segmentView(seg, by))
}

func (s *Server) segmentDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.segments.Delete(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

func (s *Server) segmentMembers(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), membersDefault, membersMax)
	if err != nil {
		return err
	}
	m, err := s.segments.Members(c.UserContext(), tenantID(c), id, p)
	if err != nil {
		return err
	}
	computedAt := formatTimePtr(m.Segment.LastComputedAt)
	items := make([]memberJSON, len(m.Members))
	for i, mb := range m.Members {
		items[i] = memberJSON{ContactID: mb.ContactID, Email: mb.Email, IsMember: true, ComputedAt: computedAt,
			Version: m.Version}
	}
	return c.JSON(fiber.Map{"items": items, "nextCursor": s.pages.Next(m.Next)})
}

// segmentCompute runs a compute at most once per SEGMENT_COMPUTE_INTERVAL
// per segment (segments.Throttle).
func (s *Server) segmentCompute(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	res, err := s.segments.ComputeThrottled(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(computedJSON{SegmentID: id, Processed: res.Processed, Changed: res.Changed})
}

func (s *Server) contactSegments(c *fiber.Ctx) error {
	id, err := s.contactParam(c)
	if err != nil {
		return err
	}
	rows, err := s.segments.OfContact(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	items := make([]contactSegmentJSON, len(rows))
	for i, r := range rows {
		items[i] = contactSegmentJSON{SegmentID: r.ID, Name: r.Name, MemberCount: r.MemberCount, ComputedAt: formatTimePtr(r.LastComputedAt)}
	}
	return c.JSON(whole(items))
}

type memberJSON struct {
	ContactID  string  `json:"contactId"`
	Email      string  `json:"email"`
	IsMember   bool    `json:"isMember"`
	ComputedAt *string `json:"computedAt"`
	Version    string  `json:"version"`
}

type computedJSON struct {
	SegmentID string `json:"segmentId"`
	Processed int64  `json:"processed"`
	Changed   int64  `json:"changed"`
}

// contactSegmentJSON is a segment the contact is a member of.
type contactSegmentJSON struct {
	SegmentID   string  `json:"segmentId"`
	Name        string  `json:"name"`
	MemberCount int64   `json:"memberCount"`
	ComputedAt  *string `json:"computedAt"`
}

// explainJSON is GET /api/segments/{id}/explain: the segment's rules judged
// on the contact's current data, each node with its result and each leaf
// with the contact's value.
type explainJSON struct {
	SegmentID      string         `json:"segmentId"`
	ContactID      string         `json:"contactId"`
	IsMember       bool           `json:"isMember"`
	EvaluatedAt    string         `json:"evaluatedAt"`
	StoredIsMember bool           `json:"storedIsMember"`
	Rules          map[string]any `json:"rules"`
}

func (s *Server) segmentExplain(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	contactID := c.Query("contactId")
	if contactID == "" {
		return apperr.Invalid("contactId", "is required")
	}
	e, err := s.segments.Explain(c.UserContext(), tenantID(c), id, contactID)
	if err != nil {
		return err
	}
	return c.JSON(explainJSON{SegmentID: e.SegmentID, ContactID: e.ContactID, IsMember: e.IsMember,
		EvaluatedAt: formatTime(e.EvaluatedAt), StoredIsMember: e.StoredIsMember, Rules: e.Rules})
}
