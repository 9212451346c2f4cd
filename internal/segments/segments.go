// Package segments keeps rule-based groups of contacts: rule validation with
// reference bookkeeping (dependsOn, cycles), and set-based compute, where
// the rule tree becomes one SQL predicate over the tenant's contacts and
// membership is rewritten in one transaction.
package segments

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/page"
	"tidings/internal/rules"
	"tidings/internal/store"
	"tidings/queries"
)

// NotFound is the segment 404.
func NotFound() *apperr.Error { return apperr.NotFound("SEGMENT_NOT_FOUND", "segment") }

func notFound(err error) error { return apperr.Specific(err, apperr.KindNotFound, NotFound()) }

// Store keeps segments.
type Store struct {
	DB *store.DB
	// Throttle spaces computes (ComputeThrottled); Compute ignores it.
	Throttle *Throttle
	// OnChange, when set, runs in the transaction that writes live
	// segments' membership changes (with their timeline entries): the
	// sequence engine starts the sequences a segment's entered or exited
	// triggers there. An error rolls the changes back.
	OnChange func(ctx context.Context, q *store.Tx, tenantID string, changes []Change) error
}

// Input is a create or PATCH body; nil fields were not sent.
type Input struct {
	Name        *string // as sent ("" for null): trimmed and judged here
	Description *string
	SetDesc     bool // description sent (null clears it)
	Rules       json.RawMessage
	Enabled     *bool
	// Live keeps the membership current from the data (ADDENDUM 21).
	Live *bool
}

// Limits of a segment's text fields, in characters.
const (
	maxName        = 256
	maxDescription = 2000
)

// check judges the text fields present (create: name is required) and
// trims the name.
func (in *Input) check(create bool) error {
	var f apperr.Fields
	if create || in.Name != nil {
		var n int
		if in.Name != nil {
			name := strings.TrimSpace(*in.Name)
			in.Name, n = &name, utf8.RuneCountInString(name)
		}
		f.Check(n >= 1 && n <= maxName, "name", "is required, 1-256 characters")
	}
	if in.Description != nil {
		f.Check(utf8.RuneCountInString(*in.Description) <= maxDescription, "description", "must be at most 2000 characters")
	}
	return f.Err()
}

// MaxRulesBytes bounds a segment's rule tree as stored (compact JSON):
// every list page and every compute reads it (issue 11: 60 segments of 1 MB
// made a 24 MB page).
const MaxRulesBytes = 64 << 10

// edges maps segments to the ids their rules reference: the part of the
// tenant's graph reachable from one rule tree.
type edges map[string][]string

// edgesFrom reads the dependency edges reachable from refs, and nothing
// else: the cost of a create or update follows the segments its rules
// reach, not the number of segments the tenant has.
func edgesFrom(ctx context.Context, q *queries.Queries, tenantID string, refs []string) (edges, error) {
	g := edges{}
	if len(refs) == 0 {
		return g, nil
	}
	rows, err := q.SegmentEdgesFrom(ctx, queries.SegmentEdgesFromParams{TenantID: tenantID, Ids: refs})
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		g[r.ID] = r.DependsOn
	}
	return g, nil
}

// graph is the rules of the segments a compute's rule tree reaches.
type graph map[string]queries.SegmentRulesFromRow

func rulesFrom(ctx context.Context, q *queries.Queries, tenantID string, refs []string) (graph, error) {
	g := graph{}
	if len(refs) == 0 {
		return g, nil
	}
	rows, err := q.SegmentRulesFrom(ctx, queries.SegmentRulesFromParams{TenantID: tenantID, Ids: refs})
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		g[r.ID] = r
	}
	return g, nil
}

// resolver parses referenced segments' current rules on demand.
func (g graph) resolver() rules.Resolver {
	cache := map[string]*rules.Node{}
	return func(id string) (*rules.Node, bool) {
		if n, ok := cache[id]; ok {
			return n, n != nil
		}
		row, ok := g[id]
		if !ok {
			cache[id] = nil
			return nil, false
		}
		n, err := rules.Parse(json.RawMessage(row.Rules), rules.Options{})
		if err != nil {
			cache[id] = nil
			return nil, false
		}
		cache[id] = n
		return n, true
	}
}

