package templates

import (
	"context"
	"errors"
	"fmt"

	"tidings/internal/apperr"
	"tidings/internal/render"
	"tidings/internal/render/liquid"
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
// Preview also returns warnings: one per variable the template reads that
// the variables do not hold, which renders empty (a send renders the same,
// silently).
func (r *Renderer) Preview(ctx context.Context, tenantID, id string, variables map[string]any) (render.Message, int32, []string, error) {
	t, err := r.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: tenantID, ID: id})
	if store.IsNoRows(err) {
		return render.Message{}, 0, nil, NotFound()
	}
	if err != nil {
		return render.Message{}, 0, nil, err
	}
	b := render.BindingsForPreview(variables)
	m, err := r.R.Render(ctx, cacheKey(tenantID, id), int(t.CurrentVersion), t.Subject, t.CompiledHtml, b)
	var limit *liquid.LimitError
	switch {
	case errors.As(err, &limit):
		return m, 0, nil, apperr.Invalid(limit.Field, limit.Message())
	case err != nil && ctx.Err() != nil:
		return m, 0, nil, err // the request ended, not the template's fault
	case err != nil:
		return m, 0, nil, apperr.InvalidRequest("template does not render: %v", err)
	}
	warnings := []string{}
	for _, v := range render.Missing(t.RequiredVariables, b) {
		warnings = append(warnings, "variable "+v+" is not set: it renders empty")
	}
	return m, t.CurrentVersion, warnings, nil
}

// Render renders one version of a template for a recipient: the call the
// delivery and sequence capabilities make. version 0 means the current one.
// A template over its rendering limits returns an error matching
// liquid.ErrBudget, holding a *liquid.LimitError: a send answers it as
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
