package segments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/page"
	"tidings/internal/segments"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

// Two tenants in one fresh database: the first is the one under test, the
// second only checks isolation.
const (
	tenantA = "ten_a"
	tenantB = "ten_b"
)

// bundle is what a segments test works with.
type bundle struct {
	ctx      context.Context
	db       *store.DB
	segs     *segments.Store
	contacts *contacts.Store
}

func setup(t testing.TB) *bundle {
	t.Helper()
	db := testenv.DB(t)
	b := &bundle{ctx: context.Background(), db: db, segs: &segments.Store{DB: db},
		contacts: &contacts.Store{DB: db, FreeLimit: 1000}}
	if _, err := db.Pool.Exec(b.ctx, `INSERT INTO tenants (id, name, plan) VALUES ($1, 'A', 'pro'), ($2, 'B', 'pro')`,
		tenantA, tenantB); err != nil {
		t.Fatal(err)
	}
	return b
}

// propRules is a tree of one property leaf.
func propRules(field, op string, value any) json.RawMessage {
	return mustJSON(map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "property", "field": field, "operator": op, "value": value}}})
}

// refRules is a tree of memberOf leaves, one per id.
func refRules(ids ...string) json.RawMessage {
	conds := []any{}
	for _, id := range ids {
		conds = append(conds, map[string]any{"type": "segment", "segmentId": id, "operator": "memberOf"})
	}
	return mustJSON(map[string]any{"operator": "and", "conditions": conds})
}

// allRules matches every contact.
var allRules = json.RawMessage(`{"operator":"and","conditions":[]}`)

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// create adds a segment of tenant with the given rules, named name.
func (b *bundle) create(t *testing.T, tenant, name string, rules json.RawMessage) queries.Segment {
	t.Helper()
	s, err := b.segs.Create(b.ctx, tenant, segments.Input{Name: ptr(name), Rules: rules})
	if err != nil {
		t.Fatalf("create segment %s: %v", name, err)
	}
	return s
}

// get returns a segment and its dependedBy, failing the test on error.
func (b *bundle) get(t *testing.T, tenant, id string) (queries.Segment, []string) {
	t.Helper()
	s, by, err := b.segs.Get(b.ctx, tenant, id)
	if err != nil {
		t.Fatalf("get segment %s: %v", id, err)
	}
	return s, by
}

// contact adds a contact of tenant with the given properties.
func (b *bundle) contact(t testing.TB, tenant, email string, props map[string]any) string {
	t.Helper()
	c, err := b.contacts.Create(b.ctx, tenant, contacts.Input{Email: email, Properties: contacts.Patch{Set: props}})
	if err != nil {
		t.Fatalf("create contact %s: %v", email, err)
	}
	return c.ID
}

// setProps overwrites some properties of a contact.
func (b *bundle) setProps(t *testing.T, tenant, id string, props map[string]any) {
	t.Helper()
	raw := map[string]json.RawMessage{}
	for k, v := range props {
		raw[k] = mustJSON(v)
	}
	if _, err := b.contacts.Update(b.ctx, tenant, id, contacts.Change{PropertiesSent: true, Properties: raw}); err != nil {
		t.Fatalf("update contact %s: %v", id, err)
	}
}

// compute computes a segment, failing the test on error.
func (b *bundle) compute(t *testing.T, tenant, id string) segments.Result {
	t.Helper()
	res, err := b.segs.Compute(b.ctx, tenant, id)
	if err != nil {
		t.Fatalf("compute %s: %v", id, err)
	}
	return res
}

// members lists every member of a segment in one page.
func (b *bundle) members(t *testing.T, tenant, id string) []string {
	t.Helper()
	m, err := b.segs.Members(b.ctx, tenant, id, page.Params{Limit: 1000})
	if err != nil {
		t.Fatalf("members of %s: %v", id, err)
	}
	return m.ContactIDs()
}

// sorted returns a sorted copy, for comparing with member lists, which are
// ordered by contact id.
func sorted(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// wantErr checks that err is an *apperr.Error with the kind and code.
func wantErr(t *testing.T, err error, kind apperr.Kind, code string) *apperr.Error {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok {
		t.Fatalf("want %s %s, got %v", kind, code, err)
	}
	if e.Kind != kind || e.Code != code {
		t.Fatalf("want %s %s, got %s %s (%s)", kind, code, e.Kind, e.Code, e.Message)
	}
	return e
}

// snapshot is the part of a segment that a rejected change must leave alone.
func snapshot(s queries.Segment, by []string) string {
	var rules any
	_ = json.Unmarshal(s.Rules, &rules)
	return fmt.Sprintf("name=%q rules=%v enabled=%v version=%d dependsOn=%v dependedBy=%v members=%d computed=%v updated=%v",
		s.Name, rules, s.Enabled, s.Version, s.DependsOn, by, s.MemberCount, s.LastComputedAt, s.UpdatedAt)
}