// parseRules validates a rule tree and its references for segment self,
// reading only the dependency edges the tree reaches.
func parseRules(ctx context.Context, q *queries.Queries, tenantID string, raw json.RawMessage, self string) (*rules.Node, []string, error) {
	if len(compact(raw)) > MaxRulesBytes {
		return nil, nil, apperr.Invalid("rules", fmt.Sprintf("must be at most %d bytes as compact JSON", MaxRulesBytes))
	}
	n, err := rules.Parse(raw, rules.Options{Root: "rules"})
	var ve *rules.ValidationError
	if errors.As(err, &ve) {
		f := apperr.Fields{}
		for path, msgs := range ve.ByPath() {
			for _, m := range msgs {
				f.Add(path, m)
			}
		}
		return nil, nil, f.Err()
	}
	if err != nil {
		return nil, nil, apperr.Invalid("rules", err.Error())
	}
	refs := n.SegmentRefs()
	g, err := edgesFrom(ctx, q, tenantID, refs)
	if err != nil {
		return nil, nil, err
	}
	err = rules.CheckCycles(self, func(id string) ([]string, bool) {
		if id == self {
			return refs, true
		}
		deps, ok := g[id]
		return deps, ok
	})
	var ue *rules.UnknownSegmentError
	var ce *rules.CycleError
	switch {
	case errors.As(err, &ue):
		return nil, nil, unknownSegmentFields(n, ue.IDs)
	case errors.As(err, &ce):
		e := apperr.Unprocessable("CIRCULAR_DEPENDENCY", ce.Error())
		e.Details = map[string]any{"cycle": ce.Cycle}
		return nil, nil, e
	case err != nil:
		return nil, nil, err
	}
	if refs == nil {
		refs = []string{}
	}
	return n, refs, nil
}

// Create adds a segment.
func (s *Store) Create(ctx context.Context, tenantID string, in Input) (queries.Segment, error) {
	var seg queries.Segment
	if err := in.check(true); err != nil {
		return seg, err
	}
	err := s.DB.InTx(ctx, func(tx *store.Tx) error {
		q := tx
		if err := q.SegmentLockGraph(ctx, tenantID); err != nil {
			return err
		}
		id := ids.New(ids.Segment)
		tx.AuditResource(id)
		_, refs, err := parseRules(ctx, q.Queries, tenantID, in.Rules, id)
		if err != nil {
			return err
		}
		enabled := true
		if in.Enabled != nil {
			enabled = *in.Enabled
		}
		live := in.Live != nil && *in.Live
		if live {
			if err := refsLive(ctx, q.Queries, tenantID, in.Rules, refs); err != nil {
				return err
			}
		}
		seg, err = q.SegmentInsert(ctx, queries.SegmentInsertParams{TenantID: tenantID, ID: id, Name: *in.Name,
			Description: in.Description, Rules: compact(in.Rules), Enabled: enabled, DependsOn: refs})
		if err != nil || !live {
			return err
		}
		if seg, err = s.makeLive(ctx, q, tenantID, id); err != nil {
			return err
		}
		return nil
	})
	return seg, err
}

// Update applies a PATCH; changing rules bumps the version and does not
// recompute membership, except for a live segment (liveRulesChanged). It returns the segment as Get does, with the ids of
// the segments that reference it.
func (s *Store) Update(ctx context.Context, tenantID, id string, in Input) (queries.Segment, []string, error) {
	var seg queries.Segment
	var by []string
	if err := in.check(false); err != nil {
		return seg, nil, err
	}
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		if err := q.SegmentLockGraph(ctx, tenantID); err != nil {
			return err
		}
		cur, err := q.SegmentGetForUpdate(ctx, queries.SegmentGetForUpdateParams{TenantID: tenantID, ID: id})
		if err != nil {
			return notFound(err)
		}
		next := queries.SegmentUpdateParams{TenantID: tenantID, ID: id, Name: cur.Name, Description: cur.Description,
			Rules: cur.Rules, Enabled: cur.Enabled, Version: cur.Version, DependsOn: cur.DependsOn}
		if in.Name != nil {
			next.Name = *in.Name
		}
		if in.SetDesc {
			next.Description = in.Description
		}
		if in.Enabled != nil {
			next.Enabled = *in.Enabled
		}
		if in.Rules != nil {
			n, refs, err := parseRules(ctx, q.Queries, tenantID, in.Rules, id)
			if err != nil {
				return err
			}
			old, _ := rules.Parse(json.RawMessage(cur.Rules), rules.Options{})
			if !sameRules(old, n) {
				next.Rules, next.DependsOn, next.Version = compact(in.Rules), refs, cur.Version+1
			}
		}
		live := cur.Live
		if in.Live != nil {
			live = *in.Live
		}
		if err := s.checkLive(ctx, q.Queries, tenantID, cur, live, next); err != nil {
			return err
		}
		if seg, err = q.SegmentUpdate(ctx, next); err != nil {
			return err
		}
		rulesChanged := next.Version != cur.Version
		switch {
		case live && !cur.Live:
			seg, err = s.makeLive(ctx, q, tenantID, id)
		case !live && cur.Live:
			seg, err = s.stopLive(ctx, q, tenantID, id)
		case live && (rulesChanged || (next.Enabled && !cur.Enabled)):
			// New rules: the segment and the live segments that refer to
			// it (they evaluate its current rules) follow at once, with
			// entered and exited for whom it moves. Re-enabled: it
			// catches up silently, as when it became live.
			seg, err = s.liveRulesChanged(ctx, q, tenantID, id, rulesChanged)
		}
		if err != nil {
			return err
		}
		by, err = q.SegmentDependedBy(ctx, queries.SegmentDependedByParams{TenantID: tenantID, ID: id})
		return err
	})
	return seg, by, err
}

