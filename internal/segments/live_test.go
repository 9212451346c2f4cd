package segments_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/events"
	"tidings/internal/rules"
	"tidings/internal/segments"
	"tidings/queries"
)

func live(b bool) *bool { return &b }

// createLive adds a live segment, failing the test on error.
func (b *bundle) createLive(t testing.TB, tenant, name string, r json.RawMessage) queries.Segment {
	t.Helper()
	s, err := b.segs.Create(b.ctx, tenant, segments.Input{Name: ptr(name), Rules: r, Live: live(true)})
	if err != nil {
		t.Fatalf("create live segment %s: %v", name, err)
	}
	return s
}

// drain empties the live queue.
func (b *bundle) drain(t *testing.T) {
	t.Helper()
	for {
		n, err := b.segs.DrainLive(b.ctx, 100)
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
		if n == 0 {
			return
		}
	}
}

// entries lists a contact's segment timeline entries as "type segmentId".
func (b *bundle) entries(t *testing.T, tenant, contact string) []string {
	t.Helper()
	rows, err := b.db.Pool.Query(b.ctx, `SELECT type || ' ' || (data->>'segmentId') FROM timeline_entries
		WHERE tenant_id = $1 AND contact_id = $2 AND type LIKE 'segment\_%' ORDER BY occurred_at, id`, tenant, contact)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func (b *bundle) memberCount(t *testing.T, tenant, id string) int64 {
	t.Helper()
	s, _ := b.get(t, tenant, id)
	return s.MemberCount
}

// A live segment may refer only to live segments; one that a live segment
// refers to cannot stop being live; becoming live computes it once without
// entered entries.
func TestLiveValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.contact(t, tenantA, "a@x.test", map[string]any{"plan": "pro"})
	plain := b.create(t, tenantA, "plain", propRules("plan", "equals", "pro"))

	_, err := b.segs.Create(b.ctx, tenantA, segments.Input{Name: ptr("l"), Rules: refRules(plain.ID), Live: live(true)})
	if got := fieldNames(t, err); !slices.Equal(got, []string{"rules.conditions[0].segmentId"}) {
		t.Fatalf("live over a non-live segment: fields %v", got)
	}

	// Becoming live computes once, silently.
	s, _, err := b.segs.Update(b.ctx, tenantA, plain.ID, segments.Input{Live: live(true)})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Live || s.LastComputedAt == nil || s.MemberCount != 1 {
		t.Fatalf("made live: live=%v computed=%v count=%d", s.Live, s.LastComputedAt, s.MemberCount)
	}
	if got := b.entries(t, tenantA, c); len(got) != 0 {
		t.Fatalf("becoming live wrote entries %v", got)
	}
	outer := b.createLive(t, tenantA, "outer", refRules(plain.ID))
	if outer.MemberCount != 1 {
		t.Fatalf("outer members %d, want 1", outer.MemberCount)
	}

	// plain is referenced by a live segment: it stays live.
	_, _, err = b.segs.Update(b.ctx, tenantA, plain.ID, segments.Input{Live: live(false)})
	wantErr(t, err, apperr.KindInvalid, "VALIDATION_ERROR")
	// outer may stop; then plain may too.
	if _, _, err := b.segs.Update(b.ctx, tenantA, outer.ID, segments.Input{Live: live(false)}); err != nil {
		t.Fatal(err)
	}
	if s, _, err = b.segs.Update(b.ctx, tenantA, plain.ID, segments.Input{Live: live(false)}); err != nil || s.Live {
		t.Fatalf("stop live: %v live=%v", err, s.Live)
	}
	// A non-live segment's rules may not become live-referring... a live
	// segment's rules change to a non-live reference is refused too.
	l := b.createLive(t, tenantA, "l2", allRules)
	_, _, err = b.segs.Update(b.ctx, tenantA, l.ID, segments.Input{Rules: refRules(plain.ID)})
	wantErr(t, err, apperr.KindInvalid, "VALIDATION_ERROR")
}

