package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Default limits of Parse. A rule tree is user input that is evaluated per
// contact and compiled into SQL, so its size is bounded.
const (
	DefaultMaxDepth      = 16   // nesting levels of groups below the root
	DefaultMaxConditions = 500  // leaves in one tree
	MaxNodes             = 1000 // groups and leaves in one tree: empty groups cost too
	// maxErrors bounds what Parse collects: a tree of 50,000 bad nodes
	// gets the first problems, not a 7 MB answer.
	maxErrors         = 50
	maxFieldLen       = 256
	maxStringValueLen = 4096
	maxArrayValueLen  = 100
)

// allTypes lists every leaf type, in the order error messages name them.
var allTypes = []Type{TypeProperty, TypeDerived, TypeSegment, TypeEvent, TypeTopic}

// Options tune Parse for where the rule tree comes from.
type Options struct {
	// Root names the tree in error paths: "rules" for segments, "gates",
	// "exit" or "steps[2].conditions" for sequences. Default "rules".
	Root string
	// Types lists the leaf types allowed; nil allows all of them.
	Types []Type
	// MaxDepth bounds group nesting; 0 means DefaultMaxDepth.
	MaxDepth int
	// MaxConditions bounds the number of leaves; 0 means DefaultMaxConditions.
	MaxConditions int
}

// FieldError is one problem in a rule tree, at Path, e.g.
// "rules.conditions[2].operator".
type FieldError struct {
	Path    string
	Message string
}

// ValidationError lists every problem Parse found, in document order. The API
// renders it as VALIDATION_ERROR with details.fields built by ByPath.
type ValidationError struct {
	Fields []FieldError
}

// Error lists every problem as "path: message".
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Path + ": " + f.Message
	}
	return "invalid rules: " + strings.Join(parts, "; ")
}

// ByPath groups the messages by path, the shape of the error envelope's
// details.fields.
func (e *ValidationError) ByPath() map[string][]string {
	out := make(map[string][]string, len(e.Fields))
	for _, f := range e.Fields {
		out[f.Path] = append(out[f.Path], f.Message)
	}
	return out
}

// Parse validates a rule tree and returns it normalised. raw is either JSON
// text (json.RawMessage or []byte; numbers keep their exact decimal form) or
// an already decoded document (map[string]any from encoding/json or
// gopkg.in/yaml.v3; a string there is a wrongly typed node, not JSON). Every problem is reported, each with its path, in a
// *ValidationError. Parse does not check that referenced segments exist or
// are acyclic: that needs the store, see CheckCycles.
func Parse(raw any, opt Options) (*Node, error) {
	p := newParser(opt)
	var doc any
	switch r := raw.(type) {
	case json.RawMessage:
		doc = p.decodeJSON(r)
	case []byte:
		doc = p.decodeJSON(r)
	default:
		doc = raw
	}
	var n *Node
	if len(p.errs) == 0 {
		n = p.node(p.root, doc, 0)
	}
	if len(p.errs) > 0 {
		return nil, &ValidationError{Fields: p.errs}
	}
	return n, nil
}

type parser struct {
	root          string
	allowed       map[Type]bool
	maxDepth      int
	maxConditions int
	leaves        int
	nodes         int
	errs          []FieldError
}

func newParser(opt Options) *parser {
	p := &parser{
		root:          opt.Root,
		allowed:       map[Type]bool{},
		maxDepth:      opt.MaxDepth,
		maxConditions: opt.MaxConditions,
	}
	if p.root == "" {
		p.root = "rules"
	}
	if p.maxDepth <= 0 {
		p.maxDepth = DefaultMaxDepth
	}
	if p.maxConditions <= 0 {
		p.maxConditions = DefaultMaxConditions
	}
	types := opt.Types
	if types == nil {
		types = allTypes
	}
	for _, t := range types {
		p.allowed[t] = true
	}
	return p
}

