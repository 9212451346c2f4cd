// Package templates stores email templates and their versions: the PUT
// rules (create, update, idempotent no-op, plan limit), compiling once per
// version through a Compiler, and rendering a stored version for preview
// and sends.
package templates

import (
	"context"
	"errors"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/render"
	"tidings/internal/render/sanitize"
	"tidings/internal/store"
	"tidings/internal/topics"
	"tidings/queries"
)

// Compiled is a template source made ready to store: sanitised content,
// compiled HTML and the variables it reads.
type Compiled struct {
	Content           string
	HTML              string
	RequiredVariables []string
}

// Compiler turns subject and content into what is stored for a version; it
// is where MJML compilation, sanitising and Liquid parsing happen.
type Compiler interface {
	Compile(ctx context.Context, subject, content string) (Compiled, error)
}

// Put is a validated PUT body; nil fields were not sent.
type Put struct {
	Name, Subject, Content *string
	Enabled                *bool
	DisableReason          *string
	// Topic names the topic of the template's messages (ADDENDUM 16);
	// with SetTopic and a nil Topic it is cleared. Like enabled, it is
	// state: changing it makes no new version.
	Topic    *string
	SetTopic bool
	// Layout names the partial the content is placed in (ADDENDUM 24);
	// with SetLayout and a nil Layout it is cleared. It is source: a
	// change makes a new version.
	Layout    *string
	SetLayout bool
	// StrictVariables refuses a message whose context lacks a variable
	// the template reads. State, as enabled is.
	StrictVariables *bool
}

// MaxContentBytes bounds template content as sent (issue 11): every version
// is stored, compiled and rendered per recipient.
const MaxContentBytes = 512 << 10

// Validate checks the fields a create needs, or that an update has one.
func (p Put) Validate(create bool) error {
	var f apperr.Fields
	if create {
		f.Check(p.Name != nil, "name", "is required")
		f.Check(p.Subject != nil, "subject", "is required")
		f.Check(p.Content != nil, "content", "is required")
	} else if p.Name == nil && p.Subject == nil && p.Content == nil && p.Enabled == nil && p.DisableReason == nil &&
		!p.SetTopic && !p.SetLayout && p.StrictVariables == nil {
		return apperr.AtLeastOne("name", "subject", "content", "enabled", "disableReason", "topic", "layout", "strictVariables")
	}
	if p.Layout != nil {
		f.Check(ids.Valid(*p.Layout), "layout", "must be a partial id")
	}
	if p.Topic != nil {
		f.Check(ids.Valid(*p.Topic), "topic", "must be a topic id")
	}
	if p.Name != nil {
		n := utf8.RuneCountInString(*p.Name)
		f.Check(n >= 1 && n <= 256, "name", "must be 1-256 characters")
	}
	if p.Subject != nil {
		n := utf8.RuneCountInString(*p.Subject)
		f.Check(n >= 1 && n <= 998, "subject", "must be 1-998 characters")
	}
	if p.Content != nil {
		f.Check(len(*p.Content) > 0, "content", "must not be empty")
		f.Check(len(*p.Content) <= MaxContentBytes, "content", "must be at most 524288 bytes (512 KiB)")
	}
	if p.DisableReason != nil {
		f.Check(utf8.RuneCountInString(*p.DisableReason) <= 1000, "disableReason", "must be at most 1000 characters")
	}
	return f.Err()
}

// Store keeps templates.
type Store struct {
	DB        *store.DB
	Compiler  Compiler
	FreeLimit int // PLAN_FREE_TEMPLATES
}

// NotFound is the template 404.
func NotFound() *apperr.Error { return apperr.NotFound("TEMPLATE_NOT_FOUND", "template") }

// Put creates or updates template id. A body that changes nothing makes no
// new version; name, subject or content changes make one; enabled and
// disableReason are state and change in place.
func (s *Store) Put(ctx context.Context, tenantID, id string, p Put) (t queries.Template, created bool, err error) {
	for attempt := 0; ; attempt++ {
		t, created, err = s.put(ctx, tenantID, id, p)
		// A concurrent PUT created the template first: this one is an update.
		if errors.Is(err, errRaced) && attempt == 0 {
			continue
		}
		return t, created, err
	}
}

var errRaced = errors.New("template created concurrently")

