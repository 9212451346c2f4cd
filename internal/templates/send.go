package templates

import (
	"context"
	"errors"
	"strings"

	"tidings/internal/apperr"
	"tidings/internal/render"
	"tidings/internal/render/liquid"
	"tidings/internal/store"
	"tidings/queries"
)

// Rendered is one message a template made for a recipient.
type Rendered struct {
	render.Message
	// Version is the template version rendered.
	Version int32
	// Locale is the tag of the locale version used; nil for the
	// template's own (the send record's locale).
	Locale *string
	// Warnings name the variables the template reads that the context
	// lacks, which rendered empty; never nil.
	Warnings []string
}

// Reasons a message fails for its template (ADDENDUM 24): what a sequence
// or broadcast message's lastError starts with.
const (
	ReasonPartialMissing   = "partial_missing"
	ReasonMissingVariables = "missing_variables"
)

// Refused is a message its template cannot make: a partial it uses does
// not exist, or (strictVariables) the context lacks variables it reads.
// It travels inside the VALIDATION_ERROR a send answers.
type Refused struct {
	Reason string
	Names  []string
}

func (e *Refused) Error() string { return e.Reason + ": " + strings.Join(e.Names, ", ") }

// FailureMessage is what a message that failed with err records as its
// error: the reason and names of a *Refused, err's own text otherwise.
func FailureMessage(err error) string {
	var r *Refused
	if errors.As(err, &r) {
		return r.Error()
	}
	return err.Error()
}

// refuse is the VALIDATION_ERROR carrying a *Refused: field names what to
// fix, details name the partials or variables.
func refuse(reason string, names []string) error {
	var field, msg, key string
	switch reason {
	case ReasonPartialMissing:
		field, key = "template", "partials"
		msg = "uses partials that do not exist: " + strings.Join(names, ", ")
	default:
		field, key = "variables", "missingVariables"
		msg = "lack what the template reads (strictVariables): " + strings.Join(names, ", ")
	}
	e := apperr.Invalid(field, msg)
	e.Details[key] = names
	e.Details["reason"] = reason
	e.Err = &Refused{Reason: reason, Names: names}
	return e
}

// RenderCurrent renders the current version of a template row the caller
// has already read (a send reads it once for its checks and renders from
// it). The recipient's `locale` property picks a locale version
// (MatchLocale). A template over its rendering limits, or that fails at
// render time, is the caller's VALIDATION_ERROR naming the field and the
// limit; a partial that does not exist, or (strictVariables) a variable the
// context lacks, is a VALIDATION_ERROR holding a *Refused; a context that
// ended is passed on as it is.
func (r *Renderer) RenderCurrent(ctx context.Context, tenantID string, t queries.Template, rc render.Context) (Rendered, error) {
	want := ""
	if rc.Contact != nil {
		want, _ = rc.Contact.Properties["locale"].(string)
	}
	src, err := r.sourceOf(ctx, tenantID, t, MatchLocale(t.Locales, want))
	if err != nil {
		return Rendered{}, err
	}
	return r.renderSource(ctx, t, src, rc.Bindings(), true)
}

// RenderCurrentSubject is RenderCurrent with subject, when not "",
// rendered instead of the template's subject line (an A/B broadcast's
// variant, ADDENDUM 20): the same variables, the same checks.
func (r *Renderer) RenderCurrentSubject(ctx context.Context, tenantID string, t queries.Template, subject string, rc render.Context) (Rendered, error) {
	if subject == "" {
		return r.RenderCurrent(ctx, tenantID, t, rc)
	}
	want := ""
	if rc.Contact != nil {
		want, _ = rc.Contact.Properties["locale"].(string)
	}
	src, err := r.sourceOf(ctx, tenantID, t, MatchLocale(t.Locales, want))
	if err != nil {
		return Rendered{}, err
	}
	// The parsed-template cache is keyed by source: the override's text
	// is part of its key, so it never serves the template's own subject.
	src.key += "\x00subject\x00" + subject
	src.subject = subject
	return r.renderSource(ctx, t, src, rc.Bindings(), true)
}

// source is what one message renders from: the template's own version or
// a locale version.
type source struct {
	key           string
	subject, html string
	vars, missing []string
	locale        *string
}

// sourceOf is the template's own source, or its locale version tag ("":
// none; one deleted meanwhile gives the template's own).
func (r *Renderer) sourceOf(ctx context.Context, tenantID string, t queries.Template, tag string) (source, error) {
	own := source{key: cacheKey(tenantID, t.ID), subject: t.Subject, html: t.CompiledHtml,
		vars: t.RequiredVariables, missing: t.MissingPartials}
	if tag == "" {
		return own, nil
	}
	l, err := r.DB.TemplateLocaleGet(ctx, queries.TemplateLocaleGetParams{TenantID: tenantID, TemplateID: t.ID, Locale: tag})
	if store.IsNoRows(err) {
		return own, nil
	}
	if err != nil {
		return source{}, err
	}
	return source{key: own.key + "\x00" + tag, subject: l.Subject, html: l.CompiledHtml, vars: l.RequiredVariables,
		missing: l.MissingPartials, locale: &l.Locale}, nil
}

// renderSource renders src with bindings b; strict applies the template's
// strictVariables (a preview only warns).
func (r *Renderer) renderSource(ctx context.Context, t queries.Template, src source, b map[string]any, strict bool) (Rendered, error) {
	if len(src.missing) > 0 {
		return Rendered{}, refuse(ReasonPartialMissing, src.missing)
	}
	missing := render.Missing(src.vars, b)
	if strict && t.StrictVariables && len(missing) > 0 {
		return Rendered{}, refuse(ReasonMissingVariables, missing)
	}
	m, err := r.R.Render(ctx, src.key, int(t.CurrentVersion), src.subject, src.html, b)
	var limit *liquid.LimitError
	switch {
	case errors.As(err, &limit):
		return Rendered{}, apperr.Invalid(limit.Field, limit.Message())
	case err != nil && ctx.Err() != nil:
		return Rendered{}, err
	case err != nil:
		return Rendered{}, apperr.InvalidRequest("template does not render: %v", err)
	}
	warnings := make([]string, 0, len(missing))
	for _, v := range missing {
		warnings = append(warnings, "variable "+v+" is not set: it renders empty")
	}
	return Rendered{Message: m, Version: t.CurrentVersion, Locale: src.locale, Warnings: warnings}, nil
}