// Contact writes, custom events and a referenced segment's inputs move a
// live segment's members after a drain, with entries and memberCount.
func TestLiveFollowsWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pro := b.createLive(t, tenantA, "pro", propRules("plan", "equals", "pro"))
	bought := b.createLive(t, tenantA, "bought", mustJSON(map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "event", "name": "purchase", "operator": "occurred"},
		map[string]any{"type": "segment", "segmentId": pro.ID, "operator": "memberOf"}}}))
	other := b.createLive(t, tenantB, "pro B", propRules("plan", "equals", "pro"))

	c := b.contact(t, tenantA, "a@x.test", map[string]any{"plan": "pro"})
	cb := b.contact(t, tenantB, "a@x.test", map[string]any{"plan": "free"})
	b.drain(t)
	if got := b.members(t, tenantA, pro.ID); !slices.Equal(got, []string{c}) {
		t.Fatalf("pro members %v", got)
	}
	if got := b.members(t, tenantA, bought.ID); len(got) != 0 {
		t.Fatalf("bought members %v before the event", got)
	}
	rec := &events.Recorder{DB: b.db}
	if _, err := rec.RecordCustom(b.ctx, events.Custom{TenantID: tenantA, Email: "a@x.test", Name: "purchase",
		Properties: []byte("{}"), Timestamp: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.drain(t)
	if got := b.members(t, tenantA, bought.ID); !slices.Equal(got, []string{c}) {
		t.Fatalf("bought members %v after the event", got)
	}
	// Leaving pro makes it leave bought too (bought reads what pro reads).
	b.setProps(t, tenantA, c, map[string]any{"plan": "free"})
	b.drain(t)
	if got := b.members(t, tenantA, bought.ID); len(got) != 0 {
		t.Fatalf("bought members %v after leaving pro", got)
	}
	want := []string{"segment_entered " + pro.ID, "segment_entered " + bought.ID, "segment_exited " + pro.ID,
		"segment_exited " + bought.ID}
	got := b.entries(t, tenantA, c)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	if n := b.memberCount(t, tenantA, pro.ID); n != 0 {
		t.Fatalf("pro memberCount %d", n)
	}
	// Another tenant's segment saw nothing of tenant A.
	if got := b.members(t, tenantB, other.ID); len(got) != 0 {
		t.Fatalf("tenant B members %v", got)
	}
	b.setProps(t, tenantB, cb, map[string]any{"plan": "pro"})
	b.setProps(t, tenantA, c, map[string]any{"plan": "pro"})
	b.drain(t)
	if n := b.memberCount(t, tenantA, pro.ID); n != 1 {
		t.Fatalf("pro memberCount %d", n)
	}
	// A deleted contact leaves, and the count follows at once.
	if err := b.contacts.Delete(b.ctx, tenantA, c); err != nil {
		t.Fatal(err)
	}
	if n := b.memberCount(t, tenantA, pro.ID); n != 0 {
		t.Fatalf("pro memberCount %d after delete", n)
	}
	if n := b.memberCount(t, tenantB, other.ID); n != 1 {
		t.Fatalf("tenant B memberCount %d", n)
	}
	if n, err := b.segs.ReconcileLive(b.ctx, tenantA, pro.ID); err != nil || n != 0 {
		t.Fatalf("reconcile: %d repairs, %v", n, err)
	}
}

// The tick re-judges only the contacts whose inactiveDays or event within
// crossed a bound since the last tick, found by index ranges.
func TestLiveTick(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inactive := b.createLive(t, tenantA, "inactive", mustJSON(map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "derived", "field": "inactiveDays", "operator": "greaterThan", "value": 30}}}))
	recent := b.createLive(t, tenantA, "recent", mustJSON(map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "event", "name": "login", "operator": "occurred", "within": "1d"}}}))
	crossing := b.contact(t, tenantA, "cross@x.test", nil)
	old := b.contact(t, tenantA, "old@x.test", nil)
	young := b.contact(t, tenantA, "young@x.test", nil)
	// As if time had passed: the last tick two hours ago; crossing's last
	// event 31 days less one hour ago (so 30 whole days then, 31 now); old
	// long inactive and already a member; a login of young's that runs
	// out of its day in between.
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := b.db.Pool.Exec(b.ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`UPDATE contacts SET last_event_at = now() - interval '31 days' - interval '1 hour' WHERE tenant_id = $1 AND id = $2`, tenantA, crossing)
	exec(`UPDATE contacts SET last_event_at = now() - interval '100 days' WHERE tenant_id = $1 AND id = $2`, tenantA, old)
	exec(`INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
		VALUES ($1, 'evt_young', $2, 'login', '{}', now() - interval '25 hours')`, tenantA, young)
	exec(`INSERT INTO segment_members (tenant_id, segment_id, contact_id) VALUES ($1, $2, $3), ($1, $4, $5)`,
		tenantA, inactive.ID, old, recent.ID, young)
	exec(`UPDATE segments SET member_count = 1 WHERE tenant_id = $1 AND id = ANY ($2)`, tenantA, []string{inactive.ID, recent.ID})
	exec(`DELETE FROM segment_live_queue`)
	exec(`UPDATE segments SET live_judged_at = now() - interval '2 hours' WHERE tenant_id = $1`, tenantA)

	res, err := b.segs.TickLive(b.ctx, time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != 2 || res.Judged != 2 || res.Changed != 2 {
		t.Fatalf("tick %+v, want 2 segments, 2 judged (crossing, young), 2 changed", res)
	}
	if got := b.members(t, tenantA, inactive.ID); !slices.Equal(got, sorted(crossing, old)) {
		t.Fatalf("inactive members %v", got)
	}
	if got := b.members(t, tenantA, recent.ID); len(got) != 0 {
		t.Fatalf("recent members %v", got)
	}
	// Right after, nothing is due.
	if res, err := b.segs.TickLive(b.ctx, time.Minute, 10); err != nil || res.Segments != 0 {
		t.Fatalf("second tick %+v %v", res, err)
	}
	for _, id := range []string{inactive.ID, recent.ID} {
		if n, err := b.segs.ReconcileLive(b.ctx, tenantA, id); err != nil || n != 0 {
			t.Fatalf("reconcile %s: %d repairs, %v", id, n, err)
		}
	}
}