func (s *Store) put(ctx context.Context, tenantID, id string, p Put) (t queries.Template, created bool, err error) {
	// Compile before the transaction: MJML runs on a node process for tens
	// of milliseconds and must not do so while the template's or the
	// tenant's row is locked. Inside, the compile is reused when the stored
	// template is still what it was compiled against (the usual case), and
	// done again otherwise.
	compiler := newMemo(s.Compiler)
	if err := s.precompile(ctx, compiler, tenantID, id, p); err != nil {
		return t, false, err
	}
	err = s.DB.Tx(ctx, func(q *queries.Queries) error {
		// The partials are read under the tenant's source lock: a partial
		// saved meanwhile either is seen here or recompiles this template
		// after it commits.
		if err := q.TemplateSourcesLock(ctx, tenantID); err != nil {
			return err
		}
		ps, err := loadPartials(ctx, q, tenantID)
		if err != nil {
			return err
		}
		cur, err := q.TemplateGetForUpdate(ctx, queries.TemplateGetForUpdateParams{TenantID: tenantID, ID: id})
		if store.IsNoRows(err) {
			created = true
			t, err = s.create(ctx, q, compiler, ps, tenantID, id, p)
			return err
		}
		if err != nil {
			return err
		}
		t, err = s.update(ctx, q, compiler, ps, cur, p)
		return err
	})
	return t, created, err
}

// precompile compiles what a PUT would compile, judged from the template as
// it stands now; invalid bodies are left for the transaction to report.
func (s *Store) precompile(ctx context.Context, c Compiler, tenantID, id string, p Put) error {
	cur, err := s.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: tenantID, ID: id})
	create := store.IsNoRows(err)
	if err != nil && !create {
		return err
	}
	if p.Validate(create) != nil {
		return nil
	}
	subject, content, layout := cur.Subject, cur.Content, cur.Layout
	if p.Subject != nil {
		subject = *p.Subject
	}
	if p.Content != nil {
		content = *p.Content
	}
	if p.SetLayout {
		layout = p.Layout
	}
	if !create && subject == cur.Subject && storedForm(content, layout) == cur.Content && equalPtr(layout, cur.Layout) {
		return nil
	}
	ps, err := loadPartials(ctx, s.DB.Queries, tenantID)
	if err != nil {
		return err
	}
	if _, err = build(ctx, c, ps, subject, content, layout); isInvalid(err) {
		return nil // invalid content: the transaction reports it, with the rest
	}
	if err != nil || create || equalPtr(layout, cur.Layout) {
		return err
	}
	// A new layout recompiles the locale versions, which are placed in it.
	locales, err := s.DB.TemplateLocaleList(ctx, queries.TemplateLocaleListParams{TenantID: tenantID, TemplateID: id})
	if err != nil {
		return err
	}
	for _, l := range locales {
		if _, err := build(ctx, c, ps, l.Subject, l.Content, layout); err != nil && !isInvalid(err) {
			return err
		}
	}
	return nil
}

func isInvalid(err error) bool {
	var e *apperr.Error
	return errors.As(err, &e)
}

func (s *Store) create(ctx context.Context, q *queries.Queries, compiler Compiler, ps partialSet, tenantID, id string, p Put) (queries.Template, error) {
	if err := p.Validate(true); err != nil {
		return queries.Template{}, err
	}
	var f apperr.Fields
	if p.Enabled != nil {
		f.Add("enabled", "can only be set on update")
	}
	if p.DisableReason != nil {
		f.Add("disableReason", "can only be set on update")
	}
	if err := f.Err(); err != nil {
		return queries.Template{}, err
	}
	// Lock the tenant row so concurrent creates cannot both take the last slot.
	if _, err := q.TenantGetForUpdate(ctx, tenantID); err != nil {
		return queries.Template{}, err
	}
	n, err := q.TemplateCount(ctx, tenantID)
	if err != nil {
		return queries.Template{}, err
	}
	if n >= int64(s.FreeLimit) {
		t, err := q.TenantGet(ctx, tenantID)
		if err != nil {
			return queries.Template{}, err
		}
		if t.Plan == "free" {
			return queries.Template{}, apperr.PlanLimit("templates", s.FreeLimit)
		}
	}
	if p.Topic != nil {
		if err := topics.Exists(ctx, q, tenantID, *p.Topic); err != nil {
			return queries.Template{}, err
		}
	}
	c, err := build(ctx, compiler, ps, *p.Subject, *p.Content, p.Layout)
	if err != nil {
		return queries.Template{}, err
	}
	t, err := q.TemplateInsert(ctx, queries.TemplateInsertParams{TenantID: tenantID, ID: id, Name: *p.Name,
		Subject: *p.Subject, Content: c.Content, CompiledHtml: c.HTML, RequiredVariables: nonNil(c.Vars),
		Topic: p.Topic, Layout: p.Layout, StrictVariables: p.StrictVariables != nil && *p.StrictVariables,
		Refs: nonNil(c.Refs), MissingPartials: nonNil(c.Missing)})
	if store.IsNoRows(err) {
		return t, errRaced
	}
	if err != nil {
		return t, err
	}
	return t, q.TemplateVersionInsert(ctx, queries.TemplateVersionInsertParams{TenantID: tenantID, TemplateID: id,
		Version: 1, Name: t.Name, Subject: t.Subject, Content: t.Content, CompiledHtml: t.CompiledHtml, Layout: t.Layout})
}

