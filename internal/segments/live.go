package segments

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"sync"
	"time"

	"tidings/internal/rules"
	"tidings/internal/store"
	"tidings/internal/telemetry"
	"tidings/queries"
)

// Live segments (ADDENDUM 21; docs/decisions.md "Live segments").
//
// The database is the truth: every write that can change a live segment's
// answer for a contact queues the contact, in its own transaction, through
// the triggers of schema 0071, which look the write up in
// segment_live_reads (the index from properties, derived fields, topics and
// event names to the live segments that read them). The segments role
// drains the queue (DrainLive): it re-judges each queued contact for the
// segments its row names, with rules.Eval, and writes the membership
// changes, memberCount and the segment_entered / segment_exited timeline
// entries in one transaction with the queue rows' deletion. Time rules are
// re-judged by TickLive for the contacts an index range says can have
// flipped; ReconcileLive runs the full compute and counts what it had to
// repair.

// Change is one contact entering or leaving one segment.
type Change struct {
	SegmentID string
	ContactID string
	Entered   bool
}

// Timeline entry types of membership changes.
const (
	EntryEntered = "segment_entered"
	EntryExited  = "segment_exited"
)

// nodeCache holds parsed rule trees by tenant, segment and version: a
// version changes with the rules, so an entry never goes stale, and the
// drain parses a segment's rules once, not once per contact.
type nodeCache struct {
	mu sync.Mutex
	m  map[string]*rules.Node
}

const nodeCacheMax = 10_000

func (c *nodeCache) get(tenantID, id string, version int32, raw []byte) (*rules.Node, error) {
	k := tenantID + "\x00" + id + "\x00" + Version(version)
	c.mu.Lock()
	n, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := rules.Parse(json.RawMessage(raw), rules.Options{})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= nodeCacheMax {
		c.m = map[string]*rules.Node{}
	}
	c.m[k] = n
	c.mu.Unlock()
	return n, nil
}

var parsed nodeCache

// liveSet is a tenant's live segments with their parsed rules.
type liveSet struct {
	nodes   map[string]*rules.Node
	enabled map[string]bool
}

func loadLive(ctx context.Context, q *queries.Queries, tenantID string) (*liveSet, error) {
	rows, err := q.SegmentLiveAll(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	ls := &liveSet{nodes: map[string]*rules.Node{}, enabled: map[string]bool{}}
	for _, r := range rows {
		n, err := parsed.get(tenantID, r.ID, r.Version, r.Rules)
		if err != nil {
			return nil, fmt.Errorf("segment %s rules: %w", r.ID, err)
		}
		ls.nodes[r.ID] = n
		ls.enabled[r.ID] = r.Enabled
	}
	return ls, nil
}

func (ls *liveSet) resolve(id string) (*rules.Node, bool) { n, ok := ls.nodes[id]; return n, ok }

// flatten calls fn for every leaf of n and of the segments it refers to,
// each segment once.
func flatten(n *rules.Node, resolve rules.Resolver, fn func(*rules.Node)) {
	seen := map[string]bool{}
	var walk func(*rules.Node, int)
	walk = func(n *rules.Node, depth int) {
		n.Walk("", func(_ string, m *rules.Node) {
			if !m.IsLeaf() {
				return
			}
			fn(m)
			if m.Type == rules.TypeSegment && !seen[m.SegmentID] && depth < 32 {
				seen[m.SegmentID] = true
				if r, ok := resolve(m.SegmentID); ok {
					walk(r, depth+1)
				}
			}
		})
	}
	walk(n, 0)
}

// read is one row of segment_live_reads.
type read struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
}

// readsOf is what a live segment's answer depends on: its leaves' inputs
// and those of the segments it refers to.
func readsOf(n *rules.Node, resolve rules.Resolver) []read {
	set := map[read]bool{}
	flatten(n, resolve, func(m *rules.Node) {
		switch m.Type {
		case rules.TypeProperty:
			set[read{"property", m.Field}] = true
		case rules.TypeDerived:
			set[read{"derived", m.Field}] = true
		case rules.TypeEvent:
			set[read{"event", m.Name}] = true
		case rules.TypeTopic:
			set[read{"topic", m.Topic}] = true
		}
	})
	out := make([]read, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind+out[i].Key < out[j].Kind+out[j].Key })
	return out
}

