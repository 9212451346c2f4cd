package templates

import (
	"context"
	"strings"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/render"
	"tidings/internal/render/sanitize"
	"tidings/internal/store"
	"tidings/queries"
)

// PartialNotFound is the partial 404.
func PartialNotFound() *apperr.Error { return apperr.NotFound("NOT_FOUND", "partial") }

// PutPartial creates or replaces partial id (ADDENDUM 24). Its content is
// a fragment of MJML or HTML with Liquid, sanitised as any content; MJML
// in it must be well formed. Every template and locale version that
// reaches it (as layout or include, directly or through other partials) is
// compiled again in the same transaction, so the change takes effect at
// their next message; a change that one of them cannot compile with is
// refused, naming it. A body equal to the stored one changes nothing.
func (s *Store) PutPartial(ctx context.Context, tenantID, id, content string) (p queries.Partial, created bool, err error) {
	var f apperr.Fields
	f.Check(len(content) > 0, "content", "must not be empty")
	f.Check(len(content) <= MaxContentBytes, "content", "must be at most 524288 bytes (512 KiB)")
	if err := f.Err(); err != nil {
		return p, false, err
	}
	own, refs, err := partialSource(content)
	if err != nil {
		return p, false, err
	}
	if cur, err := s.DB.PartialGet(ctx, queries.PartialGetParams{TenantID: tenantID, ID: id}); err == nil && cur.Content == own {
		return cur, false, nil // the same body again: nothing to compile
	}
	compiler := newMemo(s.Compiler)
	// Compile the dependents before the transaction (MJML is slow and must
	// not run while rows are locked); inside, only what changed meanwhile
	// compiles again.
	if err := s.recompileDependents(ctx, s.DB.Queries, compiler, tenantID, id, own, refs, false); err != nil {
		return p, false, err
	}
	err = s.DB.Tx(ctx, func(q *queries.Queries) error {
		if err := q.TemplateSourcesLock(ctx, tenantID); err != nil {
			return err
		}
		row, err := q.PartialUpsert(ctx, queries.PartialUpsertParams{TenantID: tenantID, ID: id, Content: own, Refs: refs})
		if store.IsNoRows(err) { // unchanged
			p, err = q.PartialGet(ctx, queries.PartialGetParams{TenantID: tenantID, ID: id})
			return err
		}
		if err != nil {
			return err
		}
		p = queries.Partial{TenantID: row.TenantID, ID: row.ID, Content: row.Content, Refs: row.Refs, Version: row.Version,
			CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}
		created = row.Created
		return s.recompileDependents(ctx, q, compiler, tenantID, id, own, refs, true)
	})
	return p, created, err
}

// partialSource sanitises a partial's content and checks what can be
// checked of it alone: MJML well formed, includes naming partials, Liquid
// that parses. It returns the content to store and the partials it
// includes.
func partialSource(content string) (string, []string, error) {
	clean := sanitize.HTML
	if sanitize.IsMJML(content) || hasMJMLTag(content) {
		clean = sanitize.MJML
		if msgs := render.WellFormed(content); len(msgs) > 0 {
			return "", nil, mjmlError(msgs)
		}
	}
	own, _ := clean(content)
	refs, err := render.Includes(own)
	if err != nil {
		return "", nil, apperr.Invalid("content", err.Error())
	}
	// Its Liquid alone, includes left out ({{ content }} of a layout is
	// an ordinary output here).
	comp, err := render.Compose(own, "", nil)
	if err != nil {
		return "", nil, apperr.Invalid("content", err.Error())
	}
	if _, err := liquidVars("", comp.Source); err != nil {
		return "", nil, err
	}
	return own, nonNil(refs), nil
}

