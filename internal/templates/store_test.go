package templates_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/render"
	"tidings/internal/store"
	"tidings/internal/templates"
	"tidings/internal/testenv"
	"tidings/queries"
)

// welcomeMJML reads a contact property, loops over a collection and puts a
// variable in an attribute: the three places requiredVariables looks.
const welcomeMJML = `<mjml>
  <mj-body>
    <mj-section><mj-column>
      <mj-text>Hello {{ contact.firstName }}!</mj-text>
      <mj-text>{% for item in items %}<p>{{ item.name | upcase }}</p>{% endfor %}</mj-text>
      <mj-button href="{{ resetUrl }}">Reset</mj-button>
    </mj-column></mj-section>
  </mj-body>
</mjml>`

// bundle is one test's templates service on its own database.
type bundle struct {
	db       *store.DB
	store    *templates.Store
	renderer *templates.Renderer
	tenant   string // a free-plan tenant, provisioned
}

func setup(t testing.TB) *bundle {
	t.Helper()
	db := testenv.DB(t)
	b := &bundle{
		db:    db,
		store: &templates.Store{DB: db, Compiler: templates.Prepare{MJML: testPool(t)}, FreeLimit: 100},
		// A renderer of its own: tests reuse tenant and template ids, and
		// must not meet in its cache.
		renderer: &templates.Renderer{DB: db, R: render.NewRenderer(render.RendererOptions{})},
	}
	b.tenant = b.newTenant(t, "org_a")
	return b
}

// newTenant provisions a tenant on the free plan, as POST /api/tenant does.
func (b *bundle) newTenant(t testing.TB, id string) string {
	t.Helper()
	if _, err := b.db.TenantInsert(t.Context(), queries.TenantInsertParams{ID: id, Name: "Org " + id}); err != nil {
		t.Fatal(err)
	}
	return id
}

// put stores a template and fails the test on any error.
func (b *bundle) put(t *testing.T, tenant, id string, p templates.Put) queries.Template {
	t.Helper()
	tpl, _, err := b.store.Put(t.Context(), tenant, id, p)
	if err != nil {
		t.Fatalf("put %s/%s: %v", tenant, id, err)
	}
	return tpl
}

// get reads a template back from the database, failing on any error.
func (b *bundle) get(t *testing.T, tenant, id string) queries.Template {
	t.Helper()
	tpl, err := b.store.Get(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("get %s/%s: %v", tenant, id, err)
	}
	return tpl
}

// versions lists the stored version numbers of a template in the order the
// versions endpoint shows them.
func (b *bundle) versions(t *testing.T, tenant, id string) []int32 {
	t.Helper()
	rows, err := b.db.TemplateVersionList(t.Context(), queries.TemplateVersionListParams{TenantID: tenant, TemplateID: id})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int32, len(rows))
	for i, r := range rows {
		out[i] = r.Version
	}
	return out
}

// create is a full create body.
func create(name, subject, content string) templates.Put {
	return templates.Put{Name: &name, Subject: &subject, Content: &content}
}

func ptr[T any](v T) *T { return &v }

// wantErr asserts that err is the apperr with code.
func wantErr(t *testing.T, err error, code string) *apperr.Error {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != code {
		t.Fatalf("error %v, want %s", err, code)
	}
	return e
}

// hasField reports whether a VALIDATION_ERROR names field in details.fields.
func hasField(e *apperr.Error, field string) bool {
	f, _ := e.Details["fields"].(map[string]any)
	_, ok := f[field]
	return ok
}

// sameTemplate compares what a client can observe of two template rows.
func sameTemplate(t *testing.T, got, want queries.Template) {
	t.Helper()
	if got.Name != want.Name || got.Subject != want.Subject || got.Content != want.Content ||
		got.CompiledHtml != want.CompiledHtml || got.CurrentVersion != want.CurrentVersion ||
		got.Enabled != want.Enabled || !slices.Equal(got.RequiredVariables, want.RequiredVariables) ||
		!got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("template changed:\n got %+v\nwant %+v", got, want)
	}
}

func TestPutCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	tpl, created, err := b.store.Put(ctx, b.tenant, "welcome", create("Welcome", "Hi {{ contact.firstName }}", welcomeMJML))
	if err != nil {
		t.Fatal(err)
	}
	if !created || tpl.CurrentVersion != 1 || !tpl.Enabled || tpl.DisableReason != nil {
		t.Fatalf("created %v version %d enabled %v reason %v", created, tpl.CurrentVersion, tpl.Enabled, tpl.DisableReason)
	}
	if tpl.Name != "Welcome" || tpl.Subject != "Hi {{ contact.firstName }}" || tpl.Content != welcomeMJML {
		t.Fatalf("stored %q %q %q, want the body exactly as given", tpl.Name, tpl.Subject, tpl.Content)
	}
	if want := []string{"contact.firstName", "items", "resetUrl"}; !slices.Equal(tpl.RequiredVariables, want) {
		t.Fatalf("requiredVariables %q, want %q", tpl.RequiredVariables, want)
	}
	// MJML is compiled once at save time, the Liquid left in for each send.
	if !strings.Contains(tpl.CompiledHtml, "<html") || strings.Contains(tpl.CompiledHtml, "<mj-") ||
		!strings.Contains(tpl.CompiledHtml, "{{ contact.firstName }}") {
		t.Fatalf("compiled HTML is not MJML output with Liquid kept:\n%s", tpl.CompiledHtml)
	}
	sameTemplate(t, b.get(t, b.tenant, "welcome"), tpl)

	if got := b.versions(t, b.tenant, "welcome"); !slices.Equal(got, []int32{1}) {
		t.Fatalf("versions %v, want [1]", got)
	}
	v, err := b.db.TemplateVersionGet(ctx, queries.TemplateVersionGetParams{TenantID: b.tenant, TemplateID: "welcome", Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if v.Name != tpl.Name || v.Subject != tpl.Subject || v.Content != tpl.Content || v.CompiledHtml != tpl.CompiledHtml {
		t.Fatalf("version 1 %+v does not match the template", v)
	}

	// Without Liquid there are no variables: an empty list, not a null one.
	plain := b.put(t, b.tenant, "plain", create("Plain", "Hello", "<p>Hello</p>"))
	if plain.RequiredVariables == nil || len(plain.RequiredVariables) != 0 {
		t.Fatalf("requiredVariables %#v, want an empty list", plain.RequiredVariables)
	}
}

func TestPutUpdateMakesVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v1 := b.put(t, b.tenant, "welcome", create("Welcome", "Hi {{ contact.firstName }}", welcomeMJML))

	v2, created, err := b.store.Put(t.Context(), b.tenant, "welcome", templates.Put{Subject: ptr("Welcome aboard")})
	if err != nil {
		t.Fatal(err)
	}
	if created || v2.CurrentVersion != 2 || v2.Subject != "Welcome aboard" {
		t.Fatalf("created %v version %d subject %q", created, v2.CurrentVersion, v2.Subject)
	}
	if v2.Name != v1.Name || v2.Content != v1.Content || !v2.CreatedAt.Equal(v1.CreatedAt) {
		t.Fatal("fields the body left out changed")
	}
	// The subject no longer reads the contact.
	if want := []string{"contact.firstName", "items", "resetUrl"}; !slices.Equal(v2.RequiredVariables, want) {
		t.Fatalf("requiredVariables %q, want %q (content still reads them)", v2.RequiredVariables, want)
	}

	v3 := b.put(t, b.tenant, "welcome", templates.Put{Content: ptr("<p>Bye {{ name }}</p>")})
	if v3.CurrentVersion != 3 || !slices.Equal(v3.RequiredVariables, []string{"name"}) {
		t.Fatalf("version %d requiredVariables %q, want 3 and [name]", v3.CurrentVersion, v3.RequiredVariables)
	}
	// A rename is a content change too: versions record the name.
	v4 := b.put(t, b.tenant, "welcome", templates.Put{Name: ptr("Farewell")})
	if v4.CurrentVersion != 4 || v4.Name != "Farewell" || v4.CompiledHtml != v3.CompiledHtml {
		t.Fatalf("version %d name %q", v4.CurrentVersion, v4.Name)
	}

	rows, err := b.db.TemplateVersionList(t.Context(), queries.TemplateVersionListParams{TenantID: b.tenant, TemplateID: "welcome"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%d:%s", r.Version, r.Subject))
	}
	want := []string{"4:Welcome aboard", "3:Welcome aboard", "2:Welcome aboard", "1:Hi {{ contact.firstName }}"}
	if !slices.Equal(got, want) {
		t.Fatalf("versions %q, want newest first %q", got, want)
	}
	// Old versions stay as they were, for sends already scheduled on them.
	old, err := b.db.TemplateVersionGet(t.Context(), queries.TemplateVersionGetParams{TenantID: b.tenant, TemplateID: "welcome", Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if old.Name != "Welcome" || old.Content != welcomeMJML || old.CompiledHtml != v1.CompiledHtml {
		t.Fatalf("version 1 was rewritten: %+v", old)
	}
}

func TestPutNoChangeMakesNoVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dirty := `<p onclick="steal()">Hi</p>`
	tests := []struct {
		desc   string
		create templates.Put
		put    templates.Put
	}{
		{desc: "same body again",
			create: create("Welcome", "Hi", welcomeMJML), put: create("Welcome", "Hi", welcomeMJML)},
		{desc: "same subject alone",
			create: create("Welcome", "Hi", welcomeMJML), put: templates.Put{Subject: ptr("Hi")}},
		{desc: "same name and content",
			create: create("Welcome", "Hi", welcomeMJML), put: templates.Put{Name: ptr("Welcome"), Content: ptr(welcomeMJML)}},
		{desc: "enabled when already enabled",
			create: create("Welcome", "Hi", welcomeMJML), put: templates.Put{Enabled: ptr(true)}},
		// The stored content is the sanitised one, so the raw body differs from
		// it; sending the same body again must still be a no-op.
		{desc: "same content that sanitising changed",
			create: create("Dirty", "Hi", dirty), put: create("Dirty", "Hi", dirty)},
	}
	for i, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			id := fmt.Sprintf("t%d", i)
			before := b.put(t, b.tenant, id, tt.create)
			after, created, err := b.store.Put(t.Context(), b.tenant, id, tt.put)
			if err != nil {
				t.Fatal(err)
			}
			if created {
				t.Fatal("reported as created")
			}
			sameTemplate(t, after, before)
			sameTemplate(t, b.get(t, b.tenant, id), before)
			if got := b.versions(t, b.tenant, id); !slices.Equal(got, []int32{1}) {
				t.Fatalf("versions %v, want [1]", got)
			}
		})
	}
}