// writeReads rewrites segment id's rows of the index.
func writeReads(ctx context.Context, q *queries.Queries, tenantID, id string, rs []read) error {
	if err := q.SegmentLiveReadsDelete(ctx, queries.SegmentLiveReadsDeleteParams{TenantID: tenantID, SegmentID: id}); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	b, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	return q.SegmentLiveReadsInsert(ctx, queries.SegmentLiveReadsInsertParams{TenantID: tenantID, SegmentID: id, Rows: b})
}

// subject is the contact as the rules see it.
func subject(c queries.Contact) (rules.Subject, error) {
	props, err := rules.DecodeProperties(c.Properties)
	if err != nil {
		return rules.Subject{}, fmt.Errorf("contact %s properties: %w", c.ID, err)
	}
	var choices map[string]bool
	if len(c.Topics) > 0 {
		if err := json.Unmarshal(c.Topics, &choices); err != nil {
			return rules.Subject{}, fmt.Errorf("contact %s topics: %w", c.ID, err)
		}
	}
	return rules.Subject{Properties: props, TotalSends: c.TotalSends, TotalOpens: c.TotalOpens,
		TotalClicks: c.TotalClicks, LastEventAt: c.LastEventAt, CreatedAt: c.CreatedAt, Topics: choices}, nil
}

// judge re-judges each contact of want for the segments it lists (live and
// enabled ones; others are skipped) and writes what changed. It runs in the
// caller's transaction and returns the changes it wrote.
func (s *Store) judge(ctx context.Context, q *store.Tx, tenantID string, want map[string][]string) ([]Change, error) {
	if len(want) == 0 {
		return nil, nil
	}
	contactIDs := make([]string, 0, len(want))
	segSet := map[string]bool{}
	for c, segs := range want {
		contactIDs = append(contactIDs, c)
		for _, id := range segs {
			segSet[id] = true
		}
	}
	slices.Sort(contactIDs)
	if err := q.SegmentLiveLockContacts(ctx, queries.SegmentLiveLockContactsParams{TenantID: tenantID, ContactIds: contactIDs}); err != nil {
		return nil, err
	}
	ls, err := loadLive(ctx, q.Queries, tenantID)
	if err != nil {
		return nil, err
	}
	var segIDs []string
	for id := range segSet {
		if ls.enabled[id] {
			segIDs = append(segIDs, id)
		}
	}
	if len(segIDs) == 0 {
		return nil, nil
	}
	slices.Sort(segIDs)
	if err := q.SegmentLiveLockShared(ctx, queries.SegmentLiveLockSharedParams{TenantID: tenantID, SegmentIds: segIDs}); err != nil {
		return nil, err
	}
	contacts, err := q.SegmentLiveContacts(ctx, queries.SegmentLiveContactsParams{TenantID: tenantID, Ids: contactIDs})
	if err != nil || len(contacts) == 0 {
		return nil, err
	}
	found := make([]string, len(contacts))
	for i, c := range contacts {
		found[i] = c.ID
	}
	// What the segments' trees ask about: event names and topics.
	names := map[string]bool{}
	topicsUsed := false
	for _, id := range segIDs {
		flatten(ls.nodes[id], ls.resolve, func(m *rules.Node) {
			switch m.Type {
			case rules.TypeEvent:
				names[m.Name] = true
			case rules.TypeTopic:
				topicsUsed = true
			}
		})
	}
	latest := map[[2]string]time.Time{}
	if len(names) > 0 {
		rows, err := q.SegmentLiveLatestEvents(ctx, queries.SegmentLiveLatestEventsParams{TenantID: tenantID,
			ContactIds: found, Names: setKeys(names)})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			latest[[2]string{r.ContactID, r.Name}] = r.OccurredAt
		}
	}
	var optOut map[string]bool
	if topicsUsed {
		all, err := q.TopicAll(ctx, tenantID)
		if err != nil {
			return nil, err
		}
		optOut = map[string]bool{}
		for _, t := range all {
			optOut[t.ID] = t.DefaultMode == "opt_out"
		}
	}
	rows, err := q.SegmentLiveMembership(ctx, queries.SegmentLiveMembershipParams{TenantID: tenantID,
		ContactIds: found, SegmentIds: segIDs})
	if err != nil {
		return nil, err
	}
	member := map[[2]string]bool{}
	for _, r := range rows {
		member[[2]string{r.SegmentID, r.ContactID}] = true
	}
	now, err := q.SegmentLiveNow(ctx)
	if err != nil {
		return nil, err
	}
	var changes []Change
	for _, c := range contacts {
		subj, err := subject(c)
		if err != nil {
			return nil, err
		}
		env := rules.Env{Now: now, Segment: ls.resolve,
			HasEvent: func(name string, after time.Time) bool {
				t, ok := latest[[2]string{c.ID, name}]
				return ok && !t.Before(after)
			},
			TopicOptOut: func(id string) (bool, bool) { v, ok := optOut[id]; return v, ok }}
		for _, id := range want[c.ID] {
			if !ls.enabled[id] {
				continue
			}
			in := rules.Eval(ls.nodes[id], subj, env)
			if was := member[[2]string{id, c.ID}]; in != was {
				changes = append(changes, Change{SegmentID: id, ContactID: c.ID, Entered: in})
			}
		}
	}
	return changes, s.apply(ctx, q, tenantID, changes, true)
}

func setKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// apply writes membership changes: member rows, memberCount and, with
// emit, the timeline entries (and so the outbound webhooks) and the
// sequences the changes start.
func (s *Store) apply(ctx context.Context, q *store.Tx, tenantID string, changes []Change, emit bool) error {
	if len(changes) == 0 {
		return nil
	}
	type pair struct {
		S string `json:"s"`
		C string `json:"c"`
		T string `json:"t,omitempty"`
	}
	var joins, leaves, entries []pair
	delta := map[string]int64{}
	for _, ch := range changes {
		p := pair{S: ch.SegmentID, C: ch.ContactID}
		if ch.Entered {
			joins = append(joins, p)
			delta[ch.SegmentID]++
			p.T = EntryEntered
		} else {
			leaves = append(leaves, p)
			delta[ch.SegmentID]--
			p.T = EntryExited
		}
		entries = append(entries, p)
	}
	if len(joins) > 0 {
		b, _ := json.Marshal(joins)
		if err := q.SegmentLiveJoin(ctx, queries.SegmentLiveJoinParams{TenantID: tenantID, Rows: b}); err != nil {
			return err
		}
	}
	if len(leaves) > 0 {
		b, _ := json.Marshal(leaves)
		if err := q.SegmentLiveLeave(ctx, queries.SegmentLiveLeaveParams{TenantID: tenantID, Rows: b}); err != nil {
			return err
		}
	}
	type d struct {
		ID    string `json:"id"`
		Delta int64  `json:"delta"`
	}
	var ds []d
	for _, id := range setKeysInt(delta) {
		if delta[id] != 0 {
			ds = append(ds, d{id, delta[id]})
		}
	}
	if len(ds) > 0 {
		b, _ := json.Marshal(ds)
		if err := q.SegmentLiveCountAdd(ctx, queries.SegmentLiveCountAddParams{TenantID: tenantID, Rows: b}); err != nil {
			return err
		}
	}
	if !emit {
		return nil
	}
	b, _ := json.Marshal(entries)
	if err := q.SegmentLiveTimeline(ctx, queries.SegmentLiveTimelineParams{TenantID: tenantID, Rows: b}); err != nil {
		return err
	}
	if s.OnChange != nil {
		return s.OnChange(ctx, q, tenantID, changes)
	}
	return nil
}

func setKeysInt(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A queue row names the contacts of one write statement (schema 0085): a
// batch of events, or an import chunk of thousands of contacts. judgeChunk
// bounds the contacts one judge call holds in memory (with their events
// and memberships); drainContacts bounds the contacts one drain
// transaction judges, so a run of import chunks does not make one long
// transaction.
const (
	judgeChunk    = 1000
	drainContacts = 5000
)

// DrainLive takes up to limit queued rows (fewer when they name more than
// drainContacts contacts; at least one), re-judges their contacts and
// deletes the rows, in one transaction; it returns how many rows it took
// (0: the queue is empty, or every row is held by another worker).
func (s *Store) DrainLive(ctx context.Context, limit int) (int, error) {
	n := 0
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		rows, err := q.SegmentLiveQueueClaim(ctx, int32(limit))
		if err != nil || len(rows) == 0 {
			return err
		}
		// Rows past the budget stay queued: their locks go with this
		// transaction and the next pass takes them.
		total := 0
		for i, r := range rows {
			if i > 0 && total+len(r.ContactIds) > drainContacts {
				rows = rows[:i]
				break
			}
			total += len(r.ContactIds)
		}
		n = len(rows)
		byTenant := map[string]map[string][]string{}
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
			w := byTenant[r.TenantID]
			if w == nil {
				w = map[string][]string{}
				byTenant[r.TenantID] = w
			}
			for _, c := range r.ContactIds {
				for _, sid := range r.SegmentIds {
					if !slices.Contains(w[c], sid) {
						w[c] = append(w[c], sid)
					}
				}
			}
		}
		for _, tenant := range setKeysMap(byTenant) {
			want := byTenant[tenant]
			contacts := setKeysMap(want)
			for start := 0; start < len(contacts); start += judgeChunk {
				chunk := map[string][]string{}
				for _, c := range contacts[start:min(start+judgeChunk, len(contacts))] {
					chunk[c] = want[c]
				}
				if _, err := s.judge(ctx, q, tenant, chunk); err != nil {
					return err
				}
			}
		}
		return q.SegmentLiveQueueDelete(ctx, ids)
	})
	return n, err
}

