package rules

import (
	"encoding/json"
	"strconv"
	"time"
)

// Type is the type of a leaf condition.
type Type string

// Leaf types. Segments and sequences allow all five.
const (
	TypeProperty Type = "property" // contact.properties.<field>
	TypeDerived  Type = "derived"  // contact.derived.<field>
	TypeSegment  Type = "segment"  // another segment's current rules
	TypeEvent    Type = "event"    // the contact's events
	TypeTopic    Type = "topic"    // the contact's subscription to a topic
)

// Logical operators of a group node.
const (
	OpAnd = "and"
	OpOr  = "or"
	OpNot = "not"
)

// Comparison operators of property and derived leaves.
const (
	OpEquals         = "equals"
	OpNotEquals      = "notEquals"
	OpGreaterThan    = "greaterThan"
	OpLessThan       = "lessThan"
	OpGreaterOrEqual = "greaterOrEqual"
	OpLessOrEqual    = "lessOrEqual"
	OpContains       = "contains"
	OpNotContains    = "notContains"
	OpStartsWith     = "startsWith"
	OpEndsWith       = "endsWith"
	OpIncludes       = "includes"
	OpNotIncludes    = "notIncludes"
	OpIncludesAll    = "includesAll"
	OpIncludesAny    = "includesAny"
	OpExists         = "exists"
	OpNotExists      = "notExists"
)

// Operators of segment and event leaves.
const (
	OpMemberOf    = "memberOf"
	OpNotMemberOf = "notMemberOf"
	OpOccurred    = "occurred"
	OpNotOccurred = "notOccurred"
	// Operators of topic leaves: the contact receives the topic's messages
	// (its own choice, else the topic's default), or not. An unknown topic
	// has no subscribers.
	OpSubscribed    = "subscribed"
	OpNotSubscribed = "notSubscribed"
)

// Derived fields a derived leaf may read.
const (
	DerivedTotalSends   = "totalSends"
	DerivedTotalOpens   = "totalOpens"
	DerivedTotalClicks  = "totalClicks"
	DerivedLastEventAt  = "lastEventAt"
	DerivedInactiveDays = "inactiveDays"
)

// Node is one node of a rule tree: a group when Type is empty (Operator is
// and, or or not, over Conditions), a leaf otherwise. Nodes are normally
// produced by Parse, which guarantees the invariants the evaluator and the SQL
// compiler rely on; a hand-built invalid node evaluates to false rather than
// panicking, and ToSQL rejects it.
type Node struct {
	// Operator is and|or|not for a group, and the leaf's operator for a leaf.
	Operator string
	// Conditions are a group's children, leaves or groups, any depth.
	Conditions []*Node

	// Type is the leaf type; empty for a group.
	Type Type
	// Field names the property (a top-level key of contact.properties; a dot
	// is part of the key, not a path) or the derived field.
	Field string
	// Value is the comparison value, normalised: nil when the operator takes
	// none, string, bool, json.Number, or []any of those.
	Value any
	// SegmentID is the segment a segment leaf refers to.
	SegmentID string
	// Name is the event name of an event leaf.
	Name string
	// Topic is the topic id of a topic leaf.
	Topic string
	// Within bounds an event leaf to events no older than this; 0 means any
	// time.
	Within time.Duration
}

// IsLeaf reports whether n is a leaf condition rather than a group.
func (n *Node) IsLeaf() bool { return n.Type != "" }

// SegmentRefs returns the ids of the segments this tree refers to directly
// (its own segment leaves, not theirs), each once, in order of appearance. It
// is what a segment's dependsOn lists.
func (n *Node) SegmentRefs() []string {
	var refs []string
	seen := map[string]bool{}
	n.Walk("", func(_ string, m *Node) {
		if m.Type == TypeSegment && !seen[m.SegmentID] {
			seen[m.SegmentID] = true
			refs = append(refs, m.SegmentID)
		}
	})
	return refs
}

// EventNames returns the names the tree's event leaves ask about, each once,
// in order of appearance (not those of referenced segments). A sequence uses
// it to tell which incoming events can change its exit condition.
func (n *Node) EventNames() []string {
	var names []string
	seen := map[string]bool{}
	n.Walk("", func(_ string, m *Node) {
		if m.Type == TypeEvent && !seen[m.Name] {
			seen[m.Name] = true
			names = append(names, m.Name)
		}
	})
	return names
}

// Walk calls fn for n and every node below it, depth first, with the node's
// path in the notation of validation errors (root, root.conditions[0], ...).
func (n *Node) Walk(root string, fn func(path string, n *Node)) {
	if n == nil {
		return
	}
	fn(root, n)
	for i, c := range n.Conditions {
		c.Walk(root+".conditions["+strconv.Itoa(i)+"]", fn)
	}
}

// MarshalJSON writes the node in the rule format Parse reads, with durations
// in their shortest form (`24h` comes back as `1d`). Parse(MarshalJSON(n))
// yields an equal tree.
func (n *Node) MarshalJSON() ([]byte, error) {
	if !n.IsLeaf() {
		conds := n.Conditions
		if conds == nil {
			conds = []*Node{}
		}
		return json.Marshal(struct {
			Operator   string  `json:"operator"`
			Conditions []*Node `json:"conditions"`
		}{n.Operator, conds})
	}
	switch n.Type {
	case TypeSegment:
		return json.Marshal(struct {
			Type      Type   `json:"type"`
			SegmentID string `json:"segmentId"`
			Operator  string `json:"operator"`
		}{n.Type, n.SegmentID, n.Operator})
	case TypeTopic:
		return json.Marshal(struct {
			Type     Type   `json:"type"`
			Topic    string `json:"topic"`
			Operator string `json:"operator"`
		}{n.Type, n.Topic, n.Operator})
	case TypeEvent:
		within := ""
		if n.Within > 0 {
			within = FormatDuration(n.Within)
		}
		return json.Marshal(struct {
			Type     Type   `json:"type"`
			Name     string `json:"name"`
			Operator string `json:"operator"`
			Within   string `json:"within,omitempty"`
		}{n.Type, n.Name, n.Operator, within})
	}
	if n.Value == nil {
		return json.Marshal(struct {
			Type     Type   `json:"type"`
			Field    string `json:"field"`
			Operator string `json:"operator"`
		}{n.Type, n.Field, n.Operator})
	}
	return json.Marshal(struct {
		Type     Type   `json:"type"`
		Field    string `json:"field"`
		Operator string `json:"operator"`
		Value    any    `json:"value"`
	}{n.Type, n.Field, n.Operator, n.Value})
}