func TestPutStateChangesInPlace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.put(t, b.tenant, "welcome", create("Welcome", "Hi", welcomeMJML))

	off := b.put(t, b.tenant, "welcome", templates.Put{Enabled: ptr(false), DisableReason: ptr("rebrand")})
	if off.Enabled || off.DisableReason == nil || *off.DisableReason != "rebrand" || off.CurrentVersion != 1 {
		t.Fatalf("enabled %v reason %v version %d, want disabled for rebrand at version 1", off.Enabled, off.DisableReason, off.CurrentVersion)
	}
	// Enabling again clears the reason: it no longer explains anything.
	on := b.put(t, b.tenant, "welcome", templates.Put{Enabled: ptr(true)})
	if !on.Enabled || on.DisableReason != nil || on.CurrentVersion != 1 {
		t.Fatalf("enabled %v reason %v version %d", on.Enabled, on.DisableReason, on.CurrentVersion)
	}
	// A reason sent to an enabled template, or with enabled: true, is not
	// kept: it is recorded when disabling.
	for _, p := range []templates.Put{{DisableReason: ptr("x")}, {Enabled: ptr(true), DisableReason: ptr("y")}} {
		if got := b.put(t, b.tenant, "welcome", p); !got.Enabled || got.DisableReason != nil {
			t.Fatalf("enabled %v reason %v", got.Enabled, got.DisableReason)
		}
	}
	if got := b.versions(t, b.tenant, "welcome"); !slices.Equal(got, []int32{1}) {
		t.Fatalf("versions %v: state changes must not make versions", got)
	}
}

func TestPutValidationChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	bogusMJML := "<mjml><mj-body><mj-bogus>x</mj-bogus></mj-body></mjml>"

	creates := []struct {
		desc  string
		put   templates.Put
		field string
	}{
		{desc: "missing name", put: templates.Put{Subject: ptr("s"), Content: ptr("<p>x</p>")}, field: "name"},
		{desc: "missing subject", put: templates.Put{Name: ptr("n"), Content: ptr("<p>x</p>")}, field: "subject"},
		{desc: "missing content", put: templates.Put{Name: ptr("n"), Subject: ptr("s")}, field: "content"},
		{desc: "empty name", put: create("", "s", "<p>x</p>"), field: "name"},
		{desc: "name too long", put: create(strings.Repeat("é", 257), "s", "<p>x</p>"), field: "name"},
		{desc: "unknown MJML element", put: create("n", "s", bogusMJML), field: "content"},
		{desc: "unclosed Liquid tag", put: create("n", "s", "<p>{% if x %}</p>"), field: "content"},
		{desc: "unterminated Liquid output", put: create("n", "s", "<p>{{ name </p>"), field: "content"},
		{desc: "bad Liquid in subject", put: create("n", "{% if x %}hi", "<p>x</p>"), field: "subject"},
		{desc: "enabled on create", put: templates.Put{Name: ptr("n"), Subject: ptr("s"), Content: ptr("<p>x</p>"), Enabled: ptr(false)}, field: "enabled"},
	}
	for _, tt := range creates {
		t.Run("create/"+tt.desc, func(t *testing.T) {
			_, _, err := b.store.Put(ctx, b.tenant, "t1", tt.put)
			if e := wantErr(t, err, "VALIDATION_ERROR"); !hasField(e, tt.field) {
				t.Fatalf("details %v lack fields[%q]", e.Details, tt.field)
			}
		})
	}
	if n, err := b.db.TemplateCount(ctx, b.tenant); err != nil || n != 0 {
		t.Fatalf("%d templates stored after invalid creates (err %v)", n, err)
	}
	// MJML's own messages reach the client, with their lines.
	_, _, err := b.store.Put(ctx, b.tenant, "t1", create("n", "s", bogusMJML))
	if e := wantErr(t, err, "VALIDATION_ERROR"); e.Details["mjml"] == nil {
		t.Fatalf("no details.mjml: %v", e.Details)
	}

	before := b.put(t, b.tenant, "t1", create("n", "s", "<p>x</p>"))
	updates := []struct {
		desc  string
		put   templates.Put
		field string // "" when the error is about the whole body
	}{
		{desc: "nothing to update", put: templates.Put{}},
		{desc: "empty subject", put: templates.Put{Subject: ptr("")}, field: "subject"},
		{desc: "unknown MJML element", put: templates.Put{Content: ptr(bogusMJML)}, field: "content"},
		{desc: "unclosed Liquid tag", put: templates.Put{Content: ptr("<p>{% for a in b %}</p>")}, field: "content"},
		{desc: "bad Liquid in subject", put: templates.Put{Subject: ptr("{{ a")}, field: "subject"},
		{desc: "disableReason too long", put: templates.Put{DisableReason: ptr(strings.Repeat("x", 1001))}, field: "disableReason"},
		// One bad field fails the whole body: the valid rename is not applied.
		{desc: "valid name beside bad content", put: templates.Put{Name: ptr("renamed"), Content: ptr(bogusMJML)}, field: "content"},
	}
	for _, tt := range updates {
		t.Run("update/"+tt.desc, func(t *testing.T) {
			_, _, err := b.store.Put(ctx, b.tenant, "t1", tt.put)
			e := wantErr(t, err, "VALIDATION_ERROR")
			if tt.field != "" && !hasField(e, tt.field) {
				t.Fatalf("details %v lack fields[%q]", e.Details, tt.field)
			}
			sameTemplate(t, b.get(t, b.tenant, "t1"), before)
		})
	}
	if got := b.versions(t, b.tenant, "t1"); !slices.Equal(got, []int32{1}) {
		t.Fatalf("versions %v after invalid updates, want [1]", got)
	}
}

func TestPutPlanLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.store.FreeLimit = 2
	body := create("n", "s", "<p>x</p>")

	b.put(t, b.tenant, "one", body)
	b.put(t, b.tenant, "two", body)
	_, _, err := b.store.Put(ctx, b.tenant, "three", body)
	if e := wantErr(t, err, "PLAN_LIMIT_EXCEEDED"); e.Kind != apperr.KindPlanLimit {
		t.Fatalf("kind %s, want %s", e.Kind, apperr.KindPlanLimit)
	}
	if _, err := b.store.Get(ctx, b.tenant, "three"); !apperr.IsCode(err, "TEMPLATE_NOT_FOUND") {
		t.Fatalf("refused template was stored: %v", err)
	}
	// The limit counts templates, not saves: existing ones can still change.
	if v := b.put(t, b.tenant, "two", templates.Put{Name: ptr("still editable")}); v.CurrentVersion != 2 {
		t.Fatalf("update at the limit: version %d", v.CurrentVersion)
	}
	// Each tenant has its own count.
	other := b.newTenant(t, "org_b")
	b.put(t, other, "three", body)
	// Deleting frees a slot.
	if err := b.store.Delete(ctx, b.tenant, "one"); err != nil {
		t.Fatal(err)
	}
	b.put(t, b.tenant, "three", body)
	// Paid plans have no template limit.
	if _, err := b.db.Pool.Exec(ctx, `UPDATE tenants SET plan = 'pro' WHERE id = $1`, b.tenant); err != nil {
		t.Fatal(err)
	}
	b.put(t, b.tenant, "four", body)
	if n, err := b.db.TemplateCount(ctx, b.tenant); err != nil || n != 3 {
		t.Fatalf("%d templates (err %v), want 3", n, err)
	}
}

