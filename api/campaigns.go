package api

import (
	"context"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/campaigns"
	"tidings/internal/page"
	"tidings/queries"
)

type campaignJSON struct {
	CampaignID  string   `json:"campaignId"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Status      string   `json:"status"`
	SequenceIDs []string `json:"sequenceIds"`
	TemplateIDs []string `json:"templateIds"`
	SegmentID   *string  `json:"segmentId"`
	Goals       []string `json:"goals"`
	StartedAt   *string  `json:"startedAt,omitempty"`
	CreatedAt   string   `json:"createdAt"`
	UpdatedAt   string   `json:"updatedAt"`
}

func campaignView(c queries.Campaign) campaignJSON {
	return campaignJSON{CampaignID: c.ID, Name: c.Name, Description: c.Description, Status: c.Status,
		SequenceIDs: c.SequenceIds, TemplateIDs: c.TemplateIds, SegmentID: c.SegmentID, Goals: c.Goals,
		StartedAt: formatTimePtr(c.StartedAt), CreatedAt: formatTime(c.CreatedAt), UpdatedAt: formatTime(c.UpdatedAt)}
}

type campaignReq struct {
	Name        Opt[string]   `json:"name" min:"1" max:"256"`
	Description Opt[string]   `json:"description" max:"2000"`
	Status      Opt[string]   `json:"status" enum:"draft,active,paused,completed,archived"`
	SequenceIDs Opt[[]string] `json:"sequenceIds" max:"100"`
	TemplateIDs Opt[[]string] `json:"templateIds" max:"100"`
	SegmentID   Opt[string]   `json:"segmentId" nullable:"true" doc:"The target segment; null clears it."`
	Goals       Opt[[]string] `json:"goals" max:"100" doc:"Goal event names (replaces the list)."`
}

// validate passes what was sent to the domain, which judges it; a null name
// or status arrives as "" and is refused there. Only a null description has
// no value to judge.
func (r campaignReq) validate() (campaigns.Input, error) {
	if r.Description.Set && r.Description.Null {
		return campaigns.Input{}, apperr.Invalid("description", "must be a string of at most 2000 characters")
	}
	return campaigns.Input{Name: r.Name.Sent(), Description: r.Description.Ptr(), Status: r.Status.Sent(),
		SequenceIDs: r.SequenceIDs.V, TemplateIDs: r.TemplateIDs.V,
		SegmentID: r.SegmentID.Ptr(), SetSegment: r.SegmentID.Set, Goals: r.Goals.V, SetGoals: r.Goals.Set}, nil
}

func (s *Server) campaignCreate(c *fiber.Ctx) error {
	var req campaignReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate()
	if err != nil {
		return err
	}
	cp, err := s.campaigns.Create(c.UserContext(), tenantID(c), in)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(campaignView(cp))
}

func (s *Server) campaignList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.campaigns.List(c.UserContext(), tenantID(c), c.Query("status"), p)
	if err != nil {
		return err
	}
	items := make([]campaignJSON, len(rows))
	for i, r := range rows {
		items[i] = campaignView(r)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) campaignGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "campaignId")
	if err != nil {
		return err
	}
	cp, err := s.campaigns.Get(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(campaignView(cp))
}

func (s *Server) campaignUpdate(c *fiber.Ctx) error {
	id, err := pathParam(c, "campaignId")
	if err != nil {
		return err
	}
	var req campaignReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate()
	if err != nil {
		return err
	}
	cp, err := s.campaigns.Update(c.UserContext(), tenantID(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(campaignView(cp))
}

func (s *Server) campaignDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "campaignId")
	if err != nil {
		return err
	}
	if err := s.campaigns.Delete(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// campaignAssoc serves the association routes: op adds or removes the
// sequence or template named by :ref.
func campaignAssoc(op func(ctx context.Context, tenantID, id, ref string) (queries.Campaign, error)) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := pathParam(c, "campaignId")
		if err != nil {
			return err
		}
		ref, err := pathParam(c, "ref")
		if err != nil {
			return err
		}
		cp, err := op(c.UserContext(), tenantID(c), id, ref)
		if err != nil {
			return err
		}
		return c.JSON(campaignView(cp))
	}
}