// After a randomised workload of contact creates, updates, deletes and
// events, every live segment's members equal what the full compute gives,
// and the reconcile repairs nothing.
func TestLiveAgreesWithCompute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rng := rand.New(rand.NewPCG(7, 40))
	leaf := func(i int) map[string]any {
		switch i % 6 {
		case 0:
			return map[string]any{"type": "property", "field": "plan", "operator": "equals", "value": []string{"pro", "free"}[i%2]}
		case 1:
			return map[string]any{"type": "property", "field": "score", "operator": "greaterThan", "value": 5}
		case 2:
			return map[string]any{"type": "event", "name": "buy", "operator": "occurred"}
		case 3:
			return map[string]any{"type": "event", "name": "view", "operator": "notOccurred", "within": "1h"}
		case 4:
			return map[string]any{"type": "derived", "field": "inactiveDays", "operator": "lessThan", "value": 1}
		}
		return map[string]any{"type": "property", "field": "tags", "operator": "includes", "value": "vip"}
	}
	var segs []queries.Segment
	for i := range 8 {
		conds := []any{leaf(i), leaf(i + rng.IntN(6))}
		if len(segs) > 0 && i%3 == 0 {
			conds = append(conds, map[string]any{"type": "segment", "segmentId": segs[rng.IntN(len(segs))].ID,
				"operator": []string{"memberOf", "notMemberOf"}[i%2]})
		}
		op := []string{"and", "or", "not"}[i%3]
		segs = append(segs, b.createLive(t, tenantA, fmt.Sprintf("s%d", i), mustJSON(map[string]any{"operator": op, "conditions": conds})))
	}
	rec := &events.Recorder{DB: b.db}
	var contacts []string
	emails := map[string]string{}
	for step := range 300 {
		switch k := rng.IntN(10); {
		case k < 3 || len(contacts) < 5:
			email := fmt.Sprintf("c%d@x.test", step)
			id := b.contact(t, tenantA, email, map[string]any{"plan": []string{"pro", "free"}[rng.IntN(2)], "score": rng.IntN(10)})
			contacts = append(contacts, id)
			emails[id] = email
		case k < 6:
			id := contacts[rng.IntN(len(contacts))]
			props := map[string]any{"score": rng.IntN(10)}
			if rng.IntN(2) == 0 {
				props["tags"] = []string{"vip"}
			} else {
				props["plan"] = []string{"pro", "free", "team"}[rng.IntN(3)]
			}
			b.setProps(t, tenantA, id, props)
		case k == 8:
			// A group-commit batch: one statement, one queue row for
			// several contacts (schema 0085).
			var ins []events.Custom
			for _, j := range rng.Perm(len(contacts))[:min(5, len(contacts))] {
				ins = append(ins, events.Custom{TenantID: tenantA, Email: emails[contacts[j]],
					Name: []string{"buy", "view"}[rng.IntN(2)], Properties: []byte("{}"), Timestamp: time.Now(), UpdateContact: true})
			}
			if _, errs := rec.RecordCustomMany(b.ctx, ins); errs[0] != nil {
				t.Fatal(errs[0])
			}
		case k < 9:
			id := contacts[rng.IntN(len(contacts))]
			if _, err := rec.RecordCustom(b.ctx, events.Custom{TenantID: tenantA, Email: emails[id],
				Name: []string{"buy", "view"}[rng.IntN(2)], Properties: []byte("{}"), Timestamp: time.Now()}); err != nil {
				t.Fatal(err)
			}
		default:
			i := rng.IntN(len(contacts))
			if err := b.contacts.Delete(b.ctx, tenantA, contacts[i]); err != nil {
				t.Fatal(err)
			}
			contacts = slices.Delete(contacts, i, i+1)
		}
		if rng.IntN(20) == 0 {
			b.drain(t) // drains interleaved with writes, as in production
		}
	}
	b.drain(t)
	for _, s := range segs {
		want := b.fullCompute(t, tenantA, s.ID)
		if got := b.members(t, tenantA, s.ID); !slices.Equal(got, want) {
			t.Errorf("segment %s: live members %v, full compute %v", s.Name, got, want)
		}
		if n := b.memberCount(t, tenantA, s.ID); n != int64(len(want)) {
			t.Errorf("segment %s: memberCount %d, want %d", s.Name, n, len(want))
		}
		if n, err := b.segs.ReconcileLive(b.ctx, tenantA, s.ID); err != nil || n != 0 {
			t.Errorf("segment %s: reconcile repaired %d (%v)", s.Name, n, err)
		}
	}
}

