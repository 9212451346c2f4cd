package rules

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxCompiledLeaves bounds the SQL of one tree after segment references are
// inlined: a chain of segments each referring twice to the next would
// otherwise grow exponentially.
const maxCompiledLeaves = 5000

// maxInactiveDays caps inactiveDays (about 5,475 years) so that the SQL
// cut-off now() - N days stays inside PostgreSQL's timestamp range; Eval
// applies the same cap so both agree even for absurd data.
const maxInactiveDays = 2_000_000

// ToSQL compiles a rule tree into one boolean SQL predicate over a contacts
// row aliased c, for use as
//
//	SELECT c.id FROM contacts c WHERE c.tenant_id = $1 AND (<predicate>)
//
// Placeholders are numbered from argStart ($2 above) and args holds their
// values, in order: field names, event names and values are always bound,
// never spliced into the SQL. Segment leaves inline the referenced segment's
// current rules from resolve, recursively; an unknown segment is an
// *UnknownSegmentError and a reference cycle a *CycleError.
//
// The predicate never evaluates to NULL, so NOT and the not group behave
// as in Eval, and it matches Eval on the same data with Env.Now = now() (the
// transaction's start). Events are read through correlated EXISTS subqueries
// on events (tenant_id, contact_id, name, occurred_at), which that index
// serves. Env.Since has no SQL counterpart: segments do not need it.
//
// Index notes for whoever writes the migrations: equals, includes,
// includesAll and includesAny compile to c.properties @> <jsonb constant>,
// which a GIN index on contacts.properties (jsonb_path_ops) can serve;
// counters and lastEventAt compare the bare columns; inactiveDays compares
// coalesce(c.last_event_at, c.created_at) to a constant cut-off. The
// predicate needs no helper function in the schema.
//
// Each placeholder carries its type cast; args are plain string, int64 and
// time.Time values (jsonb, numeric and interval ones are passed as their
// text), which pgx and database/sql encode as they are.
//
// Cost: without short-circuiting, a property timestamp comparison costs
// about 3-4 µs of CPU per row, an event leaf under OR or NOT an index lookup
// per row (several µs), every other leaf well under 1 µs; see
// BenchmarkSegmentSQL. Groups list their conditions cheapest first so that
// the cheap ones can decide a row before the costly ones run.
func ToSQL(n *Node, resolve Resolver, argStart int) (predicate string, args []any, err error) {
	if argStart < 1 {
		return "", nil, fmt.Errorf("rules: argStart must be at least 1, got %d", argStart)
	}
	c := &compiler{start: argStart, resolve: resolve, index: map[argKey]int{}, active: map[string]bool{}}
	pred, _, err := c.node(n, 0)
	if err != nil {
		return "", nil, err
	}
	return pred, c.args, nil
}

type argKey struct {
	cast  string
	value any
}

type compiler struct {
	start   int
	resolve Resolver
	args    []any
	index   map[argKey]int  // reuses a placeholder for a repeated value
	active  map[string]bool // segments being inlined, to report cycles
	path    []string        // the same, in order, for the cycle's path
	leaves  int
}

// arg binds v and returns its placeholder with an explicit cast, so the
// parameter's type never depends on inference from its context. The cast is
// part of the key: PostgreSQL refuses one parameter used as two types.
func (c *compiler) arg(v any, cast string) string {
	k := argKey{cast, v}
	i, ok := c.index[k]
	if !ok {
		c.args = append(c.args, v)
		i = c.start + len(c.args) - 1
		c.index[k] = i
	}
	return "$" + strconv.Itoa(i) + "::" + cast
}

const (
	sqlTrue  = "TRUE"
	sqlFalse = "FALSE"
)

// not negates a predicate. Neither not nor join folds constants away: a
// dropped subexpression would leave its placeholders unused, which
// PostgreSQL rejects ("could not determine data type of parameter"), and the
// planner folds TRUE AND x by itself.
func not(pred string) string {
	return "NOT (" + pred + ")"
}

// join combines predicates with AND or OR; with none it is the operator's
// neutral constant.
func join(op string, preds []string) string {
	switch len(preds) {
	case 0:
		if op == "OR" {
			return sqlFalse
		}
		return sqlTrue
	case 1:
		return preds[0]
	}
	return "(" + strings.Join(preds, " "+op+" ") + ")"
}

