package rules

import (
	"math/big"
	"strings"
	"time"
)

// maxSegmentDepth bounds how many segment leaves deep evaluation and SQL
// compilation follow references. CheckCycles keeps stored rules acyclic; the
// bound only keeps a race (two segments edited at once) from recursing forever.
const maxSegmentDepth = 32

// Subject is the contact as the rules see it.
type Subject struct {
	// Properties are contact.properties; decode them with DecodeProperties to
	// compare numbers exactly as PostgreSQL does.
	Properties map[string]any
	// The derived counters.
	TotalSends, TotalOpens, TotalClicks int64
	// LastEventAt is the newest event's time; nil when there is none.
	LastEventAt *time.Time
	// CreatedAt is when the contact was created; inactiveDays counts from it
	// when LastEventAt is nil.
	CreatedAt time.Time
	// Topics are the contact's own topic choices (contacts.topics).
	Topics map[string]bool
}

// Resolver returns the current rules of a segment, or false when it does not
// exist.
type Resolver func(id string) (*Node, bool)

// Env is what a rule tree is evaluated against besides the contact. Eval does
// no I/O itself: the caller loads what the callbacks return.
type Env struct {
	// Now is the evaluation instant; it must be set (there is no default, so
	// that evaluation stays deterministic).
	Now time.Time
	// Since, when not zero, makes event leaves count only events at or after
	// it: a sequence passes the contact's enrolment time. It applies to the
	// tree's own leaves, not to those of the segments it refers to.
	Since time.Time
	// Segment resolves segment leaves. Nil, or an unknown id, means the
	// referenced segment has no members.
	Segment Resolver
	// HasEvent reports whether the contact has an event called name that
	// occurred at or after after; a zero after means at any time. Nil means
	// the contact has no events.
	HasEvent func(name string, after time.Time) bool
	// TopicOptOut reports, for a topic of the tenant, whether its default
	// is opt_out (subscribed unless the contact left); ok is false for an
	// unknown topic, which has no subscribers. Nil: no topics.
	TopicOptOut func(id string) (optOut, ok bool)
}

// Eval reports whether the contact s satisfies the rule tree n. It follows
// ADDENDUM 10 and the corner-case decisions in the package documentation; the
// SQL predicate of ToSQL gives the same answer for the same data.
func Eval(n *Node, s Subject, env Env) bool {
	e := evaluator{s: &s, env: &env, memo: map[string]bool{}, active: map[string]bool{}}
	return e.eval(n, 0)
}

type evaluator struct {
	s   *Subject
	env *Env
	// memo caches each referenced segment's result: a segment used by several
	// others is evaluated once per contact, not once per path to it.
	memo   map[string]bool
	active map[string]bool // segments being evaluated, to survive a cycle
}

func (e *evaluator) eval(n *Node, depth int) bool {
	if n == nil {
		return false
	}
	if !n.IsLeaf() {
		switch n.Operator {
		case OpAnd:
			for _, c := range n.Conditions {
				if !e.eval(c, depth) {
					return false
				}
			}
			return true
		case OpOr:
			for _, c := range n.Conditions {
				if e.eval(c, depth) {
					return true
				}
			}
			return false
		case OpNot:
			for _, c := range n.Conditions {
				if e.eval(c, depth) {
					return false
				}
			}
			return true
		}
		return false
	}
	switch n.Type {
	case TypeProperty:
		var v any
		if e.s.Properties != nil {
			v = e.s.Properties[n.Field]
		}
		return evalComparison(n.Operator, v, n.Value)
	case TypeDerived:
		return e.derived(n)
	case TypeSegment:
		switch n.Operator {
		case OpMemberOf:
			return e.member(n.SegmentID, depth)
		case OpNotMemberOf:
			return !e.member(n.SegmentID, depth)
		}
	case TypeTopic:
		sub := e.subscribed(n.Topic)
		switch n.Operator {
		case OpSubscribed:
			return sub
		case OpNotSubscribed:
			return !sub
		}
	case TypeEvent:
		var after time.Time
		if n.Within > 0 {
			after = e.env.Now.Add(-n.Within)
		}
		// Since bounds the tree's own event leaves only: a referenced
		// segment (depth > 0) has the members segment compute gives it,
		// whoever asks, so a dry run agrees with the segment's member list.
		if depth == 0 && e.env.Since.After(after) {
			after = e.env.Since
		}
		has := e.env.HasEvent != nil && e.env.HasEvent(n.Name, after)
		switch n.Operator {
		case OpOccurred:
			return has
		case OpNotOccurred:
			return !has
		}
	}
	return false
}

// subscribed applies topics.Subscribed's rule: the contact's choice, else
// the topic's default; an unknown topic has no subscribers.
func (e *evaluator) subscribed(topic string) bool {
	if e.env.TopicOptOut == nil {
		return false
	}
	optOut, ok := e.env.TopicOptOut(topic)
	if !ok {
		return false
	}
	if v, chosen := e.s.Topics[topic]; chosen {
		return v
	}
	return optOut
}

// member evaluates a referenced segment's current rules.
func (e *evaluator) member(id string, depth int) bool {
	if v, ok := e.memo[id]; ok {
		return v
	}
	if e.env.Segment == nil || depth >= maxSegmentDepth || e.active[id] {
		return false
	}
	rules, ok := e.env.Segment(id)
	if !ok {
		return false
	}
	e.active[id] = true
	v := e.eval(rules, depth+1)
	delete(e.active, id)
	e.memo[id] = v
	return v
}

