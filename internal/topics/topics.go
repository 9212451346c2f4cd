// Package topics keeps a tenant's topics and the one rule of who a topic
// message may go to (ADDENDUM 16): a contact's explicit choice for the
// topic, else the topic's default (opt_out: subscribed until they leave;
// opt_in: only once they join). The same rule is topic_subscribed in SQL
// (schema 0021) for the statements that judge many contacts at once.
package topics

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/events"
	"tidings/internal/ids"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/queries"
)

// Defaults of a topic.
const (
	OptIn  = "opt_in"
	OptOut = "opt_out"
)

// Limits.
const (
	MaxTopics         = 100
	maxNameLen        = 200
	maxDescriptionLen = 1000
)

// NotFound is the topic 404 (ADDENDUM 13 names it NOT_FOUND).
func NotFound() *apperr.Error { return apperr.NotFound("NOT_FOUND", "topic") }

func notFound(err error) error { return apperr.Specific(err, apperr.KindNotFound, NotFound()) }

// Subscribed reports whether a contact whose explicit choices are choices
// (contacts.topics) receives messages of topic t.
func Subscribed(choices json.RawMessage, t queries.Topic) bool {
	var m map[string]bool
	if len(choices) > 0 {
		_ = json.Unmarshal(choices, &m)
	}
	if v, ok := m[t.ID]; ok {
		return v
	}
	return t.DefaultMode == OptOut
}

// Store keeps topics.
type Store struct {
	DB *store.DB
}

// Input is a create or a PATCH; nil fields stay as they are. ID and
// Default are for create only.
type Input struct {
	ID          *string
	Name        *string
	Description *string
	Default     *string
}

func (in Input) check(create bool) error {
	var f apperr.Fields
	if create {
		if in.ID == nil {
			f.Add("topicId", "is required")
		} else {
			f.Check(ids.Valid(*in.ID), "topicId", "must be 1-64 characters of letters, digits, '_', '.' and '-', starting with a letter or digit")
		}
		if in.Default == nil {
			f.Add("default", "is required")
		} else {
			f.Check(*in.Default == OptIn || *in.Default == OptOut, "default", "must be one of opt_in, opt_out")
		}
		if in.Name == nil {
			f.Add("name", "is required")
		}
	}
	if in.Name != nil {
		n := strings.TrimSpace(*in.Name)
		f.Check(n != "" && utf8.RuneCountInString(n) <= maxNameLen, "name", fmt.Sprintf("must be 1-%d characters", maxNameLen))
	}
	if in.Description != nil {
		f.Check(utf8.RuneCountInString(*in.Description) <= maxDescriptionLen, "description",
			fmt.Sprintf("must be at most %d characters", maxDescriptionLen))
	}
	return f.Err()
}

// Create adds a topic: 409 CONFLICT when the id is taken, VALIDATION_ERROR
// past MaxTopics.
func (s *Store) Create(ctx context.Context, tenantID string, in Input) (queries.Topic, error) {
	if err := in.check(true); err != nil {
		return queries.Topic{}, err
	}
	var out queries.Topic
	err := s.DB.InTx(ctx, func(tx *store.Tx) error {
		q := tx.Queries
		tx.AuditResource(*in.ID)
		// The tenant's row lock serialises creates, so the count holds.
		if _, err := q.TenantGetForUpdate(ctx, tenantID); err != nil {
			return err
		}
		n, err := q.TopicCount(ctx, tenantID)
		if err != nil {
			return err
		}
		if n >= MaxTopics {
			return apperr.Invalid("topicId", fmt.Sprintf("a tenant has at most %d topics", MaxTopics))
		}
		desc := ""
		if in.Description != nil {
			desc = *in.Description
		}
		out, err = q.TopicInsert(ctx, queries.TopicInsertParams{TenantID: tenantID, ID: *in.ID,
			Name: strings.TrimSpace(*in.Name), Description: desc, DefaultMode: *in.Default})
		if store.IsNoRows(err) {
			return apperr.Conflict("CONFLICT", "topic "+*in.ID+" already exists")
		}
		return err
	})
	return out, err
}

// Get returns one topic.
func (s *Store) Get(ctx context.Context, tenantID, id string) (queries.Topic, error) {
	t, err := s.DB.TopicGet(ctx, queries.TopicGetParams{TenantID: tenantID, ID: id})
	return t, notFound(err)
}

