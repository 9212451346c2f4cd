package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/queries"
)

var campaignStatuses = []string{"draft", "active", "paused", "completed", "archived"}

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
	Name        Opt[string]   `json:"name"`
	Description Opt[string]   `json:"description"`
	Status      Opt[string]   `json:"status"`
	SequenceIDs Opt[[]string] `json:"sequenceIds"`
	TemplateIDs Opt[[]string] `json:"templateIds"`
	SegmentID   Opt[string]   `json:"segmentId"`
	Goals       Opt[[]string] `json:"goals"`
}

// check validates the fields present; create says whether name is required.
func (r *campaignReq) check(f *apperr.Fields, create bool) {
	if create || r.Name.Set {
		n := utf8.RuneCountInString(strings.TrimSpace(r.Name.V))
		f.Check(r.Name.Set && !r.Name.Null && n >= 1 && n <= 256, "name", "is required, 1-256 characters")
	}
	if r.Description.Set {
		f.Check(!r.Description.Null && utf8.RuneCountInString(r.Description.V) <= 2000, "description", "must be a string of at most 2000 characters")
	}
	if r.Status.Set {
		f.Check(slices.Contains(campaignStatuses, r.Status.V), "status", "must be one of draft, active, paused, completed, archived")
	}
	if r.Goals.Set {
		for _, g := range r.Goals.V {
			if strings.TrimSpace(g) == "" {
				f.Add("goals", "goal event names must not be empty")
				break
			}
		}
	}
}

// checkRefs answers VALIDATION_ERROR for referenced ids the tenant lacks.
func (s *Server) checkRefs(ctx context.Context, tid string, f *apperr.Fields, r *campaignReq) error {
	if ids := r.SequenceIDs.V; len(ids) > 0 {
		found, err := s.db.SequencesExisting(ctx, queries.SequencesExistingParams{TenantID: tid, Ids: ids})
		if err != nil {
			return err
		}
		for _, id := range ids {
			f.Check(slices.Contains(found, id), "sequenceIds", "unknown sequence "+id)
		}
	}
	if ids := r.TemplateIDs.V; len(ids) > 0 {
		found, err := s.db.TemplatesExisting(ctx, queries.TemplatesExistingParams{TenantID: tid, Ids: ids})
		if err != nil {
			return err
		}
		for _, id := range ids {
			f.Check(slices.Contains(found, id), "templateIds", "unknown template "+id)
		}
	}
	if id, ok := r.SegmentID.Value(); ok {
		exists, err := s.db.SegmentExists(ctx, queries.SegmentExistsParams{TenantID: tid, ID: id})
		if err != nil {
			return err
		}
		f.Check(exists, "segmentId", "unknown segment "+id)
	}
	return nil
}