// fullCompute is what POST .../compute would make the members: the SQL
// predicate over every contact, read without writing.
func (b *bundle) fullCompute(t *testing.T, tenant, id string) []string {
	t.Helper()
	pred, args, err := segments.Predicate(b.ctx, b.db.Queries, tenant, id, 2)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := b.db.Pool.Query(b.ctx, "SELECT c.id FROM contacts c WHERE c.tenant_id = $1 AND ("+pred+") ORDER BY c.id",
		append([]any{tenant}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// Explain judges any segment on the contact's current data, node by node;
// another tenant's contact or segment is not found.
func TestExplain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.contact(t, tenantA, "a@x.test", map[string]any{"plan": "pro"})
	s := b.create(t, tenantA, "s", mustJSON(map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "property", "field": "plan", "operator": "equals", "value": "pro"},
		map[string]any{"type": "property", "field": "age", "operator": "greaterThan", "value": 3},
		map[string]any{"type": "event", "name": "buy", "operator": "notOccurred"}}}))
	e, err := b.segs.Explain(b.ctx, tenantA, s.ID, c)
	if err != nil {
		t.Fatal(err)
	}
	if e.IsMember || e.StoredIsMember {
		t.Fatalf("isMember %v stored %v", e.IsMember, e.StoredIsMember)
	}
	conds := e.Rules["conditions"].([]any)
	type leaf struct {
		result bool
		actual any
	}
	var got []leaf
	for _, x := range conds {
		m := x.(map[string]any)
		got = append(got, leaf{m["result"].(bool), m["actual"]})
	}
	want := []leaf{{true, "pro"}, {false, nil}, {true, nil}}
	if fmt.Sprint(got) != fmt.Sprint(want) || e.Rules["result"] != false {
		t.Fatalf("leaves %v, want %v (root %v)", got, want, e.Rules["result"])
	}
	b.compute(t, tenantA, s.ID)
	b.setProps(t, tenantA, c, map[string]any{"age": 4})
	if e, err = b.segs.Explain(b.ctx, tenantA, s.ID, c); err != nil || !e.IsMember || e.StoredIsMember {
		t.Fatalf("after update: member %v stored %v err %v", e.IsMember, e.StoredIsMember, err)
	}
	// Tenant isolation and the two 404s.
	_, err = b.segs.Explain(b.ctx, tenantB, s.ID, c)
	wantErr(t, err, apperr.KindNotFound, "SEGMENT_NOT_FOUND")
	sb := b.create(t, tenantB, "sb", allRules)
	_, err = b.segs.Explain(b.ctx, tenantB, sb.ID, c)
	wantErr(t, err, apperr.KindNotFound, "CONTACT_NOT_FOUND")
	_ = rules.OpAnd
}

