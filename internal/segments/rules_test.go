package segments_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/segments"
)

// fieldNames are the fields a VALIDATION_ERROR names.
func fieldNames(t *testing.T, err error) []string {
	t.Helper()
	e := wantErr(t, err, apperr.KindInvalid, "VALIDATION_ERROR")
	fields, _ := e.Details["fields"].(map[string]any)
	return slices.Sorted(maps.Keys(fields))
}

// A segment's name is required on create, trimmed, 1-256 characters; its
// description at most 2000; both judged on create and update alike, before
// anything is written.
func TestTextFieldLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	existing := b.create(t, tenantA, "kept", allRules)
	long := func(n int) *string { s := strings.Repeat("é", n); return &s }
	tests := []struct {
		desc   string
		in     segments.Input
		update bool
		fields []string // nil: accepted
	}{
		{desc: "create without name", in: segments.Input{Rules: allRules}, fields: []string{"name"}},
		{desc: "create with a blank name", in: segments.Input{Name: ptr("   "), Rules: allRules}, fields: []string{"name"}},
		{desc: "create with 256 characters", in: segments.Input{Name: long(256), Rules: allRules}},
		{desc: "create with 257 characters", in: segments.Input{Name: long(257), Rules: allRules}, fields: []string{"name"}},
		{desc: "create with a long description and name", in: segments.Input{Name: long(257), Description: long(2001), SetDesc: true, Rules: allRules},
			fields: []string{"description", "name"}},
		{desc: "create with 2000 description characters", in: segments.Input{Name: ptr("d"), Description: long(2000), SetDesc: true, Rules: allRules}},
		{desc: "update without name", in: segments.Input{Enabled: new(true)}, update: true},
		{desc: "update to an empty name (null)", in: segments.Input{Name: ptr("")}, update: true, fields: []string{"name"}},
		{desc: "update to a long description", in: segments.Input{Description: long(2001), SetDesc: true}, update: true, fields: []string{"description"}},
	}
	for _, tt := range tests {
		var err error
		if tt.update {
			_, _, err = b.segs.Update(b.ctx, tenantA, existing.ID, tt.in)
		} else {
			_, err = b.segs.Create(b.ctx, tenantA, tt.in)
		}
		if tt.fields == nil {
			if err != nil {
				t.Errorf("%s: %v", tt.desc, err)
			}
			continue
		}
		if got := fieldNames(t, err); !slices.Equal(got, tt.fields) {
			t.Errorf("%s: fields %v, want %v", tt.desc, got, tt.fields)
		}
	}
	if s, _ := b.get(t, tenantA, existing.ID); s.Name != "kept" || s.Description != nil {
		t.Fatalf("a refused update was written: %s", snapshot(s, nil))
	}
	s := b.create(t, tenantA, "  padded  ", allRules)
	if s.Name != "padded" {
		t.Fatalf("name stored as %q, want it trimmed", s.Name)
	}
}

// Members report the version of the rules they were computed with: the
// current version before any compute, then the computed one until the next
// compute, however the rules change meanwhile.
func TestMembersReportComputedVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.contact(t, tenantA, "pro@example.com", map[string]any{"plan": "pro"})
	s := b.create(t, tenantA, "s", propRules("plan", "equals", "pro"))
	version := func() string {
		t.Helper()
		m, err := b.segs.Members(b.ctx, tenantA, s.ID, page.Params{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return m.Version
	}
	v1 := segments.Version(s.Version)
	if got := version(); got != v1 {
		t.Fatalf("never computed: version %s, want the current %s", got, v1)
	}
	b.compute(t, tenantA, s.ID)
	changed, _, err := b.segs.Update(b.ctx, tenantA, s.ID, segments.Input{Rules: propRules("plan", "equals", "free")})
	if err != nil {
		t.Fatal(err)
	}
	if v2 := segments.Version(changed.Version); v2 == v1 {
		t.Fatalf("rules change kept version %s", v1)
	}
	if got := version(); got != v1 {
		t.Fatalf("rules changed, not computed: version %s, want the computed %s", got, v1)
	}
	b.compute(t, tenantA, s.ID)
	if got := version(); got != segments.Version(changed.Version) {
		t.Fatalf("computed again: version %s, want %s", got, segments.Version(changed.Version))
	}
}

// A compute's own statements translate driver errors as every generated
// query does: a value the database refuses is a VALIDATION_ERROR, not an
// internal error. The rules compiler guards every cast, so the refusal is
// staged with a constraint that casts the contact id.
func TestComputeTranslatesDatabaseRefusal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.contact(t, tenantA, "c@example.com", nil)
	s := b.create(t, tenantA, "all", allRules)
	if _, err := b.db.Pool.Exec(b.ctx,
		`ALTER TABLE segment_members ADD CONSTRAINT numeric_contact CHECK (contact_id::numeric > 0)`); err != nil {
		t.Fatal(err)
	}
	_, err := b.segs.Compute(b.ctx, tenantA, s.ID)
	wantErr(t, err, apperr.KindInvalid, "VALIDATION_ERROR")
}
