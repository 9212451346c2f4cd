// Package campaigns keeps campaigns: groups of sequences and templates
// aimed at a segment, with a status any value of which may follow any
// other. It owns the campaign rules: field limits, that every referenced
// sequence, template and segment exists in the tenant, startedAt on the
// first activation (in the UPDATE), and associations kept without
// duplicates.
package campaigns

import (
	"context"
	"slices"
	"strings"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/queries"
)

// Statuses are the campaign states, in the order API.md lists them.
var Statuses = []string{"draft", "active", "paused", "completed", "archived"}

const statusMsg = "must be one of draft, active, paused, completed, archived"

// Store keeps campaigns.
type Store struct {
	DB *store.DB
}

// NotFound is the campaign 404.
func NotFound() *apperr.Error { return apperr.NotFound("NOT_FOUND", "campaign") }

func notFound(err error) error { return apperr.Specific(err, apperr.KindNotFound, NotFound()) }

// Input is a create or update; nil fields were not sent.
type Input struct {
	Name        *string
	Description *string
	Status      *string
	// SequenceIDs and TemplateIDs are taken on create only; afterwards
	// associations change through AddSequence and the like.
	SequenceIDs []string
	TemplateIDs []string
	SegmentID   *string
	SetSegment  bool // segmentId sent; a nil SegmentID clears it
	Goals       []string
	SetGoals    bool
}

// Bounds of a campaign's lists (issue 11).
const (
	maxList = 100
	maxGoal = 256 // characters, as event names
)

// check validates the fields present; create says whether name is required.
func (in *Input) check(f *apperr.Fields, create bool) {
	if create || in.Name != nil {
		var n int
		if in.Name != nil {
			name := strings.TrimSpace(*in.Name)
			in.Name, n = &name, utf8.RuneCountInString(name)
		}
		f.Check(n >= 1 && n <= 256, "name", "is required, 1-256 characters")
	}
	if in.Description != nil {
		f.Check(utf8.RuneCountInString(*in.Description) <= 2000, "description", "must be a string of at most 2000 characters")
	}
	if in.Status != nil {
		f.Check(slices.Contains(Statuses, *in.Status), "status", statusMsg)
	}
	f.Check(!slices.ContainsFunc(in.Goals, func(g string) bool { return strings.TrimSpace(g) == "" }),
		"goals", "must not contain an empty event name")
	f.Check(len(in.Goals) <= maxList, "goals", "must hold at most 100 event names")
	f.Check(!slices.ContainsFunc(in.Goals, func(g string) bool { return utf8.RuneCountInString(g) > maxGoal }),
		"goals", "must hold event names of at most 256 characters")
	f.Check(len(in.SequenceIDs) <= maxList, "sequenceIds", "must hold at most 100 ids")
	f.Check(len(in.TemplateIDs) <= maxList, "templateIds", "must hold at most 100 ids")
	in.Goals, in.SequenceIDs, in.TemplateIDs = uniq(in.Goals), uniq(in.SequenceIDs), uniq(in.TemplateIDs)
}

// checkRefs notes in f every referenced id the tenant lacks.
func (s *Store) checkRefs(ctx context.Context, tenantID string, f *apperr.Fields, in Input) error {
	if len(in.SequenceIDs) > 0 {
		found, err := s.DB.SequencesExisting(ctx, queries.SequencesExistingParams{TenantID: tenantID, Ids: in.SequenceIDs})
		if err != nil {
			return err
		}
		missing(f, "sequenceIds", "unknown sequence ", in.SequenceIDs, found)
	}
	if len(in.TemplateIDs) > 0 {
		found, err := s.DB.TemplatesExisting(ctx, queries.TemplatesExistingParams{TenantID: tenantID, Ids: in.TemplateIDs})
		if err != nil {
			return err
		}
		missing(f, "templateIds", "unknown template ", in.TemplateIDs, found)
	}
	if id := in.SegmentID; id != nil {
		exists, err := s.DB.SegmentExists(ctx, queries.SegmentExistsParams{TenantID: tenantID, ID: *id})
		if err != nil {
			return err
		}
		f.Check(exists, "segmentId", "unknown segment "+*id)
	}
	return nil
}