func setKeysMap[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// LiveQueueLength is how many contacts wait to be judged (a contact queued
// by two writes counts twice).
func (s *Store) LiveQueueLength(ctx context.Context) (int64, error) {
	return s.DB.SegmentLiveQueueLength(ctx)
}

// timeRanges are, for one live segment, the queries that find the
// contacts whose answer can flip between two instants: inactiveDays bounds
// (whole days) and event names with their within.
type timeRanges struct {
	days   []int64
	events map[string][]time.Duration
}

func (t timeRanges) empty() bool { return len(t.days) == 0 && len(t.events) == 0 }

// timeRangesOf collects the time-dependent leaves of n and of the segments
// it refers to. An inactiveDays comparison with value v reduces to tests
// "inactiveDays >= m" for m in {floor v, floor v + 1, ceil v} (rules.ToSQL
// compiles it so); each flips when the reference instant crosses now - m
// days.
func timeRangesOf(n *rules.Node, resolve rules.Resolver) timeRanges {
	days := map[int64]bool{}
	tr := timeRanges{events: map[string][]time.Duration{}}
	flatten(n, resolve, func(m *rules.Node) {
		switch {
		case m.Type == rules.TypeDerived && m.Field == rules.DerivedInactiveDays:
			r, ok := new(big.Rat).SetString(fmt.Sprint(m.Value))
			if !ok {
				return
			}
			fl := new(big.Int).Quo(r.Num(), r.Denom())
			if r.Sign() < 0 {
				return
			}
			f := fl.Int64()
			for _, d := range []int64{f, f + 1} {
				if d > 0 && d <= 2_000_000 {
					days[d] = true
				}
			}
		case m.Type == rules.TypeEvent && m.Within > 0:
			if !slices.Contains(tr.events[m.Name], m.Within) {
				tr.events[m.Name] = append(tr.events[m.Name], m.Within)
			}
		}
	})
	for d := range days {
		tr.days = append(tr.days, d)
	}
	slices.Sort(tr.days)
	return tr
}

// LiveTickResult is what one TickLive call did.
type LiveTickResult struct {
	Segments int // live segments whose time rules were brought to now
	Judged   int // contacts re-judged (those whose answer could flip)
	Changed  int // membership changes written
}

// TickLive brings the time rules of up to limit live segments last judged
// before now - every up to now: for each, the contacts whose answer can
// have flipped since are found by index ranges (contacts_inactive_ref,
// events_feed_name) and re-judged, never the whole tenant.
func (s *Store) TickLive(ctx context.Context, every time.Duration, limit int) (LiveTickResult, error) {
	var res LiveTickResult
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		now, err := q.SegmentLiveNow(ctx)
		if err != nil {
			return err
		}
		due, err := q.SegmentLiveDue(ctx, queries.SegmentLiveDueParams{Before: now.Add(-every), Lim: int32(limit)})
		if err != nil {
			return err
		}
		for _, d := range due {
			judged, changed, err := s.tickOne(ctx, q, d.TenantID, d.ID, *d.LiveJudgedAt, now)
			if err != nil {
				return err
			}
			res.Segments++
			res.Judged += judged
			res.Changed += changed
		}
		return nil
	})
	return res, err
}