// List returns a page of topics, newest first.
func (s *Store) List(ctx context.Context, tenantID string, p page.Params) ([]queries.Topic, *page.Cursor, error) {
	return page.List(p, func(q page.Query) ([]queries.Topic, error) {
		return s.DB.TopicList(ctx, queries.TopicListParams{TenantID: tenantID,
			BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
	}, func(t queries.Topic) page.Cursor { return page.Cursor{Time: t.CreatedAt, ID: t.ID} })
}

// All returns every topic of the tenant, by name.
func (s *Store) All(ctx context.Context, tenantID string) ([]queries.Topic, error) {
	return s.DB.TopicAll(ctx, tenantID)
}

// Update changes name and description (a topic's default is fixed: changing
// it would move every contact without a choice at once).
func (s *Store) Update(ctx context.Context, tenantID, id string, in Input) (queries.Topic, error) {
	if in.Name == nil && in.Description == nil {
		return queries.Topic{}, apperr.AtLeastOne("name", "description")
	}
	if err := in.check(false); err != nil {
		return queries.Topic{}, err
	}
	var name *string
	if in.Name != nil {
		n := strings.TrimSpace(*in.Name)
		name = &n
	}
	var t queries.Topic
	err := s.DB.Tx(ctx, func(q *queries.Queries) error { // with the request's audit entry
		var err error
		t, err = q.TopicUpdate(ctx, queries.TopicUpdateParams{TenantID: tenantID, ID: id, Name: name,
			Description: in.Description})
		return err
	})
	return t, notFound(err)
}

// Delete removes a topic that nothing names: a template, sequence or
// broadcast still to be sent that names it makes it VALIDATION_ERROR
// (deleting it would leave their messages without the consent they ask
// for). Contacts' choices for it stay, unread, and count again if a topic
// of the same id is created.
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	return s.DB.Tx(ctx, func(q *queries.Queries) error {
		uses, err := q.TopicUses(ctx, queries.TopicUsesParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		if len(uses) > 0 {
			return apperr.Invalid("topicId", "is still named by "+strings.Join(uses, ", "))
		}
		n, err := q.TopicDelete(ctx, queries.TopicDeleteParams{TenantID: tenantID, ID: id})
		if err == nil && n == 0 {
			return NotFound()
		}
		return err
	})
}

// Exists checks that id names a topic of the tenant: NOT_FOUND otherwise
// (a template, sequence or broadcast naming an unknown topic).
func Exists(ctx context.Context, q *queries.Queries, tenantID, id string) error {
	_, err := q.TopicGet(ctx, queries.TopicGetParams{TenantID: tenantID, ID: id})
	// A reference names the topic it misses: the sequence, template or
	// broadcast that names it is refused, and its author must know which
	// topic to create first.
	missing := apperr.NotFound("NOT_FOUND", "topic")
	missing.Message = fmt.Sprintf("topic %q not found: create it first (POST /api/topics)", id)
	missing.Details = map[string]any{"topic": id}
	return apperr.Specific(err, apperr.KindNotFound, missing)
}

// CheckChoices validates a contact's topics object: each key a topic of
// the tenant, each value true, false or (to remove the choice) null. It
// returns the JSON to merge (contacts.ContactSetTopics).
func CheckChoices(ctx context.Context, q *queries.Queries, tenantID string, choices map[string]*bool) (json.RawMessage, error) {
	if len(choices) == 0 || len(choices) > MaxTopics {
		return Choices(nil, choices)
	}
	all, err := q.TopicAll(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	return Choices(all, choices)
}

// Choices is CheckChoices against the tenant's topics already read (all):
// a contact import reads them once per chunk.
func Choices(all []queries.Topic, choices map[string]*bool) (json.RawMessage, error) {
	var f apperr.Fields
	keys := make([]string, 0, len(choices))
	for k := range choices {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > MaxTopics {
		return nil, apperr.Invalid("topics", fmt.Sprintf("must name at most %d topics", MaxTopics))
	}
	for _, k := range keys {
		if !slices.ContainsFunc(all, func(t queries.Topic) bool { return t.ID == k }) {
			f.Add("topics."+k, "is not a topic of this tenant")
		}
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(choices)
	return b, err
}

// OfMessage returns the topic of a message (ADDENDUM 16): own, the
// sequence's or broadcast's topic id, else the template's; nil when it has
// none. A topic that no longer exists (deleted in a race with the check
// that forbids deleting a topic in use) counts as opt_in: only contacts
// who chose it explicitly receive the message.
func OfMessage(ctx context.Context, q *queries.Queries, tenantID, own, templateID string) (*queries.Topic, error) {
	id := own
	if id == "" {
		t, err := q.TemplateTopic(ctx, queries.TemplateTopicParams{TenantID: tenantID, ID: templateID})
		if err != nil && !store.IsNoRows(err) {
			return nil, err
		}
		if t == nil {
			return nil, nil
		}
		id = *t
	}
	t, err := q.TopicGet(ctx, queries.TopicGetParams{TenantID: tenantID, ID: id})
	if store.IsNoRows(err) {
		return &queries.Topic{TenantID: tenantID, ID: id, Name: id, DefaultMode: OptIn}, nil
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// Choose records a recipient's choices from the preference page or a
// topic message's one-click unsubscribe: each topic id to true (joined) or
// false (left), in one transaction with a timeline entry
// (topics_changed: {choices, sendId}). The ids must be the tenant's
// topics. An unknown contact is NOT_FOUND.
func (s *Store) Choose(ctx context.Context, tenantID, contactID, sendID string, choices map[string]bool) (queries.Contact, error) {
	var c queries.Contact
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		ptrs := make(map[string]*bool, len(choices))
		for k, v := range choices {
			ptrs[k] = &v
		}
		merged, err := CheckChoices(ctx, q.Queries, tenantID, ptrs)
		if err != nil {
			return err
		}
		if c, err = q.ContactSetTopics(ctx, queries.ContactSetTopicsParams{TenantID: tenantID, ID: contactID,
			Choices: merged}); err != nil {
			return err
		}
		return events.WriteTimelineEntry(ctx, q, tenantID, contactID, "topics_changed",
			map[string]any{"choices": choices, "sendId": sendID})
	})
	return c, apperr.Specific(err, apperr.KindNotFound, apperr.NotFound("CONTACT_NOT_FOUND", "contact"))
}

// Choice is one topic as the preference page shows it.
type Choice struct {
	ID, Name, Description string
	Subscribed            bool
}

// Choices lists every topic of the tenant with whether a contact whose
// choices are choices receives it.
func (s *Store) Choices(ctx context.Context, tenantID string, choices json.RawMessage) ([]Choice, error) {
	all, err := s.All(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	out := make([]Choice, len(all))
	for i, t := range all {
		out[i] = Choice{ID: t.ID, Name: t.Name, Description: t.Description, Subscribed: Subscribed(choices, t)}
	}
	return out, nil
}
