package engine

import (
	"context"
	"time"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/delivery"
	"tidings/internal/page"
	"tidings/internal/render"
	"tidings/internal/store"
	"tidings/internal/templates"
	"tidings/queries"
)

// Store is what the HTTP routes of enrolments and scheduled sends ask of
// the engine: each method is one domain call, so no handler runs a query.
type Store struct {
	DB        *store.DB
	Templates *templates.Renderer
	// BaseURL is PUBLIC_BASE_URL, for the dry run's placeholder
	// unsubscribe link.
	BaseURL string
}

// ScheduledNotFound is the scheduled send 404.
func ScheduledNotFound() *apperr.Error {
	return apperr.NotFound("SCHEDULED_SEND_NOT_FOUND", "scheduled send")
}

// Enrol enrols a contact by hand (POST /api/sequences/{id}/contacts).
func (s *Store) Enrol(ctx context.Context, tenantID, sequenceID, contactID string) (e queries.Enrolment, created bool, err error) {
	err = s.DB.InTx(ctx, func(q *store.Tx) error {
		seq, err := LoadSequence(ctx, q.Queries, tenantID, sequenceID)
		if err != nil {
			return err
		}
		if _, err := q.ContactGet(ctx, queries.ContactGetParams{TenantID: tenantID, ID: contactID}); err != nil {
			return apperr.Specific(err, apperr.KindNotFound, contacts.NotFound())
		}
		e, created, err = Enroll(ctx, q, tenantID, seq, contactID, nil)
		return err
	})
	return e, created, err
}

// Unenrol exits the contact's open enrolment (reason manual) and cancels
// its pending sends.
func (s *Store) Unenrol(ctx context.Context, tenantID, sequenceID, contactID string) error {
	return s.DB.InTx(ctx, func(q *store.Tx) error {
		if _, err := LoadSequence(ctx, q.Queries, tenantID, sequenceID); err != nil {
			return err
		}
		_, err := Exit(ctx, q, tenantID, sequenceID, contactID, ReasonManual)
		return err
	})
}

// Enrolled lists a sequence's active and paused enrolments, newest first.
func (s *Store) Enrolled(ctx context.Context, tenantID, sequenceID string, p page.Params) ([]queries.EnrolmentListBySequenceRow, *page.Cursor, error) {
	if _, err := LoadSequence(ctx, s.DB.Queries, tenantID, sequenceID); err != nil {
		return nil, nil, err
	}
	return page.List(p, func(pq page.Query) ([]queries.EnrolmentListBySequenceRow, error) {
		return s.DB.EnrolmentListBySequence(ctx, queries.EnrolmentListBySequenceParams{TenantID: tenantID,
			SequenceID: sequenceID, BeforeTime: pq.BeforeTime, BeforeID: pq.BeforeID, Lim: pq.Limit})
	}, func(r queries.EnrolmentListBySequenceRow) page.Cursor {
		return page.Cursor{Time: r.EnrolledAt, ID: r.ID}
	})
}

// Status is a sequence with its enrolments counted by status.
func (s *Store) Status(ctx context.Context, tenantID, sequenceID string) (queries.EnrolmentSequenceStatusRow, error) {
	r, err := s.DB.EnrolmentSequenceStatus(ctx, queries.EnrolmentSequenceStatusParams{TenantID: tenantID, ID: sequenceID})
	return r, apperr.Specific(err, apperr.KindNotFound, NotFound())
}

// maxContactEnrolments bounds GET /api/contacts/{id}/sequences, which API.md
// shows unpaginated.
const maxContactEnrolments = 1000

// OfContact lists every enrolment of a contact, newest first.
func (s *Store) OfContact(ctx context.Context, tenantID, contactID string) ([]queries.Enrolment, error) {
	return s.DB.EnrolmentListByContact(ctx, queries.EnrolmentListByContactParams{
		TenantID: tenantID, ContactID: contactID, Lim: maxContactEnrolments})
}

// ScheduledFilter narrows GET /api/scheduled; nil means any.
type ScheduledFilter struct {
	Status, ContactID, CancelReason *string
	Limit                           int
}

// Scheduled lists scheduled sends and says whether more follow.
func (s *Store) Scheduled(ctx context.Context, tenantID string, f ScheduledFilter) ([]queries.ScheduledSend, bool, error) {
	rows, err := s.DB.ScheduledSendList(ctx, queries.ScheduledSendListParams{TenantID: tenantID,
		Status: f.Status, ContactID: f.ContactID, CancelReason: f.CancelReason, Lim: int32(f.Limit + 1)})
	if err != nil {
		return nil, false, err
	}
	if len(rows) > f.Limit {
		return rows[:f.Limit], true, nil
	}
	return rows, false, nil
}

// ScheduledGet reads one scheduled send, which must be scheduled for at.
func (s *Store) ScheduledGet(ctx context.Context, tenantID, id string, at time.Time) (queries.ScheduledSend, error) {
	r, err := s.DB.ScheduledSendGet(ctx, queries.ScheduledSendGetParams{TenantID: tenantID, ID: id, ScheduledFor: at})
	return r, apperr.Specific(err, apperr.KindNotFound, ScheduledNotFound())
}

// Preview is a dry run's templatePreview.
type Preview struct {
	Subject, TextPreview string
}

// textPreviewChars is how much of the text part a dry run shows.
const textPreviewChars = 200

// DryRunWithPreview is DryRun, plus, for would_send, the step's template
// rendered for the contact as a send would (the enrolling event in
// context), with a placeholder unsubscribe link. Nothing is written.
func (s *Store) DryRunWithPreview(ctx context.Context, tenantID, sequenceID, contactID, stepID string) (DryRunResult, *Preview, error) {
	res, err := DryRun(ctx, s.DB.Queries, tenantID, sequenceID, contactID, stepID)
	if err != nil || res.Outcome != WouldSend {
		return res, nil, err
	}
	tmpl, err := s.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: tenantID, ID: res.Step.Template})
	if err != nil {
		return res, nil, apperr.Specific(err, apperr.KindNotFound, templates.NotFound())
	}
	recipient, err := delivery.RecipientOf(res.Contact)
	if err != nil {
		return res, nil, err
	}
	rc := render.Context{UnsubscribeURL: s.BaseURL + "/t/u/dry-run", Contact: recipient}
	if res.TriggerEvent != nil {
		rc.Event = delivery.EventOf(*res.TriggerEvent)
	}
	msg, err := s.Templates.RenderCurrent(ctx, tenantID, tmpl, rc)
	if err != nil {
		return res, nil, err
	}
	text := msg.Text
	if utf8.RuneCountInString(text) > textPreviewChars {
		text = string([]rune(text)[:textPreviewChars])
	}
	return res, &Preview{Subject: msg.Subject, TextPreview: text}, nil
}