func uniq(xs []string) []string {
	out := []string{}
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func (s *Server) campaignCreate(c *fiber.Ctx) error {
	var req campaignReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var f apperr.Fields
	req.check(&f, true)
	ctx, tid := c.UserContext(), tenantID(c)
	if err := s.checkRefs(ctx, tid, &f, &req); err != nil {
		return err
	}
	if err := f.Err(); err != nil {
		return err
	}
	cp, err := s.db.CampaignInsert(ctx, queries.CampaignInsertParams{TenantID: tid, ID: ids.New(ids.Campaign),
		Name: strings.TrimSpace(req.Name.V), Description: req.Description.V, SegmentID: req.SegmentID.Ptr(), Goals: uniq(req.Goals.V),
		SequenceIds: uniq(req.SequenceIDs.V), TemplateIds: uniq(req.TemplateIDs.V)})
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(campaignView(cp))
}

func (s *Server) campaignList(c *fiber.Ctx) error {
	p, err := page.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	arg := queries.CampaignListParams{TenantID: tenantID(c), Lim: int32(p.Limit + 1)}
	if st := c.Query("status"); st != "" {
		if !slices.Contains(campaignStatuses, st) {
			return apperr.Invalid("status", "must be one of draft, active, paused, completed, archived")
		}
		arg.Status = &st
	}
	arg.BeforeTime, arg.BeforeID = page.Before(p.After, page.Far)
	rows, err := s.db.CampaignList(c.UserContext(), arg)
	if err != nil {
		return err
	}
	rows, next := page.Trim(rows, p.Limit, func(r queries.Campaign) page.Cursor { return page.Cursor{Time: r.CreatedAt, ID: r.ID} })
	items := make([]campaignJSON, len(rows))
	for i, r := range rows {
		items[i] = campaignView(r)
	}
	return c.JSON(fiber.Map{"items": items, "nextCursor": next})
}

func campaignNotFound() error { return apperr.NotFound("NOT_FOUND", "campaign") }

func (s *Server) campaignGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "campaignId")
	if err != nil {
		return err
	}
	cp, err := s.db.CampaignGet(c.UserContext(), queries.CampaignGetParams{TenantID: tenantID(c), ID: id})
	if err != nil {
		return store.NotFound(err, "NOT_FOUND", "campaign")
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
	if !req.Name.Set && !req.Description.Set && !req.Status.Set && !req.SegmentID.Set && !req.Goals.Set {
		return apperr.InvalidRequest("at least one of name, description, status, segmentId, goals is required")
	}
	ctx, tid := c.UserContext(), tenantID(c)
	var f apperr.Fields
	req.check(&f, false)
	// Associations change only through their own endpoints.
	req.SequenceIDs, req.TemplateIDs = Opt[[]string]{}, Opt[[]string]{}
	if err := s.checkRefs(ctx, tid, &f, &req); err != nil {
		return err
	}
	if err := f.Err(); err != nil {
		return err
	}
	arg := queries.CampaignUpdateParams{TenantID: tid, ID: id, SetSegment: req.SegmentID.Set, SetGoals: req.Goals.Set,
		Goals: uniq(req.Goals.V)}
	if v, ok := req.Name.Value(); ok {
		v = strings.TrimSpace(v)
		arg.Name = &v
	}
	arg.Description, arg.Status, arg.SegmentID = req.Description.Ptr(), req.Status.Ptr(), req.SegmentID.Ptr()
	cp, err := s.db.CampaignUpdate(ctx, arg)
	if err != nil {
		return store.NotFound(err, "NOT_FOUND", "campaign")
	}
	return c.JSON(campaignView(cp))
}

func (s *Server) campaignDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "campaignId")
	if err != nil {
		return err
	}
	n, err := s.db.CampaignDelete(c.UserContext(), queries.CampaignDeleteParams{TenantID: tenantID(c), ID: id})
	if err != nil {
		return err
	}
	if n == 0 {
		return campaignNotFound()
	}
	return c.SendStatus(http.StatusNoContent)
}

// campaignAssoc adds or removes a sequence or template association.
func (s *Server) campaignAssoc(kind string, add bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		cid, err := pathParam(c, "campaignId")
		if err != nil {
			return err
		}
		ref, err := pathParam(c, "ref")
		if err != nil {
			return err
		}
		ctx, tid := c.UserContext(), tenantID(c)
		if add {
			// An unknown campaign is reported before an unknown sequence or
			// template; a removal's UPDATE ... RETURNING answers it alone.
			if _, err := s.db.CampaignGet(ctx, queries.CampaignGetParams{TenantID: tid, ID: cid}); err != nil {
				return store.NotFound(err, "NOT_FOUND", "campaign")
			}
		}
		var cp queries.Campaign
		var exists bool
		switch {
		case kind == "sequence" && add:
			if exists, err = s.db.SequenceExists(ctx, queries.SequenceExistsParams{TenantID: tid, ID: ref}); err != nil {
				return err
			}
			if !exists {
				return apperr.NotFound("SEQUENCE_NOT_FOUND", "sequence")
			}
			cp, err = s.db.CampaignAddSequence(ctx, queries.CampaignAddSequenceParams{TenantID: tid, ID: cid, SequenceID: ref})
		case kind == "sequence":
			cp, err = s.db.CampaignRemoveSequence(ctx, queries.CampaignRemoveSequenceParams{TenantID: tid, ID: cid, SequenceID: ref})
		case add:
			if exists, err = s.db.TemplateExists(ctx, queries.TemplateExistsParams{TenantID: tid, ID: ref}); err != nil {
				return err
			}
			if !exists {
				return apperr.NotFound("TEMPLATE_NOT_FOUND", "template")
			}
			cp, err = s.db.CampaignAddTemplate(ctx, queries.CampaignAddTemplateParams{TenantID: tid, ID: cid, TemplateID: ref})
		default:
			cp, err = s.db.CampaignRemoveTemplate(ctx, queries.CampaignRemoveTemplateParams{TenantID: tid, ID: cid, TemplateID: ref})
		}
		if err != nil {
			return store.NotFound(err, "NOT_FOUND", "campaign")
		}
		return c.JSON(campaignView(cp))
	}
}
