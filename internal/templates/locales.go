package templates

import (
	"context"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/language"

	"tidings/internal/apperr"
	"tidings/internal/store"
	"tidings/queries"
)

// CanonicalLocale parses a BCP 47 tag and returns it in canonical form
// ("de-at" gives "de-AT"); a malformed tag is VALIDATION_ERROR on field.
func CanonicalLocale(field, tag string) (string, error) {
	t, err := parseLocale(tag)
	if err != nil {
		return "", apperr.Invalid(field, "must be a BCP 47 language tag (de, de-AT, pt-BR)")
	}
	return t.String(), nil
}

var errNoLanguage = errors.New("no language")

func parseLocale(tag string) (language.Tag, error) {
	if tag == "" || len(tag) > 64 {
		return language.Und, errNoLanguage
	}
	t, err := language.Parse(tag)
	if err == nil && t == language.Und {
		err = errNoLanguage
	}
	return t, err
}

// MatchLocale picks, of a template's locale versions (canonical tags),
// the one for a recipient whose locale is want (ADDENDUM 24): the exact
// tag, compared without case, then its language alone (de-AT: de); ""
// means the template's own version. A malformed want matches nothing.
func MatchLocale(have []string, want string) string {
	if len(have) == 0 || want == "" {
		return ""
	}
	for _, h := range have {
		if strings.EqualFold(h, want) {
			return h
		}
	}
	t, err := parseLocale(want)
	if err != nil {
		return ""
	}
	canon := t.String()
	base, _ := t.Base()
	for _, candidate := range []string{canon, base.String()} {
		for _, h := range have {
			if strings.EqualFold(h, candidate) {
				return h
			}
		}
	}
	return ""
}

// LocaleNotFound is a locale version's 404.
func LocaleNotFound() *apperr.Error { return apperr.NotFound("NOT_FOUND", "locale version") }

// PutLocale stores the template's version in locale (canonicalised):
// its own subject and content, compiled in the template's layout with its
// partials as the template is. created reports a new locale version.
func (s *Store) PutLocale(ctx context.Context, tenantID, templateID, locale, subject, content string) (l queries.TemplateLocale, created bool, err error) {
	var f apperr.Fields
	tag, lerr := CanonicalLocale("locale", locale)
	f.Merge(lerr)
	n := utf8.RuneCountInString(subject)
	f.Check(n >= 1 && n <= 998, "subject", "must be 1-998 characters")
	f.Check(len(content) > 0, "content", "must not be empty")
	f.Check(len(content) <= MaxContentBytes, "content", "must be at most 524288 bytes (512 KiB)")
	if err := f.Err(); err != nil {
		return l, false, err
	}
	compiler := newMemo(s.Compiler)
	// Compiled before the transaction; inside only if the layout or the
	// partials changed meanwhile.
	if t, err := s.Get(ctx, tenantID, templateID); err != nil {
		return l, false, err
	} else if ps, err := loadPartials(ctx, s.DB.Queries, tenantID); err != nil {
		return l, false, err
	} else if _, err := build(ctx, compiler, ps, subject, content, t.Layout); err != nil && !isInvalid(err) {
		return l, false, err
	}
	err = s.DB.Tx(ctx, func(q *queries.Queries) error {
		if err := q.TemplateSourcesLock(ctx, tenantID); err != nil {
			return err
		}
		t, err := q.TemplateGetForUpdate(ctx, queries.TemplateGetForUpdateParams{TenantID: tenantID, ID: templateID})
		if store.IsNoRows(err) {
			return NotFound()
		}
		if err != nil {
			return err
		}
		cur, err := q.TemplateLocaleGet(ctx, queries.TemplateLocaleGetParams{TenantID: tenantID, TemplateID: templateID, Locale: tag})
		switch {
		case store.IsNoRows(err):
			created = true
		case err != nil:
			return err
		case cur.Subject == subject && cur.Content == storedForm(content, t.Layout):
			l = cur // nothing changes
			return nil
		}
		ps, err := loadPartials(ctx, q, tenantID)
		if err != nil {
			return err
		}
		b, err := build(ctx, compiler, ps, subject, content, t.Layout)
		if err != nil {
			return err
		}
		l, err = q.TemplateLocaleUpsert(ctx, queries.TemplateLocaleUpsertParams{TenantID: tenantID, TemplateID: templateID,
			Locale: tag, Subject: subject, Content: b.Content, CompiledHtml: b.HTML, RequiredVariables: nonNil(b.Vars),
			Refs: nonNil(b.Refs), MissingPartials: nonNil(b.Missing)})
		if err != nil || !created {
			return err
		}
		locales := append(slices.Clone(t.Locales), tag)
		slices.Sort(locales)
		return q.TemplateSetLocales(ctx, queries.TemplateSetLocalesParams{TenantID: tenantID, ID: templateID, Locales: locales})
	})
	return l, created, err
}