func sameRules(a, b *rules.Node) bool {
	if a == nil || b == nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func compact(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

// Delete removes a segment unless another one references it. Campaigns
// that name it keep the id; it simply resolves no members.
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	return s.DB.Tx(ctx, func(q *queries.Queries) error {
		if err := q.SegmentLockGraph(ctx, tenantID); err != nil {
			return err
		}
		by, err := q.SegmentDependedBy(ctx, queries.SegmentDependedByParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		if len(by) > 0 {
			e := apperr.Conflict("SEGMENT_REFERENCED", "segment is referenced by other segments")
			e.Details = map[string]any{"dependedBy": by}
			return e
		}
		n, err := q.SegmentDelete(ctx, queries.SegmentDeleteParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			return NotFound()
		}
		return nil
	})
}

// Get returns a segment with the ids of the segments that reference it.
func (s *Store) Get(ctx context.Context, tenantID, id string) (queries.Segment, []string, error) {
	seg, err := s.DB.SegmentGet(ctx, queries.SegmentGetParams{TenantID: tenantID, ID: id})
	if err != nil {
		return seg, nil, notFound(err)
	}
	by, err := s.DependedBy(ctx, tenantID, id)
	return seg, by[id], err
}

// Listed is a segment of a list page with the segments that reference it.
type Listed struct {
	queries.Segment
	DependedBy []string
}

// List returns a page of segments, newest first, each with its dependedBy
// (one query for the whole page).
func (s *Store) List(ctx context.Context, tenantID string, p page.Params) ([]Listed, *page.Cursor, error) {
	rows, next, err := page.List(p, func(q page.Query) ([]queries.Segment, error) {
		return s.DB.SegmentList(ctx, queries.SegmentListParams{TenantID: tenantID, BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
	}, func(r queries.Segment) page.Cursor { return page.Cursor{Time: r.CreatedAt, ID: r.ID} })
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	by, err := s.DependedBy(ctx, tenantID, ids...)
	items := make([]Listed, len(rows))
	for i, r := range rows {
		items[i] = Listed{Segment: r, DependedBy: by[r.ID]}
	}
	return items, next, err
}

// OfContact returns the segments the contact is a member of.
func (s *Store) OfContact(ctx context.Context, tenantID, contactID string) ([]queries.SegmentsOfContactRow, error) {
	return s.DB.SegmentsOfContact(ctx, queries.SegmentsOfContactParams{TenantID: tenantID, ContactID: contactID})
}

// DependedBy maps each of ids to the segments that reference it, sorted, in
// one query however many ids (a page of a list).
func (s *Store) DependedBy(ctx context.Context, tenantID string, ids ...string) (map[string][]string, error) {
	rows, err := s.DB.SegmentDependedByMany(ctx, queries.SegmentDependedByManyParams{TenantID: tenantID, Ids: ids})
	if err != nil {
		return nil, err
	}
	by := make(map[string][]string, len(ids))
	for _, r := range rows {
		by[r.SegmentID] = append(by[r.SegmentID], r.DependedBy)
	}
	return by, nil
}

// Version renders the integer version as the API's string.
func Version(v int32) string { return strconv.Itoa(int(v)) }

// unknownSegmentFields names each leaf that refers to a missing segment by
// its path, as every other rule error does.
func unknownSegmentFields(n *rules.Node, ids []string) error {
	missing := map[string]bool{}
	for _, id := range ids {
		missing[id] = true
	}
	f := apperr.Fields{}
	n.Walk("rules", func(path string, m *rules.Node) {
		if m.Type == rules.TypeSegment && missing[m.SegmentID] {
			f.Add(path+".segmentId", "unknown segment "+m.SegmentID)
		}
	})
	if err := f.Err(); err != nil {
		return err
	}
	return apperr.Invalid("rules", fmt.Sprintf("unknown segment: %v", ids))
}

// refsLive refuses a live segment whose rules refer to a segment that is
// not live: it could not follow that one's changes.
func refsLive(ctx context.Context, q *queries.Queries, tenantID string, raw json.RawMessage, refs []string) error {
	if len(refs) == 0 {
		return nil
	}
	notLive, err := q.SegmentsNotLive(ctx, queries.SegmentsNotLiveParams{TenantID: tenantID, Ids: refs})
	if err != nil || len(notLive) == 0 {
		return err
	}
	n, err := rules.Parse(raw, rules.Options{})
	if err != nil {
		return apperr.Invalid("live", fmt.Sprintf("refers to segments that are not live: %v", notLive))
	}
	bad := map[string]bool{}
	for _, id := range notLive {
		bad[id] = true
	}
	f := apperr.Fields{}
	n.Walk("rules", func(path string, m *rules.Node) {
		if m.Type == rules.TypeSegment && bad[m.SegmentID] {
			f.Add(path+".segmentId", "a live segment may refer only to live segments; "+m.SegmentID+" is not live")
		}
	})
	return f.Err()
}

// checkLive judges a PATCH's liveness: a live segment refers only to live
// ones; a segment that a live segment refers to, or that a sequence
// trigger names, stays live.
func (s *Store) checkLive(ctx context.Context, q *queries.Queries, tenantID string, cur queries.Segment, live bool, next queries.SegmentUpdateParams) error {
	if live {
		return refsLive(ctx, q, tenantID, next.Rules, next.DependsOn)
	}
	if !cur.Live {
		return nil
	}
	by, err := q.SegmentLiveDependedBy(ctx, queries.SegmentLiveDependedByParams{TenantID: tenantID, ID: cur.ID})
	if err != nil {
		return err
	}
	if len(by) > 0 {
		return apperr.Invalid("live", fmt.Sprintf("live segments refer to this segment, so it must stay live: %v", by))
	}
	seqs, err := q.SequencesNamingSegment(ctx, queries.SequencesNamingSegmentParams{TenantID: tenantID, SegmentID: cur.ID})
	if err != nil {
		return err
	}
	if len(seqs) > 0 {
		return apperr.Invalid("live", fmt.Sprintf("sequence triggers name this segment, so it must stay live: %v", seqs))
	}
	return nil
}

// makeLive turns a segment live: it writes its rows of the reads index and
// computes it once, without entered events for the members it finds.
func (s *Store) makeLive(ctx context.Context, q *store.Tx, tenantID, id string) (queries.Segment, error) {
	if _, err := q.SegmentSetLive(ctx, queries.SegmentSetLiveParams{TenantID: tenantID, ID: id, Live: true}); err != nil {
		return queries.Segment{}, err
	}
	if err := s.writeReadsOf(ctx, q, tenantID, id); err != nil {
		return queries.Segment{}, err
	}
	if err := s.recomputeLive(ctx, q, tenantID, id, false); err != nil {
		return queries.Segment{}, err
	}
	return q.SegmentGet(ctx, queries.SegmentGetParams{TenantID: tenantID, ID: id})
}

// stopLive turns a segment back into one that changes only on compute.
func (s *Store) stopLive(ctx context.Context, q *store.Tx, tenantID, id string) (queries.Segment, error) {
	if err := q.SegmentLiveReadsDelete(ctx, queries.SegmentLiveReadsDeleteParams{TenantID: tenantID, SegmentID: id}); err != nil {
		return queries.Segment{}, err
	}
	return q.SegmentSetLive(ctx, queries.SegmentSetLiveParams{TenantID: tenantID, ID: id, Live: false})
}

// liveRulesChanged recomputes a live segment whose rules changed (or that
// was enabled again), and the live segments that refer to it, directly or
// not, rewriting their reads: they read what it reads.
func (s *Store) liveRulesChanged(ctx context.Context, q *store.Tx, tenantID, id string, emit bool) (queries.Segment, error) {
	order := []string{id}
	seen := map[string]bool{id: true}
	for i := 0; i < len(order); i++ {
		by, err := q.SegmentLiveDependedBy(ctx, queries.SegmentLiveDependedByParams{TenantID: tenantID, ID: order[i]})
		if err != nil {
			return queries.Segment{}, err
		}
		for _, b := range by {
			if !seen[b] {
				seen[b] = true
				order = append(order, b)
			}
		}
	}
	for i, sid := range order {
		if err := s.writeReadsOf(ctx, q, tenantID, sid); err != nil {
			return queries.Segment{}, err
		}
		if err := s.recomputeLive(ctx, q, tenantID, sid, emit || i > 0); err != nil {
			return queries.Segment{}, err
		}
	}
	return q.SegmentGet(ctx, queries.SegmentGetParams{TenantID: tenantID, ID: id})
}

// writeReadsOf rewrites the reads index rows of live segment id from its
// rules and those of the segments it refers to.
func (s *Store) writeReadsOf(ctx context.Context, q *store.Tx, tenantID, id string) error {
	ls, err := loadLive(ctx, q.Queries, tenantID)
	if err != nil {
		return err
	}
	n, ok := ls.nodes[id]
	if !ok {
		return nil
	}
	return writeReads(ctx, q.Queries, tenantID, id, readsOf(n, ls.resolve))
}
