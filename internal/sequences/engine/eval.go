package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"tidings/internal/rules"
	"tidings/internal/sequences/definition"
	"tidings/queries"
)

// evaluator evaluates a sequence's rule trees for one contact and one
// enrolment: event leaves count only events at or after the enrolment
// (rules.Env.Since), and never the event that enrolled the contact, so a
// sequence triggered by X whose exit is "X occurred" does not end on the
// event that started it.
type evaluator struct {
	subject rules.Subject
	env     rules.Env
	err     error // the first query error of HasEvent
}

// newEvaluator loads what the rule trees of def need for contact c:
// referenced segments' rules, and a HasEvent backed by the events table.
// since is the enrolment time (zero outside a sequence); trigger the
// enrolling event's id ("" for none).
func newEvaluator(ctx context.Context, q *queries.Queries, c queries.Contact, def *definition.Definition, since time.Time, trigger string) (*evaluator, error) {
	props, err := rules.DecodeProperties(c.Properties)
	if err != nil {
		return nil, fmt.Errorf("contact %s properties: %w", c.ID, err)
	}
	var choices map[string]bool
	if len(c.Topics) > 0 {
		if err := json.Unmarshal(c.Topics, &choices); err != nil {
			return nil, fmt.Errorf("contact %s topics: %w", c.ID, err)
		}
	}
	ev := &evaluator{subject: rules.Subject{Properties: props, TotalSends: c.TotalSends, TotalOpens: c.TotalOpens,
		TotalClicks: c.TotalClicks, LastEventAt: c.LastEventAt, CreatedAt: c.CreatedAt, Topics: choices}}
	// The tenant's topics, read at the first topic leaf.
	var defaults map[string]bool
	segs := map[string]*rules.Node{}
	if refs := def.SegmentIDs(); len(refs) > 0 {
		rows, err := q.SegmentRulesFrom(ctx, queries.SegmentRulesFromParams{TenantID: c.TenantID, Ids: refs})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if n, err := rules.Parse(json.RawMessage(r.Rules), rules.Options{}); err == nil {
				segs[r.ID] = n
			}
		}
	}
	ev.env = rules.Env{Now: time.Now(), Since: since,
		Segment: func(id string) (*rules.Node, bool) { n, ok := segs[id]; return n, ok },
		HasEvent: func(name string, after time.Time) bool {
			has, err := q.EnrolmentHasEvent(ctx, queries.EnrolmentHasEventParams{TenantID: c.TenantID, ContactID: c.ID,
				Name: name, After: after, ExcludeID: trigger})
			if err != nil && ev.err == nil {
				ev.err = err
			}
			return has
		},
		TopicOptOut: func(id string) (bool, bool) {
			if defaults == nil {
				defaults = map[string]bool{}
				all, err := q.TopicAll(ctx, c.TenantID)
				if err != nil && ev.err == nil {
					ev.err = err
				}
				for _, t := range all {
					defaults[t.ID] = t.DefaultMode == "opt_out"
				}
			}
			optOut, ok := defaults[id]
			return optOut, ok
		}}
	return ev, nil
}

// holds reports whether n holds; a nil tree holds when empty is true (no
// gates, no step conditions) and does not otherwise (no exit condition).
func (ev *evaluator) holds(n *rules.Node, empty bool) (bool, error) {
	if n == nil {
		return empty, nil
	}
	ok := rules.Eval(n, ev.subject, ev.env)
	return ok, ev.err
}

// explain lists, leaf by leaf, what the tree saw of the contact: the
// dry run's decisionPath details, which a person reads to learn which leaf
// failed and with what value.
func (ev *evaluator) explain(n *rules.Node) []map[string]any {
	var out []map[string]any
	var walk func(n *rules.Node)
	walk = func(n *rules.Node) {
		if n == nil {
			return
		}
		if !n.IsLeaf() {
			for _, c := range n.Conditions {
				walk(c)
			}
			return
		}
		ok := rules.Eval(n, ev.subject, ev.env)
		out = append(out, map[string]any{"condition": describe(n), "actual": ev.actual(n), "passed": ok})
	}
	walk(n)
	return out
}

// failing returns the descriptions of the leaves that did not pass, with
// the contact's value, for the explanation sentence.
func failing(leaves []map[string]any) string {
	var parts []string
	for _, l := range leaves {
		if l["passed"] == false {
			parts = append(parts, fmt.Sprintf("%s (contact has %s)", l["condition"], jsonText(l["actual"])))
		}
	}
	return strings.Join(parts, "; ")
}

func describe(n *rules.Node) string {
	switch n.Type {
	case rules.TypeProperty, rules.TypeDerived:
		s := fmt.Sprintf("%s %s %s", n.Type, n.Field, n.Operator)
		if n.Value != nil {
			s += " " + jsonText(n.Value)
		}
		return s
	case rules.TypeSegment:
		return fmt.Sprintf("segment %s %s", n.Operator, n.SegmentID)
	case rules.TypeTopic:
		return fmt.Sprintf("topic %s %s", n.Topic, n.Operator)
	case rules.TypeEvent:
		s := fmt.Sprintf("event %s %s", n.Name, n.Operator)
		if n.Within > 0 {
			s += " within " + rules.FormatDuration(n.Within)
		}
		return s
	}
	return string(n.Type)
}

// actual is the contact's value that a leaf compared.
func (ev *evaluator) actual(n *rules.Node) any {
	switch n.Type {
	case rules.TypeProperty:
		v, ok := ev.subject.Properties[n.Field]
		if !ok {
			return "(not set)"
		}
		return v
	case rules.TypeDerived:
		switch n.Field {
		case rules.DerivedTotalSends:
			return ev.subject.TotalSends
		case rules.DerivedTotalOpens:
			return ev.subject.TotalOpens
		case rules.DerivedTotalClicks:
			return ev.subject.TotalClicks
		case rules.DerivedInactiveDays:
			return rules.InactiveDays(ev.env.Now, ev.subject.CreatedAt, ev.subject.LastEventAt)
		case rules.DerivedLastEventAt:
			if ev.subject.LastEventAt == nil {
				return nil
			}
			return ev.subject.LastEventAt.UTC().Format(time.RFC3339)
		}
	case rules.TypeSegment:
		return map[bool]string{true: "member", false: "not a member"}[rules.Eval(
			&rules.Node{Type: rules.TypeSegment, Operator: rules.OpMemberOf, SegmentID: n.SegmentID}, ev.subject, ev.env)]
	case rules.TypeEvent:
		occ := rules.Eval(&rules.Node{Type: rules.TypeEvent, Operator: rules.OpOccurred, Name: n.Name, Within: n.Within},
			ev.subject, ev.env)
		return map[bool]string{true: "occurred", false: "not occurred"}[occ]
	case rules.TypeTopic:
		sub := rules.Eval(&rules.Node{Type: rules.TypeTopic, Operator: rules.OpSubscribed, Topic: n.Topic}, ev.subject, ev.env)
		return map[bool]string{true: "subscribed", false: "not subscribed"}[sub]
	}
	return nil
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