// Relative per-row costs of leaves, measured with PostgreSQL 15 (see
// BenchmarkSegmentSQL): a bare column compare is 1.
const (
	costColumn    = 1   // counters, lastEventAt, inactiveDays
	costJSONB     = 3   // containment, exists, string operators
	costNumber    = 5   // jsonb number cast and compare
	costTimestamp = 30  // the checks of sqltime.go, then a cast
	costEvent     = 100 // an index lookup per row
	costTopic     = 50  // a primary-key lookup of the topic per row
)

// leafCost estimates what evaluating a leaf costs per row.
func leafCost(n *Node) int {
	switch n.Type {
	case TypeDerived:
		return costColumn
	case TypeEvent:
		return costEvent
	case TypeTopic:
		return costTopic
	case TypeProperty:
		if isOrdering(n.Operator) {
			if _, isString := n.Value.(string); isString {
				return costTimestamp
			}
			return costNumber
		}
	}
	return costJSONB
}

// node compiles n and estimates its cost per row. Groups order their
// conditions cheapest first: PostgreSQL evaluates AND and OR left to right
// and stops at the first deciding condition, but reorders only the top-level
// conjunction of a WHERE clause itself. Conditions cannot fail or have
// effects, so their order does not change the result.
func (c *compiler) node(n *Node, depth int) (string, int, error) {
	if n == nil {
		return "", 0, fmt.Errorf("rules: nil node")
	}
	if !n.IsLeaf() {
		type part struct {
			sql  string
			cost int
		}
		parts := make([]part, len(n.Conditions))
		total := 0
		for i, child := range n.Conditions {
			p, cost, err := c.node(child, depth)
			if err != nil {
				return "", 0, err
			}
			parts[i] = part{p, cost}
			total += cost
		}
		slices.SortStableFunc(parts, func(a, b part) int { return a.cost - b.cost })
		preds := make([]string, len(parts))
		for i, p := range parts {
			preds[i] = p.sql
		}
		switch n.Operator {
		case OpAnd:
			return join("AND", preds), total, nil
		case OpOr:
			return join("OR", preds), total, nil
		case OpNot:
			return not(join("OR", preds)), total, nil
		}
		return "", 0, fmt.Errorf("rules: unknown group operator %q", n.Operator)
	}
	c.leaves++
	if c.leaves > maxCompiledLeaves {
		return "", 0, fmt.Errorf("rules: more than %d conditions once segment references are expanded", maxCompiledLeaves)
	}
	var (
		pred string
		err  error
	)
	switch n.Type {
	case TypeProperty:
		pred, err = c.property(n)
	case TypeDerived:
		pred, err = c.derived(n)
	case TypeSegment:
		return c.segment(n, depth)
	case TypeEvent:
		pred, err = c.event(n)
	case TypeTopic:
		pred, err = c.topic(n)
	default:
		err = fmt.Errorf("rules: unknown leaf type %q", n.Type)
	}
	return pred, leafCost(n), err
}

// segment inlines the referenced segment's rules; its cost is theirs.
func (c *compiler) segment(n *Node, depth int) (string, int, error) {
	if n.Operator != OpMemberOf && n.Operator != OpNotMemberOf {
		return "", 0, fmt.Errorf("rules: segment leaf with operator %q", n.Operator)
	}
	id := n.SegmentID
	if c.active[id] {
		cycle := []string{}
		for i, p := range c.path {
			if p == id {
				cycle = append(cycle, c.path[i:]...)
				break
			}
		}
		return "", 0, &CycleError{Cycle: append(cycle, id)}
	}
	if depth >= maxSegmentDepth {
		return "", 0, fmt.Errorf("rules: segment references nested deeper than %d", maxSegmentDepth)
	}
	var rules *Node
	ok := false
	if c.resolve != nil {
		rules, ok = c.resolve(id)
	}
	if !ok {
		return "", 0, &UnknownSegmentError{IDs: []string{id}}
	}
	c.active[id] = true
	c.path = append(c.path, id)
	pred, cost, err := c.node(rules, depth+1)
	c.path = c.path[:len(c.path)-1]
	delete(c.active, id)
	if err != nil {
		return "", 0, err
	}
	if n.Operator == OpNotMemberOf {
		return not(pred), cost, nil
	}
	return pred, cost, nil
}

