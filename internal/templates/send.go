package templates

import (
	"context"
	"errors"

	"tidings/internal/apperr"
	"tidings/internal/render"
	"tidings/internal/render/liquid"
	"tidings/queries"
)

// RenderCurrent renders the current version of a template row the caller
// has already read (a transactional send reads it once for its checks and
// renders from it, without a second read of the version row). A template
// over its rendering limits, or that fails at render time, is the caller's
// VALIDATION_ERROR naming the field and the limit; a context that ended is
// passed on as it is.
func (r *Renderer) RenderCurrent(ctx context.Context, tenantID string, t queries.Template, rc render.Context) (render.Message, error) {
	m, err := r.R.Render(ctx, cacheKey(tenantID, t.ID), int(t.CurrentVersion), t.Subject, t.CompiledHtml, rc.Bindings())
	var limit *liquid.LimitError
	switch {
	case errors.As(err, &limit):
		return m, apperr.Invalid(limit.Field, limit.Message())
	case err != nil && ctx.Err() != nil:
		return m, err
	case err != nil:
		return m, apperr.InvalidRequest("template does not render: %v", err)
	}
	return m, nil
}