func missing(f *apperr.Fields, field, msg string, want, found []string) {
	for _, id := range want {
		f.Check(slices.Contains(found, id), field, msg+id)
	}
}

// validate checks the fields and the references together, so one answer
// names every problem.
func (s *Store) validate(ctx context.Context, tenantID string, in *Input, create bool) error {
	var f apperr.Fields
	in.check(&f, create)
	if err := s.checkRefs(ctx, tenantID, &f, *in); err != nil {
		return err
	}
	return f.Err()
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

// Create adds a draft campaign. A status given on create is checked but
// not applied: every campaign starts as a draft.
func (s *Store) Create(ctx context.Context, tenantID string, in Input) (queries.Campaign, error) {
	if err := s.validate(ctx, tenantID, &in, true); err != nil {
		return queries.Campaign{}, err
	}
	var cp queries.Campaign
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		var err error
		cp, err = q.CampaignInsert(ctx, queries.CampaignInsertParams{TenantID: tenantID, ID: ids.New(ids.Campaign),
			Name: *in.Name, Description: deref(in.Description), SegmentID: in.SegmentID, Goals: in.Goals,
			SequenceIds: in.SequenceIDs, TemplateIds: in.TemplateIDs})
		q.AuditResource(cp.ID)
		return err
	})
	return cp, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Get returns one campaign.
func (s *Store) Get(ctx context.Context, tenantID, id string) (queries.Campaign, error) {
	cp, err := s.DB.CampaignGet(ctx, queries.CampaignGetParams{TenantID: tenantID, ID: id})
	return cp, notFound(err)
}

// List returns a page of campaigns, newest first, of one status when
// status is not "".
func (s *Store) List(ctx context.Context, tenantID, status string, p page.Params) ([]queries.Campaign, *page.Cursor, error) {
	arg := queries.CampaignListParams{TenantID: tenantID}
	if status != "" {
		if !slices.Contains(Statuses, status) {
			return nil, nil, apperr.Invalid("status", statusMsg)
		}
		arg.Status = &status
	}
	return page.List(p, func(q page.Query) ([]queries.Campaign, error) {
		arg.BeforeTime, arg.BeforeID, arg.Lim = q.BeforeTime, q.BeforeID, q.Limit
		return s.DB.CampaignList(ctx, arg)
	}, func(c queries.Campaign) page.Cursor { return page.Cursor{Time: c.CreatedAt, ID: c.ID} })
}

// Update changes the fields given; sequence and template ids are ignored
// (they have their own calls). The first move to active sets startedAt.
func (s *Store) Update(ctx context.Context, tenantID, id string, in Input) (queries.Campaign, error) {
	in.SequenceIDs, in.TemplateIDs = nil, nil
	if in.Name == nil && in.Description == nil && in.Status == nil && !in.SetSegment && !in.SetGoals {
		return queries.Campaign{}, apperr.AtLeastOne("name", "description", "status", "segmentId", "goals")
	}
	if err := s.validate(ctx, tenantID, &in, false); err != nil {
		return queries.Campaign{}, err
	}
	cp, err := s.write(ctx, func(q *queries.Queries) (queries.Campaign, error) {
		return q.CampaignUpdate(ctx, queries.CampaignUpdateParams{TenantID: tenantID, ID: id,
			Name: in.Name, Description: in.Description, Status: in.Status,
			SetSegment: in.SetSegment, SegmentID: in.SegmentID, SetGoals: in.SetGoals, Goals: in.Goals})
	})
	return cp, notFound(err)
}

// Delete removes a campaign; its sequences, templates and segment stay.
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	return s.DB.Tx(ctx, func(q *queries.Queries) error { // with the request's audit entry
		n, err := q.CampaignDelete(ctx, queries.CampaignDeleteParams{TenantID: tenantID, ID: id})
		if err == nil && n == 0 {
			return NotFound()
		}
		return err
	})
}