// MachineCounted reports whether events called name may be a machine's
// (an open or click with properties.machine), which rules never count.
func MachineCounted(name string) bool { return name == "email.opened" || name == "email.clicked" }

// topic is topic_subscribed (schema 0021), the SQL twin of the evaluator's
// rule; an unknown topic (no default) has no subscribers.
func (c *compiler) topic(n *Node) (string, error) {
	pred := "coalesce((SELECT topic_subscribed(c.topics, t.id, t.default_mode) FROM topics t" +
		" WHERE t.tenant_id = c.tenant_id AND t.id = " + c.arg(n.Topic, "text") + "), false)"
	switch n.Operator {
	case OpSubscribed:
		return pred, nil
	case OpNotSubscribed:
		return not(pred), nil
	}
	return "", fmt.Errorf("rules: topic leaf with operator %q", n.Operator)
}

func (c *compiler) event(n *Node) (string, error) {
	var b strings.Builder
	b.WriteString("EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = c.tenant_id AND e.contact_id = c.id AND e.name = ")
	b.WriteString(c.arg(n.Name, "text"))
	if MachineCounted(n.Name) {
		// Opens and clicks of machines are not engagement (ADDENDUM 17).
		b.WriteString(` AND NOT e.properties @> '{"machine": true}'`)
	}
	if n.Within > 0 {
		// A seconds count, not Go's "1h0m0s": PostgreSQL reads it exactly.
		secs := int64(n.Within / time.Second)
		b.WriteString(" AND e.occurred_at >= now() - ")
		b.WriteString(c.arg(strconv.FormatInt(secs, 10)+" seconds", "interval"))
	}
	b.WriteString(")")
	switch n.Operator {
	case OpOccurred:
		return b.String(), nil
	case OpNotOccurred:
		return not(b.String()), nil
	}
	return "", fmt.Errorf("rules: event leaf with operator %q", n.Operator)
}

// containment binds {field: v} as jsonb for c.properties @> ...: type-strict,
// numbers compared by value, and servable by a GIN index.
func (c *compiler) containment(field string, v any) (string, error) {
	doc, err := json.Marshal(map[string]any{field: v})
	if err != nil {
		return "", fmt.Errorf("rules: value of %q: %w", field, err)
	}
	return "c.properties @> " + c.arg(string(doc), "jsonb"), nil
}