// tickOne re-judges segment id for the contacts whose time rules can have
// flipped between from and to, and records to as judged.
func (s *Store) tickOne(ctx context.Context, q *store.Tx, tenantID, id string, from, to time.Time) (int, int, error) {
	ls, err := loadLive(ctx, q.Queries, tenantID)
	if err != nil {
		return 0, 0, err
	}
	n, ok := ls.nodes[id]
	if !ok {
		return 0, 0, nil
	}
	tr := timeRangesOf(n, ls.resolve)
	want := map[string][]string{}
	if to.After(from) && !tr.empty() {
		for _, d := range tr.days {
			span := time.Duration(d) * 24 * time.Hour
			ids, err := q.SegmentLiveInactiveRange(ctx, queries.SegmentLiveInactiveRangeParams{TenantID: tenantID,
				After: from.Add(-span), Upto: to.Add(-span)})
			if err != nil {
				return 0, 0, err
			}
			for _, c := range ids {
				want[c] = []string{id}
			}
		}
		for name, withins := range tr.events {
			for _, w := range withins {
				ids, err := q.SegmentLiveEventRange(ctx, queries.SegmentLiveEventRangeParams{TenantID: tenantID,
					Name: name, After: from.Add(-w), Upto: to.Add(-w)})
				if err != nil {
					return 0, 0, err
				}
				for _, c := range ids {
					want[c] = []string{id}
				}
			}
		}
	}
	changes, err := s.judge(ctx, q, tenantID, want)
	if err != nil {
		return 0, 0, err
	}
	err = q.SegmentLiveJudged(ctx, queries.SegmentLiveJudgedParams{TenantID: tenantID, ID: id, At: to})
	return len(want), len(changes), err
}

// The reconcile's statements: the compute's (compute.go), leaving out the
// contacts still queued for the segment (the drain will judge them: a
// change there is not drift), and returning who moved. The queued contacts
// are read once, in the statement's own snapshot (a CTE), and anti-joined
// by hash: a queue row names many contacts (schema 0085), so there is no
// index to probe per contact.
const (
	reconcileQueuedCTE = `WITH queued AS MATERIALIZED (
    SELECT DISTINCT unnest(lq.contact_ids) AS id FROM segment_live_queue lq
    WHERE lq.tenant_id = $1 AND $2 = ANY (lq.segment_ids))
`
	reconcileJoinSQL = reconcileQueuedCTE + `INSERT INTO segment_members (tenant_id, segment_id, contact_id)
SELECT c.tenant_id, $2, c.id FROM contacts c
WHERE c.tenant_id = $1 AND (%s)
  AND NOT EXISTS (SELECT 1 FROM queued WHERE queued.id = c.id)
ON CONFLICT DO NOTHING
RETURNING contact_id`
	reconcileLeaveSQL = reconcileQueuedCTE + `DELETE FROM segment_members m
WHERE m.tenant_id = $1 AND m.segment_id = $2
  AND NOT EXISTS (SELECT 1 FROM contacts c WHERE c.tenant_id = m.tenant_id AND c.id = m.contact_id AND (%s))
  AND NOT EXISTS (SELECT 1 FROM queued WHERE queued.id = m.contact_id)
RETURNING contact_id`
)

// rewrite runs the set-based compute of a segment in q and returns who
// joined and who left; skipQueued leaves out contacts still queued for it.
func rewrite(ctx context.Context, q *store.Tx, tenantID string, seg queries.Segment, skipQueued bool) ([]Change, error) {
	g, err := rulesFrom(ctx, q.Queries, tenantID, seg.DependsOn)
	if err != nil {
		return nil, err
	}
	node, err := rules.Parse(json.RawMessage(seg.Rules), rules.Options{})
	if err != nil {
		return nil, err
	}
	pred, args, err := rules.ToSQL(node, g.resolver(), 3)
	if err != nil {
		return nil, err
	}
	args = append([]any{tenantID, seg.ID}, args...)
	joinQ, leaveQ := joinSQL+"\nRETURNING contact_id", leaveSQL+"\nRETURNING contact_id"
	if skipQueued {
		joinQ, leaveQ = reconcileJoinSQL, reconcileLeaveSQL
	}
	var changes []Change
	for _, st := range []struct {
		sql     string
		entered bool
	}{{joinQ, true}, {leaveQ, false}} {
		rows, err := q.Raw().Query(ctx, fmt.Sprintf(st.sql, pred), args...)
		if err != nil {
			return nil, store.Translate(err)
		}
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				rows.Close()
				return nil, err
			}
			changes = append(changes, Change{SegmentID: seg.ID, ContactID: c, Entered: st.entered})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, store.Translate(err)
		}
	}
	return changes, nil
}