func (s *Store) update(ctx context.Context, q *queries.Queries, compiler Compiler, ps partialSet, cur queries.Template, p Put) (queries.Template, error) {
	if err := p.Validate(false); err != nil {
		return cur, err
	}
	next := queries.TemplateUpdateParams{TenantID: cur.TenantID, ID: cur.ID, Name: cur.Name, Subject: cur.Subject,
		Content: cur.Content, CompiledHtml: cur.CompiledHtml, RequiredVariables: cur.RequiredVariables,
		CurrentVersion: cur.CurrentVersion, Enabled: cur.Enabled, DisableReason: cur.DisableReason, Topic: cur.Topic,
		Layout: cur.Layout, StrictVariables: cur.StrictVariables, Refs: cur.Refs, MissingPartials: cur.MissingPartials}
	if p.SetTopic {
		if p.Topic != nil && !equalPtr(p.Topic, cur.Topic) {
			if err := topics.Exists(ctx, q, cur.TenantID, *p.Topic); err != nil {
				return cur, err
			}
		}
		next.Topic = p.Topic
	}
	if p.Name != nil {
		next.Name = *p.Name
	}
	if p.SetLayout {
		next.Layout = p.Layout
	}
	if p.StrictVariables != nil {
		next.StrictVariables = *p.StrictVariables
	}
	if p.Subject != nil || p.Content != nil || p.SetLayout {
		subject, content := cur.Subject, cur.Content
		if p.Subject != nil {
			subject = *p.Subject
		}
		if p.Content != nil {
			content = *p.Content
		}
		if subject != cur.Subject || storedForm(content, next.Layout) != cur.Content || !equalPtr(next.Layout, cur.Layout) {
			c, err := build(ctx, compiler, ps, subject, content, next.Layout)
			if err != nil {
				return cur, err
			}
			next.Subject, next.Content, next.CompiledHtml, next.RequiredVariables = subject, c.Content, c.HTML, nonNil(c.Vars)
			next.Refs, next.MissingPartials = nonNil(c.Refs), nonNil(c.Missing)
		}
	}
	if !equalPtr(next.Layout, cur.Layout) {
		if err := s.relayLocales(ctx, q, compiler, ps, cur.TenantID, cur.ID, next.Layout); err != nil {
			return cur, err
		}
	}
	if p.Enabled != nil {
		next.Enabled = *p.Enabled
	}
	if p.DisableReason != nil {
		next.DisableReason = p.DisableReason
	}
	if next.Enabled {
		// A reason is recorded when disabling; an enabled template has none.
		next.DisableReason = nil
	}
	contentChanged := next.Name != cur.Name || next.Subject != cur.Subject || next.Content != cur.Content ||
		!equalPtr(next.Layout, cur.Layout)
	stateChanged := next.Enabled != cur.Enabled || !equalPtr(next.DisableReason, cur.DisableReason) ||
		!equalPtr(next.Topic, cur.Topic) || next.StrictVariables != cur.StrictVariables
	if !contentChanged && !stateChanged {
		return cur, nil
	}
	if contentChanged {
		next.CurrentVersion = cur.CurrentVersion + 1
		if err := q.TemplateVersionInsert(ctx, queries.TemplateVersionInsertParams{TenantID: cur.TenantID, TemplateID: cur.ID,
			Version: next.CurrentVersion, Name: next.Name, Subject: next.Subject, Content: next.Content, CompiledHtml: next.CompiledHtml,
			Layout: next.Layout}); err != nil {
			return cur, err
		}
	}
	return q.TemplateUpdate(ctx, next)
}

// Get returns a template or TEMPLATE_NOT_FOUND.
func (s *Store) Get(ctx context.Context, tenantID, id string) (queries.Template, error) {
	t, err := s.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: tenantID, ID: id})
	if store.IsNoRows(err) {
		return t, NotFound()
	}
	return t, err
}

// Delete removes a template and its versions.
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	return s.DB.Tx(ctx, func(q *queries.Queries) error { // with the request's audit entry
		n, err := q.TemplateDelete(ctx, queries.TemplateDeleteParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			return NotFound()
		}
		return nil
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func equalPtr(a, b *string) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// storedForm is how content is stored when nothing in it needs stripping:
// MJML, a whole HTML document, and content placed in a layout or naming
// partials as given, other raw HTML wrapped in MJML (ADDENDUM 5 and 24). A
// PUT repeating the stored template (or the raw HTML it was made from)
// compares equal and compiles nothing.
func storedForm(content string, layout *string) string {
	if layout != nil || sanitize.IsMJML(content) || hasMJMLTag(content) || render.IsDocument(content) {
		return content
	}
	return render.WrapHTML(content)
}
