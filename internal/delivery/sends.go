package delivery

import (
	"context"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/page"
	"tidings/internal/sendgridevents"
	"tidings/internal/store"
	"tidings/queries"
)

// ValidStatus reports whether s is a delivery status the send list may
// filter by (the statuses are sendgridevents', which owns their order).
func ValidStatus(s string) bool {
	switch s {
	case sendgridevents.StatusSent, sendgridevents.StatusDelivered, sendgridevents.StatusBounced,
		sendgridevents.StatusComplained, sendgridevents.StatusRejected:
		return true
	}
	return false
}

// SendNotFound is the send 404.
func SendNotFound() *apperr.Error { return apperr.NotFound("SEND_NOT_FOUND", "send") }

// Filter narrows the send history; zero values mean "any".
type Filter struct {
	Status, ContactID, TemplateID, SequenceID, BroadcastID string
	// From and To bound sentAt, inclusive; zero means unbounded.
	From, To time.Time
	// InDoubt keeps only the sends still in doubt (InDoubt).
	InDoubt bool
}

// InDoubt reports whether a send is in doubt (ADDENDUM section 12): its
// record was written and the provider's answer is missing, or has not come
// yet (a record is born in doubt), and no provider event has settled it
// since.
func InDoubt(r queries.Send) bool { return r.InDoubt }

// Sends reads the send history.
type Sends struct {
	DB *store.DB
}

// Get returns one send of the tenant.
func (s *Sends) Get(ctx context.Context, tenantID, id string) (queries.Send, error) {
	r, err := s.DB.SendGet(ctx, queries.SendGetParams{TenantID: tenantID, ID: id})
	return r, apperr.Specific(err, apperr.KindNotFound, SendNotFound())
}

// List returns a page of the tenant's sends, newest first. A contactId
// filter names a contact that must exist (CONTACT_NOT_FOUND otherwise).
func (s *Sends) List(ctx context.Context, tenantID string, f Filter, p page.Params) ([]queries.Send, *page.Cursor, error) {
	if f.ContactID != "" {
		if _, err := s.DB.ContactGet(ctx, queries.ContactGetParams{TenantID: tenantID, ID: f.ContactID}); err != nil {
			return nil, nil, apperr.Specific(err, apperr.KindNotFound, contacts.NotFound())
		}
	}
	p.Until = f.To
	from := f.From // the zero time is before every row
	key := func(r queries.Send) page.Cursor { return page.Cursor{Time: r.SentAt, ID: r.ID} }
	return page.List(p, func(q page.Query) ([]queries.Send, error) {
		switch {
		case f.ContactID != "":
			return s.DB.SendListByContact(ctx, queries.SendListByContactParams{TenantID: tenantID, ContactID: f.ContactID,
				BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, FromTime: from,
				SequenceID: opt(f.SequenceID), BroadcastID: opt(f.BroadcastID), TemplateID: opt(f.TemplateID),
				Status: opt(f.Status), InDoubtOnly: f.InDoubt, Lim: q.Limit})
		case f.BroadcastID != "":
			if f.SequenceID != "" {
				return nil, nil // a broadcast's sends belong to no sequence
			}
			return s.DB.SendListByBroadcast(ctx, queries.SendListByBroadcastParams{TenantID: tenantID, BroadcastID: &f.BroadcastID,
				BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, FromTime: from,
				TemplateID: opt(f.TemplateID), Status: opt(f.Status), InDoubtOnly: f.InDoubt, Lim: q.Limit})
		case f.SequenceID != "":
			return s.DB.SendListBySequence(ctx, queries.SendListBySequenceParams{TenantID: tenantID, SequenceID: &f.SequenceID,
				BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, FromTime: from,
				TemplateID: opt(f.TemplateID), Status: opt(f.Status), InDoubtOnly: f.InDoubt, Lim: q.Limit})
		case f.TemplateID != "":
			return s.DB.SendListByTemplate(ctx, queries.SendListByTemplateParams{TenantID: tenantID, TemplateID: f.TemplateID,
				BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, FromTime: from, Status: opt(f.Status),
				InDoubtOnly: f.InDoubt, Lim: q.Limit})
		case f.Status != "":
			return s.DB.SendListByStatus(ctx, queries.SendListByStatusParams{TenantID: tenantID, Status: f.Status,
				BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, FromTime: from, InDoubtOnly: f.InDoubt, Lim: q.Limit})
		case f.InDoubt:
			return s.DB.SendListInDoubt(ctx, queries.SendListInDoubtParams{TenantID: tenantID,
				BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, FromTime: from, Lim: q.Limit})
		default:
			return s.DB.SendList(ctx, queries.SendListParams{TenantID: tenantID,
				BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, FromTime: from, Lim: q.Limit})
		}
	}, key)
}

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// deref is opt reversed: "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
