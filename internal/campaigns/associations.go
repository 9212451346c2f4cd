package campaigns

import (
	"context"

	"tidings/internal/apperr"
	"tidings/queries"
)

// AddSequence associates sequence seqID; adding it twice keeps one.
func (s *Store) AddSequence(ctx context.Context, tenantID, id, seqID string) (queries.Campaign, error) {
	return s.associate(ctx, tenantID, id, func() (bool, error) {
		return s.DB.SequenceExists(ctx, queries.SequenceExistsParams{TenantID: tenantID, ID: seqID})
	}, apperr.NotFound("SEQUENCE_NOT_FOUND", "sequence"), func(q *queries.Queries) (queries.Campaign, error) {
		return q.CampaignAddSequence(ctx, queries.CampaignAddSequenceParams{TenantID: tenantID, ID: id, SequenceID: seqID})
	})
}

// AddTemplate associates template tplID; adding it twice keeps one.
func (s *Store) AddTemplate(ctx context.Context, tenantID, id, tplID string) (queries.Campaign, error) {
	return s.associate(ctx, tenantID, id, func() (bool, error) {
		return s.DB.TemplateExists(ctx, queries.TemplateExistsParams{TenantID: tenantID, ID: tplID})
	}, apperr.NotFound("TEMPLATE_NOT_FOUND", "template"), func(q *queries.Queries) (queries.Campaign, error) {
		return q.CampaignAddTemplate(ctx, queries.CampaignAddTemplateParams{TenantID: tenantID, ID: id, TemplateID: tplID})
	})
}

// associate adds a reference: an unknown campaign is reported before an
// unknown sequence or template (missing).
func (s *Store) associate(ctx context.Context, tenantID, id string, exists func() (bool, error), missing error,
	add func(q *queries.Queries) (queries.Campaign, error)) (queries.Campaign, error) {
	if _, err := s.Get(ctx, tenantID, id); err != nil {
		return queries.Campaign{}, err
	}
	ok, err := exists()
	if err != nil {
		return queries.Campaign{}, err
	}
	if !ok {
		return queries.Campaign{}, missing
	}
	cp, err := s.write(ctx, add)
	return cp, notFound(err)
}

// RemoveSequence drops the association with seqID, if there is one.
func (s *Store) RemoveSequence(ctx context.Context, tenantID, id, seqID string) (queries.Campaign, error) {
	cp, err := s.write(ctx, func(q *queries.Queries) (queries.Campaign, error) {
		return q.CampaignRemoveSequence(ctx, queries.CampaignRemoveSequenceParams{TenantID: tenantID, ID: id, SequenceID: seqID})
	})
	return cp, notFound(err)
}

// RemoveTemplate drops the association with tplID, if there is one.
func (s *Store) RemoveTemplate(ctx context.Context, tenantID, id, tplID string) (queries.Campaign, error) {
	cp, err := s.write(ctx, func(q *queries.Queries) (queries.Campaign, error) {
		return q.CampaignRemoveTemplate(ctx, queries.CampaignRemoveTemplateParams{TenantID: tenantID, ID: id, TemplateID: tplID})
	})
	return cp, notFound(err)
}

// write runs one statement that changes a campaign in a transaction of its
// own, which also writes the request's audit entry (store.Audit).
func (s *Store) write(ctx context.Context, fn func(q *queries.Queries) (queries.Campaign, error)) (queries.Campaign, error) {
	var cp queries.Campaign
	err := s.DB.Tx(ctx, func(q *queries.Queries) error {
		var err error
		cp, err = fn(q)
		return err
	})
	return cp, err
}