// Concurrent first PUTs of one id: one creates, the others become updates
// of it rather than failing on the primary key.
func TestPutConcurrentCreateOfOneID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 6
	var wg sync.WaitGroup
	created := make(chan bool, n)
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, c, err := b.store.Put(context.Background(), b.tenant, "same", create("n", "s", "<p>x</p>"))
			created <- c
			errs <- err
		})
	}
	wg.Wait()
	close(created)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	count := 0
	for c := range created {
		if c {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("%d PUTs reported creating one id", count)
	}
	if got := b.versions(t, b.tenant, "same"); !slices.Equal(got, []int32{1}) {
		t.Fatalf("versions %v, want [1]", got)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.put(t, b.tenant, "welcome", create("Welcome", "Old {{ contact.firstName }}", "<p>old body</p>"))
	// Warm the renderer's cache for version 1 of this id: the recreated
	// template below is version 1 again, and must not render from it.
	if _, err := b.renderer.Preview(ctx, b.tenant, "welcome", nil, ""); err != nil {
		t.Fatal(err)
	}
	b.put(t, b.tenant, "welcome", templates.Put{Name: ptr("Welcome 2")})

	if err := b.store.Delete(ctx, b.tenant, "welcome"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Get(ctx, b.tenant, "welcome"); !apperr.IsCode(err, "TEMPLATE_NOT_FOUND") {
		t.Fatalf("get after delete: %v", err)
	}
	if got := b.versions(t, b.tenant, "welcome"); len(got) != 0 {
		t.Fatalf("versions %v survived the template", got)
	}
	wantErr(t, b.store.Delete(ctx, b.tenant, "welcome"), "TEMPLATE_NOT_FOUND")

	// The id can be reused; it starts again at version 1 with the new sources.
	tpl, created, err := b.store.Put(ctx, b.tenant, "welcome", create("New", "New {{ contact.firstName }}", "<p>new body</p>"))
	if err != nil {
		t.Fatal(err)
	}
	if !created || tpl.CurrentVersion != 1 {
		t.Fatalf("created %v version %d, want a new template at version 1", created, tpl.CurrentVersion)
	}
	m, err := b.renderer.Preview(ctx, b.tenant, "welcome", map[string]any{"contact": map[string]any{"firstName": "Ann"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "New Ann" || !strings.Contains(m.HTML, "new body") || strings.Contains(m.HTML, "old body") {
		t.Fatalf("preview of the recreated template: subject %q html %q", m.Subject, m.HTML)
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	mine := b.put(t, b.tenant, "mine", create("n", "s", "<p>secret</p>"))
	other := b.newTenant(t, "org_b")

	if _, err := b.store.Get(ctx, other, "mine"); !apperr.IsCode(err, "TEMPLATE_NOT_FOUND") {
		t.Fatalf("get from another tenant: %v", err)
	}
	wantErr(t, b.store.Delete(ctx, other, "mine"), "TEMPLATE_NOT_FOUND")
	_, err := b.renderer.Preview(ctx, other, "mine", nil, "")
	wantErr(t, err, "TEMPLATE_NOT_FOUND")
	for _, version := range []int32{0, 1} {
		_, _, err := b.renderer.Render(ctx, other, "mine", version, render.Context{})
		wantErr(t, err, "TEMPLATE_NOT_FOUND")
	}
	// For the other tenant the id is free, so an update-only body is an
	// incomplete create, not an update of ours.
	_, _, err = b.store.Put(ctx, other, "mine", templates.Put{Subject: ptr("hijacked")})
	wantErr(t, err, "VALIDATION_ERROR")
	// A full body creates the other tenant's own template of that id.
	theirs, created, err := b.store.Put(ctx, other, "mine", create("theirs", "t", "<p>theirs</p>"))
	if err != nil || !created || theirs.CurrentVersion != 1 {
		t.Fatalf("created %v version %d err %v", created, theirs.CurrentVersion, err)
	}
	if err := b.store.Delete(ctx, other, "mine"); err != nil {
		t.Fatal(err)
	}

	sameTemplate(t, b.get(t, b.tenant, "mine"), mine)
	if got := b.versions(t, b.tenant, "mine"); !slices.Equal(got, []int32{1}) {
		t.Fatalf("versions %v, want [1]", got)
	}
}

func TestPreview(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.put(t, b.tenant, "welcome", create("Welcome", "Hi {{ contact.firstName }}", welcomeMJML))
	vars := map[string]any{
		// Properties are lifted onto the contact, as at send time.
		"contact":  map[string]any{"properties": map[string]any{"firstName": "Ann"}},
		"items":    []any{map[string]any{"name": "socks"}, map[string]any{"name": "hat"}},
		"resetUrl": "https://example.com/reset",
	}

	m, err := b.renderer.Preview(ctx, b.tenant, "welcome", vars, "")
	version := m.Version
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "Hi Ann" || version != 1 {
		t.Fatalf("subject %q version %d, want %q and 1", m.Subject, version, "Hi Ann")
	}
	for _, want := range []string{"Hello Ann!", "SOCKS", "HAT", `href="https://example.com/reset"`} {
		if !strings.Contains(m.HTML, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// Links become "text <url>" in the text part; tags must not survive.
	if !strings.Contains(m.Text, "Hello Ann!") || strings.Contains(m.Text, "<p") || strings.Contains(m.Text, "<html") {
		t.Errorf("text part %q", m.Text)
	}

	// Preview follows the current version.
	b.put(t, b.tenant, "welcome", templates.Put{Subject: ptr("Hello again {{ contact.firstName }}")})
	m, err = b.renderer.Preview(ctx, b.tenant, "welcome", vars, "")
	version = m.Version
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "Hello again Ann" || version != 2 {
		t.Fatalf("subject %q version %d after update", m.Subject, version)
	}

	_, err = b.renderer.Preview(ctx, b.tenant, "nope", vars, "")
	wantErr(t, err, "TEMPLATE_NOT_FOUND")
}

func TestRenderStoredVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.put(t, b.tenant, "welcome", create("Welcome", "v1 {{ contact.firstName }}", welcomeMJML))
	b.put(t, b.tenant, "welcome", templates.Put{Subject: ptr("v2 {{ contact.firstName }}"),
		Content: ptr(`<p>Bye {{ contact.email }} <a href="{{ unsubscribeUrl }}">unsubscribe</a></p>`)})
	rc := render.Context{
		Contact:        &render.Contact{ContactID: "cnt_1", Email: "ada@example.com", Subscribed: true, Properties: map[string]any{"firstName": "Ada"}},
		Variables:      map[string]any{"resetUrl": "https://example.com/r"},
		UnsubscribeURL: "https://t.example/u/tok",
	}

	tests := []struct {
		desc        string
		version     int32
		wantVersion int32
		wantSubject string
		wantHTML    string
	}{
		{desc: "an older version, as a scheduled send would", version: 1, wantVersion: 1, wantSubject: "v1 Ada", wantHTML: "Hello Ada!"},
		{desc: "version 0 is the current one", version: 0, wantVersion: 2, wantSubject: "v2 Ada", wantHTML: `Bye ada@example.com <a href="https://t.example/u/tok">`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			m, version, err := b.renderer.Render(ctx, b.tenant, "welcome", tt.version, rc)
			if err != nil {
				t.Fatal(err)
			}
			if version != tt.wantVersion || m.Subject != tt.wantSubject || !strings.Contains(m.HTML, tt.wantHTML) {
				t.Fatalf("version %d subject %q, want %d %q and HTML with %q:\n%s", version, m.Subject, tt.wantVersion, tt.wantSubject, tt.wantHTML, m.HTML)
			}
		})
	}

	_, _, err := b.renderer.Render(ctx, b.tenant, "welcome", 3, rc)
	wantErr(t, err, "TEMPLATE_NOT_FOUND")
	_, _, err = b.renderer.Render(ctx, b.tenant, "nope", 0, rc)
	wantErr(t, err, "TEMPLATE_NOT_FOUND")
}

// countingCompiler counts compiles, and checks that no row a PUT locks is
// locked while one runs: compiling happens before the transaction.
type countingCompiler struct {
	templates.Compiler
	db     *store.DB
	tenant string
	n      atomic.Int32
	locked atomic.Int32
}

func (c *countingCompiler) Compile(ctx context.Context, subject, content string) (templates.Compiled, error) {
	c.n.Add(1)
	tx, err := c.db.Pool.Begin(ctx)
	if err != nil {
		return templates.Compiled{}, err
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{`SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE NOWAIT`, `SELECT 1 FROM templates WHERE tenant_id = $1 FOR UPDATE NOWAIT`} {
		if _, err := tx.Exec(ctx, q, c.tenant); err != nil {
			c.locked.Add(1) // 55P03 lock_not_available
			break
		}
	}
	return c.Compiler.Compile(ctx, subject, content)
}

func TestPutCompilesOncePerChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cc := &countingCompiler{Compiler: b.store.Compiler, db: b.db, tenant: b.tenant}
	b.store.Compiler = cc
	steps := []struct {
		desc string
		put  templates.Put
		want int32
	}{
		{"create", templates.Put{Name: ptr("n"), Subject: ptr("s"), Content: ptr("<p>a</p>")}, 1},
		{"new content", templates.Put{Content: ptr("<p>b</p>")}, 1},
		{"same content again", templates.Put{Content: ptr("<p>b</p>")}, 0},
		{"name only", templates.Put{Name: ptr("m")}, 0},
		{"state only", templates.Put{Enabled: new(false)}, 0},
	}
	for _, st := range steps {
		before := cc.n.Load()
		b.put(t, b.tenant, "c1", st.put)
		if got := cc.n.Load() - before; got != st.want {
			t.Errorf("%s: %d compiles, want %d", st.desc, got, st.want)
		}
	}
	if n := cc.locked.Load(); n > 0 {
		t.Errorf("%d compiles ran while the PUT held row locks", n)
	}
}

// A preview warns of each variable the template reads that the variables
// do not hold (it renders empty); none when all are given.
func TestPreviewWarnsOfMissingVariables(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.put(t, b.tenant, "w", create("W", "Hi {{ contact.firstName }}",
		`<p>{{ greeting }} <a href="{{ unsubscribeUrl }}">stop</a> {% for i in items %}{{ i }}{% endfor %}</p>`))
	m, err := b.renderer.Preview(ctx, b.tenant, "w", map[string]any{"greeting": "Hello"}, "")
	warnings := m.Warnings
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"variable contact.firstName is not set: it renders empty", "variable items is not set: it renders empty"}
	if !slices.Equal(warnings, want) {
		t.Fatalf("warnings %q, want %q", warnings, want)
	}
	m, err = b.renderer.Preview(ctx, b.tenant, "w", map[string]any{"greeting": "Hello", "items": []any{1},
		"contact": map[string]any{"properties": map[string]any{"firstName": "Ann"}}}, "")
	warnings = m.Warnings
	if err != nil || warnings == nil || len(warnings) != 0 {
		t.Fatalf("warnings %q, %v; want none (a property is also contact.<key>)", warnings, err)
	}
}