func (p *parser) errorf(path, format string, args ...any) {
	if len(p.errs) < maxErrors {
		p.errs = append(p.errs, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
}

func (p *parser) decodeJSON(b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep 0.1 and 12345678901234567890 exact
	var doc any
	if err := dec.Decode(&doc); err != nil {
		p.errorf(p.root, "invalid JSON: %v", err)
		return nil
	}
	if dec.More() {
		p.errorf(p.root, "invalid JSON: data after the rule object")
	}
	return doc
}

// object returns raw as a map with string keys, accepting the map shapes the
// JSON and YAML decoders produce.
func object(raw any) (map[string]any, bool) {
	switch m := raw.(type) {
	case map[string]any:
		return m, true
	case map[any]any: // gopkg.in/yaml.v2 and some hand-built documents
		out := make(map[string]any, len(m))
		for k, v := range m {
			ks, ok := k.(string)
			if !ok {
				return nil, false
			}
			out[ks] = v
		}
		return out, true
	}
	return nil, false
}

func (p *parser) node(path string, raw any, depth int) *Node {
	p.nodes++
	if p.nodes == MaxNodes+1 {
		p.errorf(path, "too many nodes: at most %d groups and conditions", MaxNodes)
	}
	if p.nodes > MaxNodes || len(p.errs) >= maxErrors {
		return nil // the tree is refused; reading on finds nothing new
	}
	m, ok := object(raw)
	if !ok {
		if raw == nil {
			p.errorf(path, "required")
		} else {
			p.errorf(path, "must be an object: a rule group {operator, conditions} or a condition {type, ...}")
		}
		return nil
	}
	if _, isLeaf := m["type"]; isLeaf {
		return p.leaf(path, m)
	}
	if _, hasConds := m["conditions"]; !hasConds {
		if _, hasField := m["field"]; hasField {
			// Looks like a leaf that forgot its type: say so rather than
			// complaining about a missing conditions array.
			return p.leaf(path, m)
		}
	}
	return p.group(path, m, depth)
}

func (p *parser) group(path string, m map[string]any, depth int) *Node {
	if depth > p.maxDepth {
		p.errorf(path, "nested too deep: at most %d levels of groups", p.maxDepth)
		return nil
	}
	p.unknownKeys(path, m, "operator", "conditions")
	n := &Node{}
	switch op, _ := m["operator"].(string); op {
	case OpAnd, OpOr, OpNot:
		n.Operator = op
	default:
		p.badEnum(path+".operator", m["operator"], OpAnd, OpOr, OpNot)
	}
	raw, present := m["conditions"]
	conds, ok := raw.([]any)
	switch {
	case !present || raw == nil:
		p.errorf(path+".conditions", "required: an array of conditions")
		return n
	case !ok:
		p.errorf(path+".conditions", "must be an array of conditions")
		return n
	}
	n.Conditions = make([]*Node, len(conds))
	for i, c := range conds {
		n.Conditions[i] = p.node(path+".conditions["+strconv.Itoa(i)+"]", c, depth+1)
	}
	return n
}

func (p *parser) leaf(path string, m map[string]any) *Node {
	p.leaves++
	if p.leaves == p.maxConditions+1 {
		p.errorf(path, "too many conditions: at most %d", p.maxConditions)
	}
	typ, _ := m["type"].(string)
	n := &Node{Type: Type(typ)}
	if !p.allowed[n.Type] {
		var names []string
		for _, t := range allTypes {
			if p.allowed[t] {
				names = append(names, string(t))
			}
		}
		if _, present := m["type"]; !present {
			p.errorf(path+".type", "required: one of %s", strings.Join(names, ", "))
		} else {
			p.badEnum(path+".type", m["type"], names...)
		}
		return nil
	}
	switch n.Type {
	case TypeProperty:
		p.unknownKeys(path, m, "type", "field", "operator", "value")
		p.propertyLeaf(path, m, n)
	case TypeDerived:
		p.unknownKeys(path, m, "type", "field", "operator", "value")
		p.derivedLeaf(path, m, n)
	case TypeSegment:
		p.unknownKeys(path, m, "type", "segmentId", "operator")
		n.SegmentID = p.nonEmptyString(path+".segmentId", m["segmentId"], maxFieldLen)
		n.Operator = p.enum(path+".operator", m["operator"], OpMemberOf, OpNotMemberOf)
	case TypeTopic:
		p.unknownKeys(path, m, "type", "topic", "operator")
		n.Topic = p.nonEmptyString(path+".topic", m["topic"], maxFieldLen)
		n.Operator = p.enum(path+".operator", m["operator"], OpSubscribed, OpNotSubscribed)
	case TypeEvent:
		p.unknownKeys(path, m, "type", "name", "operator", "within")
		n.Name = p.nonEmptyString(path+".name", m["name"], maxFieldLen)
		n.Operator = p.enum(path+".operator", m["operator"], OpOccurred, OpNotOccurred)
		if w, present := m["within"]; present && w != nil {
			s, ok := w.(string)
			if !ok {
				p.errorf(path+".within", "must be a duration string such as 30m, 1d or 2w")
			} else if d, err := ParseDuration(s); err != nil {
				p.errorf(path+".within", "must be a whole number and a unit s, m, h, d or w, such as 30m, 1d or 2w")
			} else {
				n.Within = d
			}
		}
	}
	return n
}

// comparisonOps lists the property operators in the order messages name them.
var comparisonOps = []string{
	OpEquals, OpNotEquals, OpGreaterThan, OpLessThan, OpGreaterOrEqual, OpLessOrEqual,
	OpContains, OpNotContains, OpStartsWith, OpEndsWith,
	OpIncludes, OpNotIncludes, OpIncludesAll, OpIncludesAny, OpExists, OpNotExists,
}

func isOrdering(op string) bool {
	switch op {
	case OpGreaterThan, OpLessThan, OpGreaterOrEqual, OpLessOrEqual:
		return true
	}
	return false
}

func (p *parser) propertyLeaf(path string, m map[string]any, n *Node) {
	n.Field = p.nonEmptyString(path+".field", m["field"], maxFieldLen)
	n.Operator = p.enum(path+".operator", m["operator"], comparisonOps...)
	if n.Operator == "" {
		return // the value cannot be judged without knowing what it is for
	}
	vpath := path + ".value"
	raw, present := m["value"]
	switch n.Operator {
	case OpExists, OpNotExists:
		if present && raw != nil {
			p.errorf(vpath, "%s takes no value", n.Operator)
		}
	case OpEquals, OpNotEquals, OpIncludes, OpNotIncludes:
		if v, ok := p.scalar(vpath, raw, present, n.Operator+" needs a string, number or boolean value"); ok {
			n.Value = v
		}
	case OpGreaterThan, OpLessThan, OpGreaterOrEqual, OpLessOrEqual:
		need := n.Operator + " needs a number or an ISO 8601 timestamp string such as 2024-05-01 or 2024-05-01T12:00:00Z"
		v, ok := p.scalar(vpath, raw, present, need)
		if !ok {
			break
		}
		switch val := v.(type) {
		case json.Number:
			n.Value = val
		case string:
			if _, ok := parseTimestamp(val); ok {
				n.Value = val
			} else {
				p.errorf(vpath, "%s; %q is not one (timestamps are YYYY-MM-DD, or YYYY-MM-DDTHH:MM[:SS[.ffffff]] followed by Z or ±HH:MM)", need, truncate(val))
			}
		default:
			p.errorf(vpath, "%s", need)
		}
	case OpContains, OpNotContains, OpStartsWith, OpEndsWith:
		need := n.Operator + " needs a string value"
		if v, ok := p.scalar(vpath, raw, present, need); ok {
			if s, isString := v.(string); isString {
				n.Value = s
			} else {
				p.errorf(vpath, "%s", need)
			}
		}
	case OpIncludesAll, OpIncludesAny:
		n.Value = p.scalarArray(vpath, raw, present, n.Operator)
	}
}

// derivedTypes gives each derived field's type: the numbers are never missing;
// lastEventAt is a timestamp or missing.
var derivedTypes = map[string]kind{
	DerivedTotalSends:   kindNumber,
	DerivedTotalOpens:   kindNumber,
	DerivedTotalClicks:  kindNumber,
	DerivedInactiveDays: kindNumber,
	DerivedLastEventAt:  kindString, // a timestamp
}

var derivedNames = []string{DerivedTotalSends, DerivedTotalOpens, DerivedTotalClicks, DerivedLastEventAt, DerivedInactiveDays}

var derivedOps = []string{OpEquals, OpNotEquals, OpGreaterThan, OpLessThan, OpGreaterOrEqual, OpLessOrEqual, OpExists, OpNotExists}

// derivedLeaf validates a derived leaf. Derived fields have fixed types, so
// unlike properties an operator or value that can never match them is an
// error here rather than a condition that is silently always false.
func (p *parser) derivedLeaf(path string, m map[string]any, n *Node) {
	n.Field = p.enum(path+".field", m["field"], derivedNames...)
	op, _ := m["operator"].(string)
	if n.Field != "" && slices.Contains(comparisonOps, op) && !slices.Contains(derivedOps, op) {
		p.errorf(path+".operator", "%s does not apply to derived field %s; use one of %s", op, n.Field, strings.Join(derivedOps, ", "))
		return
	}
	n.Operator = p.enum(path+".operator", m["operator"], derivedOps...)
	if n.Operator == "" || n.Field == "" {
		return
	}
	vpath := path + ".value"
	raw, present := m["value"]
	if n.Operator == OpExists || n.Operator == OpNotExists {
		if present && raw != nil {
			p.errorf(vpath, "%s takes no value", n.Operator)
		}
		return
	}
	if derivedTypes[n.Field] == kindNumber {
		need := "derived field " + n.Field + " is a number: " + n.Operator + " needs a number value"
		if v, ok := p.scalar(vpath, raw, present, need); ok {
			if num, isNum := v.(json.Number); isNum {
				n.Value = num
			} else {
				p.errorf(vpath, "%s", need)
			}
		}
		return
	}
	need := "derived field lastEventAt is a timestamp: " + n.Operator + " needs an ISO 8601 timestamp string such as 2024-05-01 or 2024-05-01T12:00:00Z"
	if v, ok := p.scalar(vpath, raw, present, need); ok {
		s, isString := v.(string)
		if _, isTS := parseTimestamp(s); isString && isTS {
			n.Value = s
		} else {
			p.errorf(vpath, "%s", need)
		}
	}
}

// scalar normalises a scalar value to string, bool, or json.Number in
// canonical form. It reports the problem and returns false when raw is
// missing (need says what is needed), not a scalar, or a scalar that cannot be
// used (an infinite number, a huge string).
func (p *parser) scalar(path string, raw any, present bool, need string) (any, bool) {
	if !present || raw == nil {
		p.errorf(path, "required: %s", need)
		return nil, false
	}
	v, problem := normalizeScalar(raw)
	switch {
	case problem != "":
		p.errorf(path, "%s", problem)
		return nil, false
	case v == nil:
		p.errorf(path, "%s", need)
		return nil, false
	}
	return v, true
}

// normalizeScalar returns raw as string, bool or json.Number; nil with no
// problem when raw is not a scalar at all; nil with a problem when it is a
// scalar that cannot be used.
func normalizeScalar(raw any) (any, string) {
	switch v := raw.(type) {
	case string:
		if len(v) > maxStringValueLen {
			return nil, fmt.Sprintf("string too long: at most %d bytes", maxStringValueLen)
		}
		if !cleanText(v) {
			return nil, "must be valid UTF-8 without NUL characters"
		}
		return v, ""
	case bool:
		return v, ""
	case time.Time:
		// gopkg.in/yaml.v3 turns unquoted 2024-05-01 into a time.Time.
		if v.Nanosecond()%1000 != 0 {
			return nil, "timestamp has more than microsecond precision"
		}
		return v.Format("2006-01-02T15:04:05.999999Z07:00"), ""
	}
	if s, ok := numberText(raw); ok {
		// Stored rules are jsonb, which writes numbers out in full (1e300
		// comes back as 301 digits): the limit applies to that form, so
		// stored rules always parse again.
		if len(s) > maxRuleNumberLen || writtenOutLen(s) > maxRuleNumberLen {
			return nil, fmt.Sprintf("number has too many digits: at most %d when written out without an exponent", maxRuleNumberLen)
		}
		return json.Number(canonicalNumber(s)), ""
	}
	switch raw.(type) {
	case json.Number, float64, float32:
		return nil, "not a finite JSON number"
	}
	return nil, ""
}

func (p *parser) scalarArray(path string, raw any, present bool, op string) any {
	if !present || raw == nil {
		p.errorf(path, "required: %s needs a non-empty array of strings, numbers or booleans", op)
		return nil
	}
	if kindOf(raw) != kindArray {
		p.errorf(path, "%s needs a non-empty array of strings, numbers or booleans", op)
		return nil
	}
	elems := elements(raw)
	switch {
	case len(elems) == 0:
		p.errorf(path, "%s needs a non-empty array", op)
		return nil
	case len(elems) > maxArrayValueLen:
		p.errorf(path, "too many values: at most %d", maxArrayValueLen)
		return nil
	}
	out := make([]any, len(elems))
	bad := false
	for i, e := range elems {
		epath := path + "[" + strconv.Itoa(i) + "]"
		v, problem := normalizeScalar(e)
		switch {
		case problem != "":
			p.errorf(epath, "%s", problem)
			bad = true
		case v == nil:
			p.errorf(epath, "must be a string, number or boolean")
			bad = true
		}
		out[i] = v
	}
	if bad {
		return nil
	}
	return out
}

func (p *parser) nonEmptyString(path string, raw any, max int) string {
	s, ok := raw.(string)
	switch {
	case raw == nil:
		p.errorf(path, "required")
	case !ok:
		p.errorf(path, "must be a string")
	case s == "":
		p.errorf(path, "must not be empty")
	case !cleanText(s):
		p.errorf(path, "must be valid UTF-8 without NUL characters")
	case len(s) > max:
		p.errorf(path, "too long: at most %d bytes", max)
	default:
		return s
	}
	return ""
}

// enum returns raw when it is one of allowed, else reports and returns "".
func (p *parser) enum(path string, raw any, allowed ...string) string {
	if s, ok := raw.(string); ok {
		for _, a := range allowed {
			if s == a {
				return s
			}
		}
	}
	p.badEnum(path, raw, allowed...)
	return ""
}

func (p *parser) badEnum(path string, raw any, allowed ...string) {
	list := strings.Join(allowed, ", ")
	switch v := raw.(type) {
	case nil:
		p.errorf(path, "required: one of %s", list)
	case string:
		p.errorf(path, "unknown value %q: must be one of %s", truncate(v), list)
	default:
		p.errorf(path, "must be a string, one of %s", list)
	}
}

func (p *parser) unknownKeys(path string, m map[string]any, known ...string) {
	var unknown []string
	for k := range m {
		ok := false
		for _, kn := range known {
			if k == kn {
				ok = true
			}
		}
		if !ok {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown) // map order is random; errors must be stable
	for _, k := range unknown {
		// The key is shortened: a 60 KiB key is not worth sending back.
		p.errorf(path+"."+truncate(k), "unknown key; this node allows %s", strings.Join(known, ", "))
	}
}

// cleanText reports whether s can be stored in PostgreSQL text and jsonb,
// which reject invalid UTF-8 and NUL.
func cleanText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

func truncate(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// maxRuleNumberLen bounds the digits of a number in a rule.
const maxRuleNumberLen = 100

// writtenOutLen is the length of the JSON number s written in plain decimal
// notation, as PostgreSQL's numeric type prints it.
func writtenOutLen(s string) int {
	s = strings.TrimPrefix(s, "-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 1_000_000 || e < -1_000_000 {
			return 1 << 30
		}
		exp, s = e, s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 1
	}
	// point is where the decimal point falls, counted in digits from the
	// first significant one.
	point := len(intPart) - (len(intPart+frac) - len(digits)) + exp
	switch {
	case point >= len(digits):
		return point
	case point <= 0:
		return 2 - point + len(digits)
	default:
		return len(digits) + 1
	}
}

// canonicalNumber writes a JSON number in plain decimal without redundant
// zeros ("1e2" → "100", "0.50" → "0.5", "-0" → "0"), so one value has one
// spelling whether it comes from a request or back from jsonb, and resending
// the same rules does not look like a change. Callers bound its length with
// writtenOutLen first.
func canonicalNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, _ = strconv.Atoi(s[i+1:])
		s = s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits, point := intPart+frac, len(intPart)+exp
	if point < 0 {
		digits, point = strings.Repeat("0", -point)+digits, 0
	}
	if point > len(digits) {
		digits += strings.Repeat("0", point-len(digits))
	}
	whole := strings.TrimLeft(digits[:point], "0")
	if whole == "" {
		whole = "0"
	}
	out := whole
	if f := strings.TrimRight(digits[point:], "0"); f != "" {
		out += "." + f
	}
	if neg && out != "0" {
		out = "-" + out
	}
	return out
}