// Locales lists a template's locale versions, by tag.
func (s *Store) Locales(ctx context.Context, tenantID, templateID string) ([]queries.TemplateLocale, error) {
	if _, err := s.Get(ctx, tenantID, templateID); err != nil {
		return nil, err
	}
	return s.DB.TemplateLocaleList(ctx, queries.TemplateLocaleListParams{TenantID: tenantID, TemplateID: templateID})
}

// GetLocale returns one locale version (the tag in any case or form).
func (s *Store) GetLocale(ctx context.Context, tenantID, templateID, locale string) (queries.TemplateLocale, error) {
	if _, err := s.Get(ctx, tenantID, templateID); err != nil {
		return queries.TemplateLocale{}, err
	}
	tag, err := CanonicalLocale("locale", locale)
	if err != nil {
		return queries.TemplateLocale{}, err
	}
	l, err := s.DB.TemplateLocaleGet(ctx, queries.TemplateLocaleGetParams{TenantID: tenantID, TemplateID: templateID, Locale: tag})
	if store.IsNoRows(err) {
		return l, LocaleNotFound()
	}
	return l, err
}

// DeleteLocale removes a locale version; its recipients get the
// template's own from the next message.
func (s *Store) DeleteLocale(ctx context.Context, tenantID, templateID, locale string) error {
	tag, err := CanonicalLocale("locale", locale)
	if err != nil {
		return err
	}
	return s.DB.Tx(ctx, func(q *queries.Queries) error {
		t, err := q.TemplateGetForUpdate(ctx, queries.TemplateGetForUpdateParams{TenantID: tenantID, ID: templateID})
		if store.IsNoRows(err) {
			return NotFound()
		}
		if err != nil {
			return err
		}
		n, err := q.TemplateLocaleDelete(ctx, queries.TemplateLocaleDeleteParams{TenantID: tenantID, TemplateID: templateID, Locale: tag})
		if err != nil {
			return err
		}
		if n == 0 {
			return LocaleNotFound()
		}
		locales := slices.DeleteFunc(slices.Clone(t.Locales), func(x string) bool { return x == tag })
		return q.TemplateSetLocales(ctx, queries.TemplateSetLocalesParams{TenantID: tenantID, ID: templateID, Locales: nonNil(locales)})
	})
}

// relayLocales compiles a template's locale versions again in its new
// layout.
func (s *Store) relayLocales(ctx context.Context, q *queries.Queries, c Compiler, ps partialSet, tenantID, templateID string, layout *string) error {
	locales, err := q.TemplateLocaleList(ctx, queries.TemplateLocaleListParams{TenantID: tenantID, TemplateID: templateID})
	if err != nil {
		return err
	}
	for _, l := range locales {
		b, err := build(ctx, c, ps, l.Subject, l.Content, layout)
		if err != nil {
			if isInvalid(err) {
				return dependentError("locale "+l.Locale, err)
			}
			return err
		}
		if err := q.TemplateLocaleRecompiled(ctx, queries.TemplateLocaleRecompiledParams{TenantID: tenantID,
			TemplateID: templateID, Locale: l.Locale, CompiledHtml: b.HTML, RequiredVariables: nonNil(b.Vars),
			Refs: nonNil(b.Refs), MissingPartials: nonNil(b.Missing)}); err != nil {
			return err
		}
	}
	return nil
}
