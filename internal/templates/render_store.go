package templates

import (
	"context"
	"fmt"

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
// renderer a send uses; locale ("" for none) picks a locale version as a
// contact's locale property does, and a malformed one is
// VALIDATION_ERROR. Its warnings name the variables the template reads
// that the variables do not hold, which render empty (strictVariables
// refuses only sends). A partial that does not exist is VALIDATION_ERROR
// naming it.
func (r *Renderer) Preview(ctx context.Context, tenantID, id string, variables map[string]any, locale string) (Rendered, error) {
	if locale != "" {
		if _, err := CanonicalLocale("locale", locale); err != nil {
			return Rendered{}, err
		}
	}
	t, err := r.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: tenantID, ID: id})
	if store.IsNoRows(err) {
		return Rendered{}, NotFound()
	}
	if err != nil {
		return Rendered{}, err
	}
	src, err := r.sourceOf(ctx, tenantID, t, MatchLocale(t.Locales, locale))
	if err != nil {
		return Rendered{}, err
	}
	return r.renderSource(ctx, t, src, render.BindingsForPreview(variables), false)
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