// A write statement queues one row for all its contacts (schema 0085), not
// one per contact; an update of a field no live segment reads queues
// nothing; the reconcile leaves out the contacts a multi-contact row holds.
func TestLiveQueuePerStatement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for i := range 50 {
		ids = append(ids, b.contact(t, tenantA, fmt.Sprintf("c%d@x.test", i), map[string]any{"plan": "free"}))
	}
	bought := b.createLive(t, tenantA, "bought", mustJSON(map[string]any{"operator": "and", "conditions": []any{
		map[string]any{"type": "event", "name": "buy", "operator": "occurred"}}}))
	pro := b.createLive(t, tenantA, "pro", propRules("plan", "equals", "pro"))
	queue := func() (rows, contacts int) {
		t.Helper()
		if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM segment_live_queue`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		n, err := b.segs.LiveQueueLength(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rows, int(n)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := b.db.Pool.Exec(b.ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	b.drain(t)

	rec := &events.Recorder{DB: b.db}
	ins := make([]events.Custom, len(ids))
	for i := range ins {
		ins[i] = events.Custom{TenantID: tenantA, Email: fmt.Sprintf("c%d@x.test", i), Name: "buy",
			Properties: []byte("{}"), Timestamp: time.Now(), UpdateContact: true}
	}
	if _, errs := rec.RecordCustomMany(b.ctx, ins); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if r, c := queue(); r != 1 || c != 50 {
		t.Fatalf("a batch of 50 events queued %d rows of %d contacts, want 1 of 50", r, c)
	}
	b.drain(t)
	exec(`UPDATE contacts SET properties = properties || '{"other": 1}' WHERE tenant_id = $1`, tenantA)
	if r, _ := queue(); r != 0 {
		t.Fatalf("an update of an unread field queued %d rows", r)
	}
	exec(`UPDATE contacts SET properties = properties || '{"plan": "pro"}' WHERE tenant_id = $1 AND id = ANY ($2)`,
		tenantA, ids[:20])
	if r, c := queue(); r != 1 || c != 20 {
		t.Fatalf("one update of 20 contacts queued %d rows of %d contacts, want 1 of 20", r, c)
	}
	// Still queued: the reconcile leaves them to the drain (no drift).
	if n, err := b.segs.ReconcileLive(b.ctx, tenantA, pro.ID); err != nil || n != 0 {
		t.Fatalf("reconcile with 20 queued contacts: %d repairs, %v", n, err)
	}
	if n, err := b.segs.LiveQueueLength(b.ctx); err != nil || n != 20 {
		t.Fatalf("queue length %d (%v), want 20", n, err)
	}
	b.drain(t)
	if got := b.members(t, tenantA, pro.ID); !slices.Equal(got, sorted(ids[:20]...)) {
		t.Fatalf("pro members %v", got)
	}
	if got := b.members(t, tenantA, bought.ID); !slices.Equal(got, sorted(ids...)) {
		t.Fatalf("bought members %d, want 50", len(got))
	}
	for _, s := range []string{pro.ID, bought.ID} {
		if n, err := b.segs.ReconcileLive(b.ctx, tenantA, s); err != nil || n != 0 {
			t.Fatalf("reconcile %s: %d repairs, %v", s, n, err)
		}
	}
}

// One drain transaction judges at most a budget of contacts (5,000), not
// every row it could claim: import chunks queue thousands of contacts a
// row. The rows past the budget stay queued for the next pass.
func TestLiveDrainBudget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.createLive(t, tenantA, "all", allRules)
	b.drain(t)
	// Contacts that do not exist are skipped by the judge: only the
	// claiming is under test.
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO segment_live_queue (tenant_id, contact_ids, segment_ids)
		SELECT $1, ARRAY(SELECT 'gone' || r || '_' || i FROM generate_series(1, 3000) i), ARRAY[$2]
		FROM generate_series(1, 3) r`, tenantA, s.ID); err != nil {
		t.Fatal(err)
	}
	var got []int
	for {
		n, err := b.segs.DrainLive(b.ctx, 500)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		got = append(got, n)
	}
	if !slices.Equal(got, []int{1, 1, 1}) {
		t.Fatalf("rows per pass %v, want [1 1 1] (3,000 contacts each, 5,000 a pass)", got)
	}
}
