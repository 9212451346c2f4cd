package templates

import (
	"context"

	"tidings/internal/page"
	"tidings/queries"
)

// List returns a page of templates, newest first, without their content.
func (s *Store) List(ctx context.Context, tenantID string, p page.Params) ([]queries.TemplateListRow, *page.Cursor, error) {
	return page.List(p, func(q page.Query) ([]queries.TemplateListRow, error) {
		return s.DB.TemplateList(ctx, queries.TemplateListParams{TenantID: tenantID, BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
	}, func(r queries.TemplateListRow) page.Cursor { return page.Cursor{Time: r.CreatedAt, ID: r.ID} })
}

// Versions returns every version of a template, newest first.
func (s *Store) Versions(ctx context.Context, tenantID, id string) ([]queries.TemplateVersionListRow, error) {
	rows, err := s.DB.TemplateVersionList(ctx, queries.TemplateVersionListParams{TenantID: tenantID, TemplateID: id})
	// A template always has version 1 (versions go with it), so no
	// versions means no template.
	if err == nil && len(rows) == 0 {
		return nil, NotFound()
	}
	return rows, err
}