// recomputeLive rewrites a live segment's membership in q from its current
// rules, under its exclusive lock: emit false when it becomes live (no
// segment.entered for the members it finds), true after a rules change.
// Its time rules count as judged up to now.
func (s *Store) recomputeLive(ctx context.Context, q *store.Tx, tenantID, id string, emit bool) error {
	if err := q.SegmentLiveLockExclusive(ctx, queries.SegmentLiveLockExclusiveParams{TenantID: tenantID, SegmentID: id}); err != nil {
		return err
	}
	seg, err := q.SegmentGetForUpdate(ctx, queries.SegmentGetForUpdateParams{TenantID: tenantID, ID: id})
	if err != nil {
		return notFound(err)
	}
	if !seg.Enabled {
		return nil
	}
	changes, err := rewrite(ctx, q, tenantID, seg, false)
	if err != nil {
		return err
	}
	if emit {
		if err := s.emit(ctx, q, tenantID, changes); err != nil {
			return err
		}
	}
	if _, err := q.SegmentComputed(ctx, queries.SegmentComputedParams{TenantID: tenantID, ID: id}); err != nil {
		return err
	}
	now, err := q.SegmentLiveNow(ctx)
	if err != nil {
		return err
	}
	return q.SegmentLiveJudged(ctx, queries.SegmentLiveJudgedParams{TenantID: tenantID, ID: id, At: now})
}

// emit writes the timeline entries and sequence starts of changes already
// made to the member rows (memberCount is recounted by the caller).
func (s *Store) emit(ctx context.Context, q *store.Tx, tenantID string, changes []Change) error {
	if len(changes) == 0 {
		return nil
	}
	type entry struct {
		S string `json:"s"`
		C string `json:"c"`
		T string `json:"t"`
	}
	es := make([]entry, len(changes))
	for i, ch := range changes {
		es[i] = entry{ch.SegmentID, ch.ContactID, EntryExited}
		if ch.Entered {
			es[i].T = EntryEntered
		}
	}
	b, _ := json.Marshal(es)
	if err := q.SegmentLiveTimeline(ctx, queries.SegmentLiveTimelineParams{TenantID: tenantID, Rows: b}); err != nil {
		return err
	}
	if s.OnChange != nil {
		return s.OnChange(ctx, q, tenantID, changes)
	}
	return nil
}

// ReconcileLive is the full compute of a live segment as a check on the
// incremental work: under the segment's exclusive lock (no drain writes it
// meanwhile), its time rules are first brought to now, then the compute
// rewrites what still differs, leaving out contacts still queued. What it
// changes is drift: counted in LiveRepairs and emitted as entered or
// exited like any change. It returns the number of repairs.
func (s *Store) ReconcileLive(ctx context.Context, tenantID, id string) (int, error) {
	var repaired int
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		if err := q.SegmentLiveLockExclusive(ctx, queries.SegmentLiveLockExclusiveParams{TenantID: tenantID, SegmentID: id}); err != nil {
			return err
		}
		seg, err := q.SegmentGetForUpdate(ctx, queries.SegmentGetForUpdateParams{TenantID: tenantID, ID: id})
		if err != nil {
			return notFound(err)
		}
		if !seg.Live || !seg.Enabled {
			return nil
		}
		now, err := q.SegmentLiveNow(ctx)
		if err != nil {
			return err
		}
		if seg.LiveJudgedAt != nil {
			if _, _, err := s.tickOne(ctx, q, tenantID, id, *seg.LiveJudgedAt, now); err != nil {
				return err
			}
		}
		changes, err := rewrite(ctx, q, tenantID, seg, true)
		if err != nil {
			return err
		}
		repaired = len(changes)
		if err := s.emit(ctx, q, tenantID, changes); err != nil {
			return err
		}
		_, err = q.SegmentComputed(ctx, queries.SegmentComputedParams{TenantID: tenantID, ID: id})
		return err
	})
	if err == nil && repaired > 0 {
		telemetry.LiveRepairs(repaired) // tidings_live_segment_repairs_total
	}
	return repaired, err
}

// ReconcileDue reconciles up to limit live segments last computed before
// now - every, and returns how many it reconciled and repaired.
func (s *Store) ReconcileDue(ctx context.Context, every time.Duration, limit int) (segs, repaired int, err error) {
	due, err := s.DB.SegmentLiveReconcileDue(ctx, queries.SegmentLiveReconcileDueParams{Before: time.Now().Add(-every), Lim: int32(limit)})
	if err != nil {
		return 0, 0, err
	}
	for _, d := range due {
		n, err := s.ReconcileLive(ctx, d.TenantID, d.ID)
		if err != nil {
			return segs, repaired, err
		}
		segs++
		repaired += n
	}
	return segs, repaired, nil
}
