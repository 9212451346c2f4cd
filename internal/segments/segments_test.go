package segments_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/segments"
)

func TestReferencesBookkeeping(t *testing.T) {
	t.Parallel()
	b := setup(t)

	a := b.create(t, tenantA, "a", propRules("plan", "equals", "pro"))
	c := b.create(t, tenantA, "c", propRules("plan", "equals", "free"))
	if len(a.DependsOn) != 0 {
		t.Fatalf("a refers to nothing, dependsOn = %v", a.DependsOn)
	}

	// Create: a reference listed once however often it appears.
	x := b.create(t, tenantA, "x", refRules(a.ID, a.ID))
	if !slices.Equal(x.DependsOn, []string{a.ID}) {
		t.Fatalf("x dependsOn = %v, want [%s]", x.DependsOn, a.ID)
	}
	if _, by := b.get(t, tenantA, a.ID); !slices.Equal(by, []string{x.ID}) {
		t.Fatalf("a dependedBy = %v, want [%s]", by, x.ID)
	}
	if _, by := b.get(t, tenantA, x.ID); len(by) != 0 {
		t.Fatalf("x dependedBy = %v, want none", by)
	}

	// PATCH re-pointing x from a to c releases a.
	x2, _, err := b.segs.Update(b.ctx, tenantA, x.ID, segments.Input{Rules: refRules(c.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x2.DependsOn, []string{c.ID}) {
		t.Fatalf("after re-pointing x dependsOn = %v, want [%s]", x2.DependsOn, c.ID)
	}
	if stored, _ := b.get(t, tenantA, x.ID); !slices.Equal(stored.DependsOn, []string{c.ID}) {
		t.Fatalf("stored x dependsOn = %v", stored.DependsOn)
	}
	if _, by := b.get(t, tenantA, a.ID); len(by) != 0 {
		t.Fatalf("a still dependedBy %v after x was re-pointed", by)
	}
	if _, by := b.get(t, tenantA, c.ID); !slices.Equal(by, []string{x.ID}) {
		t.Fatalf("c dependedBy = %v, want [%s]", by, x.ID)
	}

	// PATCH without rules keeps the references.
	x3, _, err := b.segs.Update(b.ctx, tenantA, x.ID, segments.Input{Name: ptr("x renamed")})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x3.DependsOn, []string{c.ID}) {
		t.Fatalf("a name-only PATCH changed dependsOn to %v", x3.DependsOn)
	}

	// Two referrers, listed in id order.
	y := b.create(t, tenantA, "y", refRules(c.ID, a.ID))
	if !slices.Equal(y.DependsOn, []string{c.ID, a.ID}) {
		t.Fatalf("y dependsOn = %v", y.DependsOn)
	}
	if _, by := b.get(t, tenantA, c.ID); !slices.Equal(by, sorted(x.ID, y.ID)) {
		t.Fatalf("c dependedBy = %v, want %v", by, sorted(x.ID, y.ID))
	}

	// Delete of a referrer releases its references.
	if err := b.segs.Delete(b.ctx, tenantA, y.ID); err != nil {
		t.Fatal(err)
	}
	if _, by := b.get(t, tenantA, a.ID); len(by) != 0 {
		t.Fatalf("a dependedBy = %v after y was deleted", by)
	}
	if _, by := b.get(t, tenantA, c.ID); !slices.Equal(by, []string{x.ID}) {
		t.Fatalf("c dependedBy = %v after y was deleted", by)
	}
	_, _, err = b.segs.Get(b.ctx, tenantA, y.ID)
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")
	err = b.segs.Delete(b.ctx, tenantA, y.ID)
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")

	// a is free again after the re-pointing.
	if err := b.segs.Delete(b.ctx, tenantA, a.ID); err != nil {
		t.Fatalf("a is no longer referenced, delete: %v", err)
	}
}

func TestDeleteReferencedRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inner := b.create(t, tenantA, "inner", propRules("plan", "equals", "pro"))
	outer := b.create(t, tenantA, "outer", refRules(inner.ID))
	b.contact(t, tenantA, "p@example.com", map[string]any{"plan": "pro"})
	b.compute(t, tenantA, inner.ID)
	before := snapshot(b.get(t, tenantA, inner.ID))

	err := b.segs.Delete(b.ctx, tenantA, inner.ID)
	e := wantErr(t, err, apperr.KindConflict, "SEGMENT_REFERENCED")
	if by, _ := e.Details["dependedBy"].([]string); !slices.Equal(by, []string{outer.ID}) {
		t.Fatalf("details.dependedBy = %#v, want [%s]", e.Details["dependedBy"], outer.ID)
	}
	if after := snapshot(b.get(t, tenantA, inner.ID)); after != before {
		t.Fatalf("refused delete changed the segment:\nbefore %s\nafter  %s", before, after)
	}
	if m := b.members(t, tenantA, inner.ID); len(m) != 1 {
		t.Fatalf("refused delete dropped members: %v", m)
	}

	// Once the referrer is gone the delete goes through.
	if err := b.segs.Delete(b.ctx, tenantA, outer.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.segs.Delete(b.ctx, tenantA, inner.ID); err != nil {
		t.Fatal(err)
	}
	_, _, err = b.segs.Get(b.ctx, tenantA, inner.ID)
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")
}

func TestVersionChangesOnlyWithRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.create(t, tenantA, "s", propRules("plan", "equals", "pro"))
	v := segments.Version(s.Version)
	if v == "" {
		t.Fatal("empty version")
	}

	steps := []struct {
		desc    string
		in      segments.Input
		changed bool
	}{
		{desc: "name only", in: segments.Input{Name: ptr("renamed")}},
		{desc: "description and enabled", in: segments.Input{Description: ptr("d"), SetDesc: true, Enabled: new(false)}},
		{desc: "same rules", in: segments.Input{Rules: propRules("plan", "equals", "pro")}},
		{desc: "same rules, other spacing and key order",
			in: segments.Input{Rules: json.RawMessage(` { "conditions" : [ {"value":"pro", "operator":"equals", "field":"plan", "type":"property"} ], "operator" : "and" } `)}},
		{desc: "same rules with a name change", in: segments.Input{Name: ptr("again"), Rules: propRules("plan", "equals", "pro")}},
		{desc: "other value", in: segments.Input{Rules: propRules("plan", "equals", "free")}, changed: true},
		{desc: "new rules again", in: segments.Input{Rules: propRules("plan", "equals", "free")}},
		{desc: "other operator", in: segments.Input{Rules: propRules("plan", "notEquals", "free")}, changed: true},
		{desc: "back to the first rules", in: segments.Input{Rules: propRules("plan", "equals", "pro")}, changed: true},
		{desc: "clear description", in: segments.Input{SetDesc: true}},
		// jsonb writes 1e2 back as 100: resending the same body is no change.
		{desc: "number in exponent form", in: segments.Input{Rules: propRules("score", "greaterThan", json.Number("1e2"))}, changed: true},
		{desc: "same exponent form again", in: segments.Input{Rules: propRules("score", "greaterThan", json.Number("1e2"))}},
		{desc: "same value spelled out", in: segments.Input{Rules: propRules("score", "greaterThan", json.Number("100.0"))}},
	}
	for _, st := range steps {
		got, _, err := b.segs.Update(b.ctx, tenantA, s.ID, st.in)
		if err != nil {
			t.Fatalf("%s: %v", st.desc, err)
		}
		nv := segments.Version(got.Version)
		if changed := nv != v; changed != st.changed {
			t.Fatalf("%s: version %s -> %s, want changed=%v", st.desc, v, nv, st.changed)
		}
		if stored, _ := b.get(t, tenantA, s.ID); segments.Version(stored.Version) != nv {
			t.Fatalf("%s: stored version %d, returned %s", st.desc, stored.Version, nv)
		}
		v = nv
	}

	final, _ := b.get(t, tenantA, s.ID)
	if final.Name != "again" || final.Description != nil || final.Enabled {
		t.Fatalf("name/description/enabled not applied: %s", snapshot(final, nil))
	}
	if final.LastComputedAt != nil || final.ComputedVersion != nil {
		t.Fatalf("a rules change must not compute: %s", snapshot(final, nil))
	}
}

func TestCyclesRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		// chain is how many segments hang on the first: chain[i] refers to
		// chain[i-1]. The test then points the first at the last.
		chain int
		want  func(ids []string) []string
	}{
		{desc: "self", chain: 1, want: func(ids []string) []string { return []string{ids[0], ids[0]} }},
		{desc: "two", chain: 2, want: func(ids []string) []string { return []string{ids[0], ids[1], ids[0]} }},
		{desc: "three", chain: 3, want: func(ids []string) []string { return []string{ids[0], ids[2], ids[1], ids[0]} }},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ids := []string{b.create(t, tenantA, "s0", propRules("plan", "equals", "pro")).ID}
			for i := 1; i < tt.chain; i++ {
				ids = append(ids, b.create(t, tenantA, fmt.Sprint("s", i), refRules(ids[i-1])).ID)
			}
			before := map[string]string{}
			for _, id := range ids {
				before[id] = snapshot(b.get(t, tenantA, id))
			}

			// The reference hides in a nested group beside a property leaf.
			closing := mustJSON(map[string]any{"operator": "and", "conditions": []any{
				map[string]any{"type": "property", "field": "plan", "operator": "exists"},
				map[string]any{"operator": "or", "conditions": []any{
					map[string]any{"type": "segment", "segmentId": ids[len(ids)-1], "operator": "notMemberOf"}}}}})
			_, _, err := b.segs.Update(b.ctx, tenantA, ids[0], segments.Input{Name: ptr("renamed"), Rules: closing})
			e := wantErr(t, err, apperr.KindUnprocessable, "CIRCULAR_DEPENDENCY")
			if cycle, _ := e.Details["cycle"].([]string); !slices.Equal(cycle, tt.want(ids)) {
				t.Fatalf("details.cycle = %#v, want %v", e.Details["cycle"], tt.want(ids))
			}
			for _, id := range ids {
				if after := snapshot(b.get(t, tenantA, id)); after != before[id] {
					t.Fatalf("rejected PATCH changed %s:\nbefore %s\nafter  %s", id, before[id], after)
				}
			}
		})
	}
}

func TestUnknownReferenceRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := func() error {
		_, err := b.segs.Create(b.ctx, tenantA, segments.Input{Name: ptr("x"), Rules: refRules("seg_missing")})
		return err
	}()
	e := wantErr(t, err, apperr.KindInvalid, "VALIDATION_ERROR")
	fields, _ := e.Details["fields"].(map[string]any)
	if _, ok := fields["rules.conditions[0].segmentId"]; !ok {
		t.Fatalf("details.fields = %v, want rules.conditions[0].segmentId", fields)
	}
	if n := countSegments(t, b, tenantA); n != 0 {
		t.Fatalf("rejected create stored %d segments", n)
	}

	// The same on PATCH, with the second of two leaves unknown.
	a := b.create(t, tenantA, "a", propRules("plan", "equals", "pro"))
	s := b.create(t, tenantA, "s", refRules(a.ID))
	before := snapshot(b.get(t, tenantA, s.ID))
	_, _, err = b.segs.Update(b.ctx, tenantA, s.ID, segments.Input{Rules: refRules(a.ID, "seg_missing")})
	e = wantErr(t, err, apperr.KindInvalid, "VALIDATION_ERROR")
	fields, _ = e.Details["fields"].(map[string]any)
	if _, ok := fields["rules.conditions[1].segmentId"]; !ok || len(fields) != 1 {
		t.Fatalf("details.fields = %v, want only rules.conditions[1].segmentId", fields)
	}
	if after := snapshot(b.get(t, tenantA, s.ID)); after != before {
		t.Fatalf("rejected PATCH changed the segment:\nbefore %s\nafter  %s", before, after)
	}
}

