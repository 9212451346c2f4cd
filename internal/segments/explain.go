package segments

import (
	"context"
	"encoding/json"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/rules"
	"tidings/queries"
)

// Explanation says why a contact is or is not a member of a segment: the
// segment's rule tree judged on the contact's current data, node by node.
type Explanation struct {
	SegmentID      string
	ContactID      string
	IsMember       bool
	EvaluatedAt    time.Time
	StoredIsMember bool
	Rules          map[string]any
}

// contactNotFound is the contact 404 of explain.
func contactNotFound(err error) error {
	return apperr.Specific(err, apperr.KindNotFound, apperr.NotFound("CONTACT_NOT_FOUND", "contact"))
}

// Explain judges segment id's current rules (live or not) for one contact
// with the evaluator that live segments use, and reports every node's
// result and every leaf's actual value next to the stored membership.
func (s *Store) Explain(ctx context.Context, tenantID, id, contactID string) (Explanation, error) {
	q := s.DB.Queries
	seg, err := q.SegmentGet(ctx, queries.SegmentGetParams{TenantID: tenantID, ID: id})
	if err != nil {
		return Explanation{}, notFound(err)
	}
	c, err := q.ContactGet(ctx, queries.ContactGetParams{TenantID: tenantID, ID: contactID})
	if err != nil {
		return Explanation{}, contactNotFound(err)
	}
	g, err := rulesFrom(ctx, q, tenantID, seg.DependsOn)
	if err != nil {
		return Explanation{}, err
	}
	node, err := rules.Parse(json.RawMessage(seg.Rules), rules.Options{})
	if err != nil {
		return Explanation{}, err
	}
	subj, err := subject(c)
	if err != nil {
		return Explanation{}, err
	}
	now, err := q.SegmentLiveNow(ctx)
	if err != nil {
		return Explanation{}, err
	}
	resolve := g.resolver()
	// The newest counted event of each name a leaf asks about.
	names := map[string]bool{}
	topicsUsed := false
	flatten(node, resolve, func(m *rules.Node) {
		switch m.Type {
		case rules.TypeEvent:
			names[m.Name] = true
		case rules.TypeTopic:
			topicsUsed = true
		}
	})
	latest := map[string]time.Time{}
	if len(names) > 0 {
		rows, err := q.SegmentLiveLatestEvents(ctx, queries.SegmentLiveLatestEventsParams{TenantID: tenantID,
			ContactIds: []string{c.ID}, Names: setKeys(names)})
		if err != nil {
			return Explanation{}, err
		}
		for _, r := range rows {
			latest[r.Name] = r.OccurredAt
		}
	}
	optOut := map[string]bool{}
	if topicsUsed {
		all, err := q.TopicAll(ctx, tenantID)
		if err != nil {
			return Explanation{}, err
		}
		for _, t := range all {
			optOut[t.ID] = t.DefaultMode == "opt_out"
		}
	}
	env := rules.Env{Now: now, Segment: resolve,
		HasEvent: func(name string, after time.Time) bool {
			t, ok := latest[name]
			return ok && !t.Before(after)
		},
		TopicOptOut: func(id string) (bool, bool) { v, ok := optOut[id]; return v, ok }}
	stored, err := q.SegmentIsMember(ctx, queries.SegmentIsMemberParams{TenantID: tenantID, SegmentID: id, ContactID: c.ID})
	if err != nil {
		return Explanation{}, err
	}
	tree := explainNode(node, subj, env, latest)
	return Explanation{SegmentID: id, ContactID: c.ID, IsMember: tree["result"].(bool), EvaluatedAt: now,
		StoredIsMember: stored, Rules: tree}, nil
}

// explainNode renders n as the rule format with result on every node and
// actual on every leaf. Each node is judged by rules.Eval on its own, which
// gives the same answers as judging the whole tree (a tree's result is its
// nodes' combined).
func explainNode(n *rules.Node, subj rules.Subject, env rules.Env, latest map[string]time.Time) map[string]any {
	var out map[string]any
	b, _ := json.Marshal(n)
	_ = json.Unmarshal(b, &out)
	if !n.IsLeaf() {
		conds := make([]any, len(n.Conditions))
		for i, c := range n.Conditions {
			conds[i] = explainNode(c, subj, env, latest)
		}
		out["conditions"] = conds
	} else {
		out["actual"] = actual(n, subj, env, latest)
	}
	out["result"] = rules.Eval(n, subj, env)
	return out
}

// actual is the contact's value that a leaf compares; nil when absent.
func actual(n *rules.Node, subj rules.Subject, env rules.Env, latest map[string]time.Time) any {
	switch n.Type {
	case rules.TypeProperty:
		return subj.Properties[n.Field]
	case rules.TypeDerived:
		switch n.Field {
		case rules.DerivedTotalSends:
			return subj.TotalSends
		case rules.DerivedTotalOpens:
			return subj.TotalOpens
		case rules.DerivedTotalClicks:
			return subj.TotalClicks
		case rules.DerivedInactiveDays:
			return rules.InactiveDays(env.Now, subj.CreatedAt, subj.LastEventAt)
		case rules.DerivedLastEventAt:
			if subj.LastEventAt == nil {
				return nil
			}
			return subj.LastEventAt.UTC().Format(time.RFC3339Nano)
		}
	case rules.TypeEvent:
		// The newest counted event of that name, whenever it was.
		if t, ok := latest[n.Name]; ok {
			return t.UTC().Format(time.RFC3339Nano)
		}
		return nil
	case rules.TypeSegment:
		// Membership by the referenced segment's current rules.
		return rules.Eval(&rules.Node{Type: rules.TypeSegment, Operator: rules.OpMemberOf, SegmentID: n.SegmentID}, subj, env)
	case rules.TypeTopic:
		return rules.Eval(&rules.Node{Type: rules.TypeTopic, Operator: rules.OpSubscribed, Topic: n.Topic}, subj, env)
	}
	return nil
}