// recompileDependents compiles, with partial id as content, every template
// and locale version that reaches it, and when write is set stores the
// results through q. A cycle the partial would close is refused.
func (s *Store) recompileDependents(ctx context.Context, q *queries.Queries, c Compiler, tenantID, id, content string, refs []string, write bool) error {
	ps, err := loadPartials(ctx, q, tenantID)
	if err != nil {
		return err
	}
	ps.content[id], ps.refs[id] = content, refs
	if _, err := render.Compose(content, "", map[string]string{}); err != nil {
		return apperr.Invalid("content", err.Error())
	}
	// A cycle through this partial, or nesting too deep.
	if err := checkIncludes(ps, id); err != nil {
		return err
	}
	tmpls, err := q.TemplateRefsList(ctx, tenantID)
	if err != nil {
		return err
	}
	for _, t := range tmpls {
		if !ps.reaches(t.Refs, id) {
			continue
		}
		b, err := build(ctx, c, ps, t.Subject, t.Content, t.Layout)
		if err != nil {
			if isInvalid(err) {
				return dependentError("template "+t.ID, err)
			}
			return err
		}
		if write {
			if err := q.TemplateRecompiled(ctx, queries.TemplateRecompiledParams{TenantID: tenantID, ID: t.ID,
				CompiledHtml: b.HTML, RequiredVariables: nonNil(b.Vars), MissingPartials: nonNil(b.Missing)}); err != nil {
				return err
			}
		}
	}
	locales, err := q.TemplateLocaleRefsList(ctx, tenantID)
	if err != nil {
		return err
	}
	for _, l := range locales {
		if !ps.reaches(l.Refs, id) {
			continue
		}
		b, err := build(ctx, c, ps, l.Subject, l.Content, l.Layout)
		if err != nil {
			if isInvalid(err) {
				return dependentError("template "+l.TemplateID+" locale "+l.Locale, err)
			}
			return err
		}
		if write {
			if err := q.TemplateLocaleRecompiled(ctx, queries.TemplateLocaleRecompiledParams{TenantID: tenantID,
				TemplateID: l.TemplateID, Locale: l.Locale, CompiledHtml: b.HTML, RequiredVariables: nonNil(b.Vars),
				Refs: nonNil(b.Refs), MissingPartials: nonNil(b.Missing)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkIncludes refuses a partial whose includes lead back to it, or nest
// deeper than render.MaxIncludeDepth, counted from it and from every
// partial that includes it (directly or not): a chain grows at either end.
func checkIncludes(ps partialSet, id string) error {
	for p := range ps.content {
		if p != id && !ps.reaches(ps.refs[p], id) {
			continue
		}
		if _, err := render.Compose("{% include '"+p+"' %}", "", ps.content); err != nil {
			return apperr.Invalid("content", err.Error())
		}
	}
	return nil
}

// GetPartial returns a partial or NOT_FOUND.
func (s *Store) GetPartial(ctx context.Context, tenantID, id string) (queries.Partial, error) {
	p, err := s.DB.PartialGet(ctx, queries.PartialGetParams{TenantID: tenantID, ID: id})
	if store.IsNoRows(err) {
		return p, PartialNotFound()
	}
	return p, err
}

// ListPartials returns a page of partials, newest first.
func (s *Store) ListPartials(ctx context.Context, tenantID string, p page.Params) ([]queries.Partial, *page.Cursor, error) {
	return page.List(p, func(q page.Query) ([]queries.Partial, error) {
		return s.DB.PartialList(ctx, queries.PartialListParams{TenantID: tenantID, BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
	}, func(r queries.Partial) page.Cursor { return page.Cursor{Time: r.CreatedAt, ID: r.ID} })
}

// DeletePartial removes a partial no template, locale version or other
// partial names: one that is named is 409 PARTIAL_REFERENCED, naming who
// uses it.
func (s *Store) DeletePartial(ctx context.Context, tenantID, id string) error {
	return s.DB.Tx(ctx, func(q *queries.Queries) error {
		if err := q.TemplateSourcesLock(ctx, tenantID); err != nil {
			return err
		}
		refs, err := q.PartialReferrers(ctx, queries.PartialReferrersParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		if len(refs) > 0 {
			names := make([]string, len(refs))
			for i, r := range refs {
				names[i] = r.Kind + " " + r.Name
			}
			e := apperr.Conflict("PARTIAL_REFERENCED", "partial "+id+" is used by "+strings.Join(names, ", ")+": change them first")
			e.Details = map[string]any{"referencedBy": names}
			return e
		}
		n, err := q.PartialDelete(ctx, queries.PartialDeleteParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			return PartialNotFound()
		}
		return nil
	})
}