func (e *evaluator) derived(n *Node) bool {
	switch n.Field {
	case DerivedTotalSends:
		return evalComparison(n.Operator, e.s.TotalSends, n.Value)
	case DerivedTotalOpens:
		return evalComparison(n.Operator, e.s.TotalOpens, n.Value)
	case DerivedTotalClicks:
		return evalComparison(n.Operator, e.s.TotalClicks, n.Value)
	case DerivedInactiveDays:
		return evalComparison(n.Operator, InactiveDays(e.env.Now, e.s.CreatedAt, e.s.LastEventAt), n.Value)
	case DerivedLastEventAt:
		return evalTime(n.Operator, e.s.LastEventAt, n.Value)
	}
	return false
}

// InactiveDays is the derived field of ADDENDUM section 4: whole days since
// lastEventAt, or since createdAt when there is none. The contact API shows
// it and rules compare it (the SQL compiler computes the same cut-offs).
func InactiveDays(now, createdAt time.Time, lastEventAt *time.Time) int64 {
	if lastEventAt != nil {
		return inactiveDays(now, *lastEventAt)
	}
	return inactiveDays(now, createdAt)
}

// inactiveDays is the number of whole days (24 hours each) from ref to now,
// 0 when ref is in the future (events may be stamped up to five minutes
// ahead), and at most maxInactiveDays, like the SQL. It is computed from whole
// seconds so that no time.Duration overflow can occur, however old ref is.
func inactiveDays(now, ref time.Time) int64 {
	sec := now.Unix() - ref.Unix()
	if now.Nanosecond() < ref.Nanosecond() {
		sec-- // borrow: the fractional part of the difference is in [0, 1)
	}
	if sec < 0 {
		return 0
	}
	return min(sec/86400, maxInactiveDays)
}

// evalTime applies a comparison to lastEventAt, a timestamp or missing.
func evalTime(op string, t *time.Time, value any) bool {
	switch op {
	case OpExists:
		return t != nil
	case OpNotExists:
		return t == nil
	case OpNotEquals:
		return !evalTime(OpEquals, t, value)
	}
	s, _ := value.(string)
	v, ok := parseTimestamp(s)
	if t == nil || !ok {
		return false
	}
	return orderingHolds(op, t.Compare(v))
}

// evalComparison applies a comparison operator to a field value f (nil when
// missing) and a rule value v.
func evalComparison(op string, f, v any) bool {
	k := kindOf(f)
	switch op {
	case OpExists:
		return k != kindMissing
	case OpNotExists:
		return k == kindMissing
	case OpEquals:
		return scalarEqual(f, v)
	case OpNotEquals:
		return !scalarEqual(f, v)
	case OpGreaterThan, OpLessThan, OpGreaterOrEqual, OpLessOrEqual:
		c, ok := order(f, v)
		return ok && orderingHolds(op, c)
	case OpContains, OpNotContains, OpStartsWith, OpEndsWith:
		fs, ok1 := f.(string)
		vs, ok2 := v.(string)
		ok := ok1 && ok2
		switch op {
		case OpContains:
			return ok && strings.Contains(fs, vs)
		case OpNotContains:
			return !(ok && strings.Contains(fs, vs))
		case OpStartsWith:
			return ok && strings.HasPrefix(fs, vs)
		default:
			return ok && strings.HasSuffix(fs, vs)
		}
	case OpIncludes:
		return includes(f, v)
	case OpNotIncludes:
		return !includes(f, v)
	case OpIncludesAll:
		if k != kindArray || kindOf(v) != kindArray {
			return false
		}
		for _, want := range elements(v) {
			if !includes(f, want) {
				return false
			}
		}
		return true
	case OpIncludesAny:
		if k != kindArray || kindOf(v) != kindArray {
			return false
		}
		for _, want := range elements(v) {
			if includes(f, want) {
				return true
			}
		}
		return false
	}
	return false
}

// includes reports whether the array f has an element equal (type-strict) to
// the scalar v.
func includes(f, v any) bool {
	if kindOf(f) != kindArray {
		return false
	}
	for _, e := range elements(f) {
		if scalarEqual(e, v) {
			return true
		}
	}
	return false
}

// order compares f with v: numbers numerically, or both timestamps. ok is
// false for any other pairing, which makes every ordering operator false.
func order(f, v any) (int, bool) {
	switch kindOf(v) {
	case kindNumber:
		a, ok1 := toRat(f)
		b, ok2 := toRat(v)
		if !ok1 || !ok2 {
			return 0, false
		}
		return a.Cmp(b), true
	case kindString:
		fs, ok := f.(string)
		if !ok {
			return 0, false
		}
		a, ok1 := parseTimestamp(fs)
		b, ok2 := parseTimestamp(v.(string))
		if !ok1 || !ok2 {
			return 0, false
		}
		return a.Compare(b), true
	}
	return 0, false
}

func orderingHolds(op string, c int) bool {
	switch op {
	case OpEquals:
		return c == 0
	case OpGreaterThan:
		return c > 0
	case OpLessThan:
		return c < 0
	case OpGreaterOrEqual:
		return c >= 0
	case OpLessOrEqual:
		return c <= 0
	}
	return false
}

// ratFloorCeil returns floor(r) and ceil(r) as big integers.
func ratFloorCeil(r *big.Rat) (floor, ceil *big.Int) {
	num, den := r.Num(), r.Denom()
	q, m := new(big.Int).DivMod(num, den, new(big.Int)) // Euclidean: m >= 0, so q is the floor
	c := new(big.Int).Set(q)
	if m.Sign() != 0 {
		c.Add(c, big.NewInt(1))
	}
	return q, c
}