func countSegments(t *testing.T, b *bundle, tenant string) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM segments WHERE tenant_id = $1`, tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCompute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c1 := b.contact(t, tenantA, "c1@example.com", map[string]any{"plan": "pro"})
	c2 := b.contact(t, tenantA, "c2@example.com", map[string]any{"plan": "free"})
	c3 := b.contact(t, tenantA, "c3@example.com", map[string]any{"plan": "pro"})
	b.contact(t, tenantA, "c4@example.com", nil)
	b.contact(t, tenantB, "c1@example.com", map[string]any{"plan": "pro"})
	s := b.create(t, tenantA, "pro", propRules("plan", "equals", "pro"))

	start := time.Now()
	res := b.compute(t, tenantA, s.ID)
	if res.Processed != 4 || res.Changed != 2 {
		t.Fatalf("first compute processed=%d changed=%d, want 4 and 2", res.Processed, res.Changed)
	}
	if res.Segment.MemberCount != 2 || res.Segment.LastComputedAt == nil ||
		res.Segment.LastComputedAt.Before(start.Add(-time.Second)) {
		t.Fatalf("first compute: %s", snapshot(res.Segment, nil))
	}
	if res.Segment.ComputedVersion == nil || *res.Segment.ComputedVersion != res.Segment.Version {
		t.Fatalf("computedVersion %v, version %d", res.Segment.ComputedVersion, res.Segment.Version)
	}
	if m := b.members(t, tenantA, s.ID); !slices.Equal(m, sorted(c1, c3)) {
		t.Fatalf("members %v, want %v", m, sorted(c1, c3))
	}
	first := *res.Segment.LastComputedAt

	// A recompute with nothing changed still confirms the members.
	res = b.compute(t, tenantA, s.ID)
	if res.Processed != 4 || res.Changed != 0 || res.Segment.MemberCount != 2 {
		t.Fatalf("recompute processed=%d changed=%d members=%d", res.Processed, res.Changed, res.Segment.MemberCount)
	}
	if !res.Segment.LastComputedAt.After(first) {
		t.Fatalf("lastComputedAt %v not after %v", res.Segment.LastComputedAt, first)
	}

	// c1 leaves, c2 joins.
	b.setProps(t, tenantA, c1, map[string]any{"plan": "free"})
	b.setProps(t, tenantA, c2, map[string]any{"plan": "pro"})
	res = b.compute(t, tenantA, s.ID)
	if res.Processed != 4 || res.Changed != 2 || res.Segment.MemberCount != 2 {
		t.Fatalf("after swap processed=%d changed=%d members=%d, want 4, 2, 2", res.Processed, res.Changed, res.Segment.MemberCount)
	}
	if m := b.members(t, tenantA, s.ID); !slices.Equal(m, sorted(c2, c3)) {
		t.Fatalf("members %v, want %v", m, sorted(c2, c3))
	}
	stored, _ := b.get(t, tenantA, s.ID)
	if stored.MemberCount != 2 || stored.LastComputedAt == nil || !stored.LastComputedAt.Equal(*res.Segment.LastComputedAt) {
		t.Fatalf("stored after compute: %s", snapshot(stored, nil))
	}

	// A rules change makes everyone else join and the old members leave.
	if _, _, err := b.segs.Update(b.ctx, tenantA, s.ID, segments.Input{Rules: propRules("plan", "notEquals", "pro")}); err != nil {
		t.Fatal(err)
	}
	if m := b.members(t, tenantA, s.ID); !slices.Equal(m, sorted(c2, c3)) {
		t.Fatalf("a rules change must not recompute; members %v", m)
	}
	res = b.compute(t, tenantA, s.ID)
	if res.Changed != 4 || res.Segment.MemberCount != 2 {
		t.Fatalf("after rules change changed=%d members=%d, want 4 and 2", res.Changed, res.Segment.MemberCount)
	}
}

func TestComputeDisabled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.contact(t, tenantA, "c@example.com", map[string]any{"plan": "pro"})

	off, err := b.segs.Create(b.ctx, tenantA, segments.Input{Name: ptr("off"), Rules: allRules, Enabled: new(false)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.segs.Compute(b.ctx, tenantA, off.ID)
	wantErr(t, err, apperr.KindInvalid, "VALIDATION_ERROR")
	if s, _ := b.get(t, tenantA, off.ID); s.LastComputedAt != nil || s.MemberCount != 0 || len(b.members(t, tenantA, off.ID)) != 0 {
		t.Fatalf("refused compute left traces: %s", snapshot(s, nil))
	}

	// Disabled after a compute: the members stay as they were.
	on := b.create(t, tenantA, "on", allRules)
	b.compute(t, tenantA, on.ID)
	if _, _, err := b.segs.Update(b.ctx, tenantA, on.ID, segments.Input{Enabled: new(false)}); err != nil {
		t.Fatal(err)
	}
	b.contact(t, tenantA, "d@example.com", nil)
	before := snapshot(b.get(t, tenantA, on.ID))
	_, err = b.segs.Compute(b.ctx, tenantA, on.ID)
	wantErr(t, err, apperr.KindInvalid, "VALIDATION_ERROR")
	if after := snapshot(b.get(t, tenantA, on.ID)); after != before {
		t.Fatalf("refused compute changed the segment:\nbefore %s\nafter  %s", before, after)
	}
	if m := b.members(t, tenantA, on.ID); len(m) != 1 {
		t.Fatalf("refused compute changed members: %v", m)
	}
}

func TestComputeNestedUsesCurrentRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	proHigh := b.contact(t, tenantA, "ph@example.com", map[string]any{"plan": "pro", "score": 50})
	b.contact(t, tenantA, "pl@example.com", map[string]any{"plan": "pro", "score": 5})
	freeHigh := b.contact(t, tenantA, "fh@example.com", map[string]any{"plan": "free", "score": 50})
	b.contact(t, tenantA, "fl@example.com", map[string]any{"plan": "free", "score": 5})

	inner := b.create(t, tenantA, "inner", propRules("plan", "equals", "pro"))
	outer := b.create(t, tenantA, "outer", mustJSON(map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "segment", "segmentId": inner.ID, "operator": "memberOf"},
		map[string]any{"type": "property", "field": "score", "operator": "greaterOrEqual", "value": 10}}}))
	// A segment never computed still resolves for its referrers.
	if res := b.compute(t, tenantA, outer.ID); res.Segment.MemberCount != 1 {
		t.Fatalf("outer members %d, want 1", res.Segment.MemberCount)
	}
	if m := b.members(t, tenantA, outer.ID); !slices.Equal(m, []string{proHigh}) {
		t.Fatalf("outer members %v, want [%s]", m, proHigh)
	}
	b.compute(t, tenantA, inner.ID)
	innerMembers := b.members(t, tenantA, inner.ID)

	// inner now means free, but is not recomputed: its stored members are
	// still the pro contacts.
	if _, _, err := b.segs.Update(b.ctx, tenantA, inner.ID, segments.Input{Rules: propRules("plan", "equals", "free")}); err != nil {
		t.Fatal(err)
	}
	res := b.compute(t, tenantA, outer.ID)
	if m := b.members(t, tenantA, outer.ID); !slices.Equal(m, []string{freeHigh}) {
		t.Fatalf("outer members %v, want [%s] (inner's current rules)", m, freeHigh)
	}
	if res.Changed != 2 || res.Segment.MemberCount != 1 {
		t.Fatalf("changed %d, memberCount %d, want 2 and 1", res.Changed, res.Segment.MemberCount)
	}
	if m := b.members(t, tenantA, inner.ID); !slices.Equal(m, innerMembers) {
		t.Fatalf("computing outer changed inner's members: %v -> %v", innerMembers, m)
	}

	// notMemberOf is the complement of inner's current rules.
	not := b.create(t, tenantA, "not", mustJSON(map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "segment", "segmentId": inner.ID, "operator": "notMemberOf"},
		map[string]any{"type": "property", "field": "score", "operator": "greaterOrEqual", "value": 10}}}))
	if res := b.compute(t, tenantA, not.ID); res.Segment.MemberCount != 1 {
		t.Fatalf("notMemberOf memberCount %d, want 1", res.Segment.MemberCount)
	}
	if m := b.members(t, tenantA, not.ID); !slices.Equal(m, []string{proHigh}) {
		t.Fatalf("notMemberOf members %v, want [%s]", m, proHigh)
	}
}

func TestMembersPagination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var all []string
	for i := range 7 {
		all = append(all, b.contact(t, tenantA, fmt.Sprintf("m%d@example.com", i), nil))
	}
	s := b.create(t, tenantA, "all", allRules)
	b.compute(t, tenantA, s.ID)
	want := sorted(all...)

	if m := b.members(t, tenantA, s.ID); !slices.Equal(m, want) {
		t.Fatalf("one page: %v, want %v", m, want)
	}
	for _, limit := range []int{1, 2, 3, 7, 8} {
		var got []string
		p := page.Params{Limit: limit}
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			m, err := b.segs.Members(b.ctx, tenantA, s.ID, p)
			if err != nil {
				t.Fatal(err)
			}
			if m.Segment.ID != s.ID || m.Segment.MemberCount != int64(len(want)) {
				t.Fatalf("limit %d: Members returned segment %s", limit, snapshot(m.Segment, nil))
			}
			if len(m.ContactIDs()) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(m.ContactIDs()))
			}
			got = append(got, m.ContactIDs()...)
			if m.Next == nil {
				break
			}
			p.After = m.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: pages gave %v, want %v", limit, got, want)
		}
	}

	// A cursor that is not a member still pages from where it sorts.
	m, err := b.segs.Members(b.ctx, tenantA, s.ID, page.Params{After: &page.Cursor{ID: want[2] + "~"}, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.ContactIDs(), want[3:5]) {
		t.Fatalf("after a non-member cursor: %v, want %v", m.ContactIDs(), want[3:5])
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a1 := b.contact(t, tenantA, "a1@example.com", map[string]any{"plan": "pro"})
	a2 := b.contact(t, tenantA, "a2@example.com", map[string]any{"plan": "pro"})
	// Same email and properties in the other tenant.
	b1 := b.contact(t, tenantB, "a1@example.com", map[string]any{"plan": "pro"})
	b.contact(t, tenantB, "b2@example.com", map[string]any{"plan": "pro"})
	b.contact(t, tenantB, "b3@example.com", map[string]any{"plan": "free"})

	s := b.create(t, tenantA, "pro", propRules("plan", "equals", "pro"))
	before := snapshot(b.get(t, tenantA, s.ID))

	_, _, err := b.segs.Get(b.ctx, tenantB, s.ID)
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")
	_, _, err = b.segs.Update(b.ctx, tenantB, s.ID, segments.Input{Name: ptr("hijacked"), Rules: allRules, Enabled: new(false)})
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")
	_, err = b.segs.Compute(b.ctx, tenantB, s.ID)
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")
	_, err = b.segs.Members(b.ctx, tenantB, s.ID, page.Params{Limit: 10})
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")
	err = b.segs.Delete(b.ctx, tenantB, s.ID)
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")
	// Tenant B cannot refer to it either.
	_, err = b.segs.Create(b.ctx, tenantB, segments.Input{Name: ptr("ref"), Rules: refRules(s.ID)})
	e := wantErr(t, err, apperr.KindInvalid, "VALIDATION_ERROR")
	if fields, _ := e.Details["fields"].(map[string]any); fields["rules.conditions[0].segmentId"] == nil {
		t.Fatalf("details.fields = %v", e.Details["fields"])
	}
	if after := snapshot(b.get(t, tenantA, s.ID)); after != before {
		t.Fatalf("tenant B changed tenant A's segment:\nbefore %s\nafter  %s", before, after)
	}

	// A compute sees its own tenant's contacts only.
	res := b.compute(t, tenantA, s.ID)
	if res.Processed != 2 || res.Changed != 2 || res.Segment.MemberCount != 2 {
		t.Fatalf("tenant A compute processed=%d changed=%d members=%d, want 2, 2, 2", res.Processed, res.Changed, res.Segment.MemberCount)
	}
	if m := b.members(t, tenantA, s.ID); !slices.Equal(m, sorted(a1, a2)) {
		t.Fatalf("tenant A members %v, want %v", m, sorted(a1, a2))
	}
	sb := b.create(t, tenantB, "everyone", allRules)
	res = b.compute(t, tenantB, sb.ID)
	if res.Processed != 3 || res.Segment.MemberCount != 3 {
		t.Fatalf("tenant B compute processed=%d members=%d, want 3 and 3", res.Processed, res.Segment.MemberCount)
	}
	if m := b.members(t, tenantB, sb.ID); !slices.Contains(m, b1) || slices.Contains(m, a1) || slices.Contains(m, a2) {
		t.Fatalf("tenant B members %v", m)
	}
	// Tenant A's membership is untouched by B's compute, and B's own
	// segment is equally invisible to A.
	if m := b.members(t, tenantA, s.ID); !slices.Equal(m, sorted(a1, a2)) {
		t.Fatalf("tenant A members %v after B's compute", m)
	}
	_, err = b.segs.Compute(b.ctx, tenantA, sb.ID)
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")
}
