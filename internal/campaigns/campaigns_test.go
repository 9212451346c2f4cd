package campaigns_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/campaigns"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

type bundle struct {
	ctx   context.Context
	db    *store.DB
	store *campaigns.Store
}

// setup makes tenants "ten_a" and "ten_b"; ten_a has sequence seq_1,
// template tpl_1 and segment seg_1, ten_b the same ids.
func setup(t *testing.T) *bundle {
	t.Helper()
	db := testenv.DB(t)
	b := &bundle{ctx: context.Background(), db: db, store: &campaigns.Store{DB: db}}
	for _, tenant := range []string{"ten_a", "ten_b"} {
		for _, sql := range []string{
			`INSERT INTO tenants (id, name) VALUES ($1, $1)`,
			`INSERT INTO sequences (tenant_id, id, name, content, trigger_event) VALUES ($1, 'seq_1', 's', 'x', 'e')`,
			`INSERT INTO templates (tenant_id, id, name, subject, content, compiled_html) VALUES ($1, 'tpl_1', 't', 's', 'c', 'h')`,
			`INSERT INTO segments (tenant_id, id, name, rules) VALUES ($1, 'seg_1', 'g', '{}')`,
		} {
			if _, err := db.Pool.Exec(b.ctx, sql, tenant); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b
}

func ptr(s string) *string { return &s }

// fields returns the details.fields of a VALIDATION_ERROR, failing otherwise.
func fields(t *testing.T, err error) map[string]any {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != "VALIDATION_ERROR" {
		t.Fatalf("want VALIDATION_ERROR, got %v", err)
	}
	f, _ := e.Details["fields"].(map[string]any)
	return f
}

// Every referenced sequence, template and segment must exist in the
// tenant; one answer names every problem, field rules included.
func TestCreateChecksReferences(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		desc       string
		in         campaigns.Input
		wantFields []string
	}{
		{desc: "all known", in: campaigns.Input{Name: ptr("c"), SequenceIDs: []string{"seq_1"},
			TemplateIDs: []string{"tpl_1"}, SegmentID: ptr("seg_1")}},
		{desc: "unknown sequence", in: campaigns.Input{Name: ptr("c"), SequenceIDs: []string{"seq_1", "seq_x"}},
			wantFields: []string{"sequenceIds"}},
		{desc: "unknown template", in: campaigns.Input{Name: ptr("c"), TemplateIDs: []string{"tpl_x"}},
			wantFields: []string{"templateIds"}},
		{desc: "unknown segment", in: campaigns.Input{Name: ptr("c"), SegmentID: ptr("seg_x")},
			wantFields: []string{"segmentId"}},
		{desc: "field and reference problems together", in: campaigns.Input{Name: ptr(" "), Status: ptr("live"),
			Goals: []string{" "}, SegmentID: ptr("seg_x")}, wantFields: []string{"goals", "name", "segmentId", "status"}},
		{desc: "name required", in: campaigns.Input{}, wantFields: []string{"name"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			cp, err := b.store.Create(b.ctx, "ten_a", tt.in)
			if tt.wantFields == nil {
				if err != nil || cp.Status != "draft" || cp.StartedAt != nil {
					t.Fatalf("%+v %v", cp, err)
				}
				return
			}
			f := fields(t, err)
			got := make([]string, 0, len(f))
			for k := range f {
				got = append(got, k)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantFields) {
				t.Fatalf("fields %v, want %v", f, tt.wantFields)
			}
		})
	}
	// Another tenant's references do not count.
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO sequences (tenant_id, id, name, content, trigger_event) VALUES ('ten_b', 'seq_b', 's', 'x', 'e')`); err != nil {
		t.Fatal(err)
	}
	_, err := b.store.Create(b.ctx, "ten_a", campaigns.Input{Name: ptr("c"), SequenceIDs: []string{"seq_b"}})
	if fields(t, err)["sequenceIds"] == nil {
		t.Fatal("another tenant's sequence accepted")
	}
}

func TestCreateKeepsOneOfEach(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cp, err := b.store.Create(b.ctx, "ten_a", campaigns.Input{Name: ptr("  c  "), Status: ptr("active"),
		SequenceIDs: []string{"seq_1", "seq_1"}, Goals: []string{"buy", "buy", "visit"}})
	if err != nil {
		t.Fatal(err)
	}
	if cp.Name != "c" || cp.Status != "draft" || !slices.Equal(cp.SequenceIds, []string{"seq_1"}) ||
		!slices.Equal(cp.Goals, []string{"buy", "visit"}) || cp.TemplateIds == nil {
		t.Fatalf("%+v", cp)
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cp, err := b.store.Create(b.ctx, "ten_a", campaigns.Input{Name: ptr("c"), SegmentID: ptr("seg_1")})
	if err != nil {
		t.Fatal(err)
	}
	// Associations are not changed by an update, and alone make it empty.
	_, err = b.store.Update(b.ctx, "ten_a", cp.ID, campaigns.Input{SequenceIDs: []string{"seq_1"}})
	if fields(t, err)["body"] == nil {
		t.Fatalf("empty update: %v", err)
	}
	_, err = b.store.Update(b.ctx, "ten_a", cp.ID, campaigns.Input{SegmentID: ptr("seg_x"), SetSegment: true})
	if fields(t, err)["segmentId"] == nil {
		t.Fatal("unknown segment accepted on update")
	}
	active, err := b.store.Update(b.ctx, "ten_a", cp.ID, campaigns.Input{Status: ptr("active")})
	if err != nil || active.StartedAt == nil || active.SegmentID == nil {
		t.Fatalf("first activation: %+v %v", active, err)
	}
	// startedAt is the first activation's; clearing the segment leaves the rest.
	if _, err := b.store.Update(b.ctx, "ten_a", cp.ID, campaigns.Input{Status: ptr("paused")}); err != nil {
		t.Fatal(err)
	}
	again, err := b.store.Update(b.ctx, "ten_a", cp.ID, campaigns.Input{Status: ptr("active"), SetSegment: true})
	if err != nil || !again.StartedAt.Equal(*active.StartedAt) || again.SegmentID != nil || again.Name != "c" {
		t.Fatalf("%+v %v", again, err)
	}
	if _, err := b.store.Update(b.ctx, "ten_b", cp.ID, campaigns.Input{Name: ptr("x")}); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("cross-tenant update: %v", err)
	}
}

func TestAssociations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cp, err := b.store.Create(b.ctx, "ten_a", campaigns.Input{Name: ptr("c")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc     string
		op       func(context.Context, string, string, string) (queries.Campaign, error)
		tenant   string
		id, ref  string
		wantCode string
	}{
		{desc: "unknown campaign before unknown sequence", op: b.store.AddSequence, tenant: "ten_a", id: "cmp_x", ref: "seq_x", wantCode: "NOT_FOUND"},
		{desc: "unknown sequence", op: b.store.AddSequence, tenant: "ten_a", id: cp.ID, ref: "seq_x", wantCode: "SEQUENCE_NOT_FOUND"},
		{desc: "unknown template", op: b.store.AddTemplate, tenant: "ten_a", id: cp.ID, ref: "tpl_x", wantCode: "TEMPLATE_NOT_FOUND"},
		{desc: "another tenant's campaign", op: b.store.AddTemplate, tenant: "ten_b", id: cp.ID, ref: "tpl_1", wantCode: "NOT_FOUND"},
		{desc: "remove from unknown campaign", op: b.store.RemoveSequence, tenant: "ten_a", id: "cmp_x", ref: "seq_1", wantCode: "NOT_FOUND"},
	}
	for _, tt := range tests {
		if _, err := tt.op(b.ctx, tt.tenant, tt.id, tt.ref); !apperr.IsCode(err, tt.wantCode) {
			t.Errorf("%s: got %v, want %s", tt.desc, err, tt.wantCode)
		}
	}
	for range 2 {
		if cp, err = b.store.AddTemplate(b.ctx, "ten_a", cp.ID, "tpl_1"); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(cp.TemplateIds, []string{"tpl_1"}) {
		t.Fatalf("adding twice keeps one: %v", cp.TemplateIds)
	}
	if cp, err = b.store.RemoveTemplate(b.ctx, "ten_a", cp.ID, "tpl_1"); err != nil || len(cp.TemplateIds) != 0 {
		t.Fatalf("%v %v", cp.TemplateIds, err)
	}
}

func TestListAndDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for i := range 5 {
		cp, err := b.store.Create(b.ctx, "ten_a", campaigns.Input{Name: ptr(fmt.Sprint("c", i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cp.ID)
	}
	if _, err := b.store.Update(b.ctx, "ten_a", ids[1], campaigns.Input{Status: ptr("archived")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range testenv.Pages(t, 2, func(p page.Params) ([]queries.Campaign, *page.Cursor, error) {
		return b.store.List(b.ctx, "ten_a", "", p)
	}) {
		got = append(got, r.ID)
	}
	slices.Reverse(got) // newest first
	if !slices.Equal(got, ids) {
		t.Fatalf("pages gave %v, want %v reversed", got, ids)
	}
	rows, _, err := b.store.List(b.ctx, "ten_a", "archived", page.Params{Limit: 10})
	if err != nil || len(rows) != 1 || rows[0].ID != ids[1] {
		t.Fatalf("by status: %v %v", rows, err)
	}
	if _, _, err := b.store.List(b.ctx, "ten_a", "live", page.Params{Limit: 10}); fields(t, err)["status"] == nil {
		t.Fatal("unknown status accepted")
	}
	if err := b.store.Delete(b.ctx, "ten_b", ids[0]); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("cross-tenant delete: %v", err)
	}
	if err := b.store.Delete(b.ctx, "ten_a", ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Get(b.ctx, "ten_a", ids[0]); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("deleted campaign: %v", err)
	}
}