func (c *compiler) property(n *Node) (string, error) {
	if n.Field == "" {
		return "", fmt.Errorf("rules: property leaf without field")
	}
	// The field is bound only by the operators that read it directly (the
	// containment ones carry it inside their jsonb value): PostgreSQL rejects
	// a parameter that the statement never uses.
	f := func() string { return c.arg(n.Field, "text") }
	val := func() string { return "(c.properties -> " + f() + ")" }
	str := func() string { return "(c.properties ->> " + f() + ")" }
	typeIs := func(t string) string { return "jsonb_typeof" + val() + " = '" + t + "'" }
	// onlyIf guards an expression that must not be evaluated for other JSON
	// types (a cast would fail); CASE is the construct whose order of
	// evaluation PostgreSQL guarantees, unlike AND.
	onlyIf := func(cond, then string) string { return "CASE WHEN " + cond + " THEN " + then + " ELSE FALSE END" }

	switch n.Operator {
	case OpExists:
		return "coalesce(jsonb_typeof" + val() + " <> 'null', FALSE)", nil
	case OpNotExists:
		return not("coalesce(jsonb_typeof" + val() + " <> 'null', FALSE)"), nil
	case OpEquals, OpNotEquals:
		if !isScalar(n.Value) {
			return "", fmt.Errorf("rules: %s needs a scalar value", n.Operator)
		}
		p, err := c.containment(n.Field, n.Value)
		if err != nil {
			return "", err
		}
		if n.Operator == OpNotEquals {
			return not(p), nil
		}
		return p, nil
	case OpGreaterThan, OpLessThan, OpGreaterOrEqual, OpLessOrEqual:
		sqlOp := orderingSQL[n.Operator]
		switch v := n.Value.(type) {
		case json.Number:
			if _, ok := toRat(v); !ok {
				return "", fmt.Errorf("rules: bad number %q", string(v))
			}
			return onlyIf(typeIs("number"), val()+"::numeric "+sqlOp+" "+c.arg(string(v), "numeric")), nil
		case string:
			t, ok := parseTimestamp(v)
			if !ok {
				return "", fmt.Errorf("rules: %s needs a number or a timestamp, got %q", n.Operator, v)
			}
			// A number, boolean, array or object never passes the check as
			// text (none starts with four characters and a hyphen), so the
			// check alone restricts this to timestamp strings.
			s := str()
			return c.timestampCompareSQL(s, n.Operator, t), nil
		}
		return "", fmt.Errorf("rules: %s needs a number or a timestamp", n.Operator)
	case OpContains, OpNotContains, OpStartsWith, OpEndsWith:
		s, ok := n.Value.(string)
		if !ok {
			return "", fmt.Errorf("rules: %s needs a string value", n.Operator)
		}
		v := c.arg(s, "text")
		var p string
		switch n.Operator {
		case OpContains, OpNotContains:
			p = onlyIf(typeIs("string"), "strpos("+str()+", "+v+") > 0")
		case OpStartsWith:
			p = onlyIf(typeIs("string"), "starts_with("+str()+", "+v+")")
		case OpEndsWith:
			p = onlyIf(typeIs("string"), "right("+str()+", length("+v+")) = "+v)
		}
		if n.Operator == OpNotContains {
			return not(p), nil
		}
		return p, nil
	case OpIncludes, OpNotIncludes:
		if !isScalar(n.Value) {
			return "", fmt.Errorf("rules: %s needs a scalar value", n.Operator)
		}
		p, err := c.containment(n.Field, []any{n.Value})
		if err != nil {
			return "", err
		}
		if n.Operator == OpNotIncludes {
			return not(p), nil
		}
		return p, nil
	case OpIncludesAll, OpIncludesAny:
		if kindOf(n.Value) != kindArray {
			return "", fmt.Errorf("rules: %s needs an array value", n.Operator)
		}
		elems := elements(n.Value)
		if n.Operator == OpIncludesAll {
			return c.containment(n.Field, elems)
		}
		preds := make([]string, len(elems))
		for i, e := range elems {
			p, err := c.containment(n.Field, []any{e})
			if err != nil {
				return "", err
			}
			preds[i] = p
		}
		return join("OR", preds), nil
	}
	return "", fmt.Errorf("rules: unknown property operator %q", n.Operator)
}

var orderingSQL = map[string]string{
	OpEquals:         "=",
	OpGreaterThan:    ">",
	OpLessThan:       "<",
	OpGreaterOrEqual: ">=",
	OpLessOrEqual:    "<=",
}

func (c *compiler) derived(n *Node) (string, error) {
	switch n.Field {
	case DerivedTotalSends, DerivedTotalOpens, DerivedTotalClicks:
		col := map[string]string{
			DerivedTotalSends:  "c.total_sends",
			DerivedTotalOpens:  "c.total_opens",
			DerivedTotalClicks: "c.total_clicks",
		}[n.Field]
		return c.counter(n, col)
	case DerivedInactiveDays:
		return c.inactiveDays(n)
	case DerivedLastEventAt:
		switch n.Operator {
		case OpExists:
			return "c.last_event_at IS NOT NULL", nil
		case OpNotExists:
			return "c.last_event_at IS NULL", nil
		}
		s, _ := n.Value.(string)
		t, ok := parseTimestamp(s)
		if !ok {
			return "", fmt.Errorf("rules: lastEventAt %s needs a timestamp", n.Operator)
		}
		op := n.Operator
		if op == OpNotEquals {
			op = OpEquals
		}
		sqlOp, ok := orderingSQL[op]
		if !ok {
			return "", fmt.Errorf("rules: operator %q does not apply to lastEventAt", n.Operator)
		}
		// IS NOT NULL first keeps the result two-valued and the comparison
		// on the bare column, where an index can serve it.
		p := "(c.last_event_at IS NOT NULL AND c.last_event_at " + sqlOp + " " + c.arg(t, "timestamptz") + ")"
		if n.Operator == OpNotEquals {
			return not(p), nil
		}
		return p, nil
	}
	return "", fmt.Errorf("rules: unknown derived field %q", n.Field)
}

