package templates

import (
	"context"
	"errors"
	"fmt"

	"tidings/internal/apperr"
	"tidings/internal/render"
	"tidings/internal/store"
	"tidings/queries"
)

// Renderer renders stored template versions; one per process, shared by
// preview and sends, so each version is parsed once.
type Renderer struct {
	DB *store.DB
	R  *render.Renderer
}

func cacheKey(tenantID, templateID string) string { return tenantID + "\x00" + templateID }

// Preview renders the current version with the preview bindings
// (variables.contact and variables.event used as given), through the same
// renderer a send uses.
func (r *Renderer) Preview(ctx context.Context, tenantID, id string, variables map[string]any) (render.Message, int32, error) {
	t, err := r.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: tenantID, ID: id})
	if store.IsNoRows(err) {
		return render.Message{}, 0, NotFound()
	}
	if err != nil {
		return render.Message{}, 0, err
	}
	m, err := r.R.Render(ctx, cacheKey(tenantID, id), int(t.CurrentVersion), t.Subject, t.CompiledHtml, render.BindingsForPreview(variables))
	var limit *render.LimitError
	switch {
	case errors.As(err, &limit):
		return m, 0, apperr.Invalid(limit.Field, limit.Message())
	case err != nil && ctx.Err() != nil:
		return m, 0, err // the request ended, not the template's fault
	case err != nil:
		return m, 0, apperr.InvalidRequest("template does not render: %v", err)
	}
	return m, t.CurrentVersion, nil
}

// Render renders one version of a template for a recipient: the call the
// delivery and sequence capabilities make. version 0 means the current one.
// A template over its rendering limits returns an error matching
// render.ErrBudget, holding a *render.LimitError: a send answers it as
// VALIDATION_ERROR, a scheduled send fails with it as lastError, and a
// retry does not help.
func (r *Renderer) Render(ctx context.Context, tenantID, id string, version int32, rc render.Context) (render.Message, int32, error) {
	if version == 0 {
		t, err := r.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: tenantID, ID: id})
		if store.IsNoRows(err) {
			return render.Message{}, 0, NotFound()
		}
		if err != nil {
			return render.Message{}, 0, err
		}
		version = t.CurrentVersion
	}
	v, err := r.DB.TemplateVersionGet(ctx, queries.TemplateVersionGetParams{TenantID: tenantID, TemplateID: id, Version: version})
	if store.IsNoRows(err) {
		return render.Message{}, 0, NotFound()
	}
	if err != nil {
		return render.Message{}, 0, err
	}
	m, err := r.R.Render(ctx, cacheKey(tenantID, id), int(version), v.Subject, v.CompiledHtml, rc.Bindings())
	if err != nil {
		return m, 0, fmt.Errorf("render template %s v%d: %w", id, version, err)
	}
	return m, version, nil
}