// counter compares an integer column with a rational value by first rounding
// the value to the integer bound that is equivalent for integers (x > 2.5 is
// x > 2, x >= 2.5 is x >= 3), so the column is compared as bigint, without a
// cast per row, and values beyond bigint become constants.
func (c *compiler) counter(n *Node, col string) (string, error) {
	switch n.Operator {
	case OpExists:
		return sqlTrue, nil
	case OpNotExists:
		return sqlFalse, nil
	}
	r, ok := toRat(n.Value)
	if !ok {
		return "", fmt.Errorf("rules: %s %s needs a number", n.Field, n.Operator)
	}
	floor, ceil := ratFloorCeil(r)
	minI, maxI := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	// cmp returns col <op> bound, or the constant it always is when bound
	// lies outside bigint.
	cmp := func(op string, bound *big.Int) string {
		switch {
		case bound.Cmp(maxI) > 0: // every column value is below bound
			if op == "<" || op == "<=" {
				return sqlTrue
			}
			return sqlFalse
		case bound.Cmp(minI) < 0: // every column value is above bound
			if op == ">" || op == ">=" {
				return sqlTrue
			}
			return sqlFalse
		}
		return col + " " + op + " " + c.arg(bound.Int64(), "bigint")
	}
	switch n.Operator {
	case OpEquals, OpNotEquals:
		p := sqlFalse
		if r.IsInt() && floor.Cmp(minI) >= 0 && floor.Cmp(maxI) <= 0 {
			p = col + " = " + c.arg(floor.Int64(), "bigint")
		}
		if n.Operator == OpNotEquals {
			return not(p), nil
		}
		return p, nil
	case OpGreaterThan:
		return cmp(">", floor), nil
	case OpGreaterOrEqual:
		return cmp(">=", ceil), nil
	case OpLessThan:
		return cmp("<", ceil), nil
	case OpLessOrEqual:
		return cmp("<=", floor), nil
	}
	return "", fmt.Errorf("rules: operator %q does not apply to %s", n.Operator, n.Field)
}

// inactiveDays compiles comparisons of inactiveDays, k = whole days since
// coalesce(last_event_at, created_at), into cut-offs on that timestamp: every
// comparison of the integer k with a rational reduces to tests "k >= m" for
// integers m, and k >= m holds exactly when the reference time is at or
// before now() - m*24h. Hours, not days: an interval of days follows the
// session time zone's daylight saving, Eval's 24-hour days do not.
func (c *compiler) inactiveDays(n *Node) (string, error) {
	switch n.Operator {
	case OpExists:
		return sqlTrue, nil
	case OpNotExists:
		return sqlFalse, nil
	}
	r, ok := toRat(n.Value)
	if !ok {
		return "", fmt.Errorf("rules: inactiveDays %s needs a number", n.Operator)
	}
	floor, ceil := ratFloorCeil(r)
	one := big.NewInt(1)
	atLeast := func(m *big.Int) string {
		switch {
		case m.Sign() <= 0:
			return sqlTrue // k is never negative
		case m.Cmp(big.NewInt(maxInactiveDays)) > 0:
			return sqlFalse // k is capped at maxInactiveDays
		}
		return "coalesce(c.last_event_at, c.created_at) <= now() - make_interval(hours => " +
			c.arg(m.Int64()*24, "integer") + ")"
	}
	switch n.Operator {
	case OpEquals, OpNotEquals:
		p := sqlFalse
		if r.IsInt() {
			p = join("AND", []string{atLeast(floor), not(atLeast(new(big.Int).Add(floor, one)))})
		}
		if n.Operator == OpNotEquals {
			return not(p), nil
		}
		return p, nil
	case OpGreaterThan:
		return atLeast(new(big.Int).Add(floor, one)), nil
	case OpGreaterOrEqual:
		return atLeast(ceil), nil
	case OpLessThan:
		return not(atLeast(ceil)), nil
	case OpLessOrEqual:
		return not(atLeast(new(big.Int).Add(floor, one))), nil
	}
	return "", fmt.Errorf("rules: operator %q does not apply to inactiveDays", n.Operator)
}
