package contacts

import (
	"context"
	"slices"
	"strings"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/events"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/queries"
)

// Suppression reasons (ADDENDUM 16).
const (
	SuppressHardBounce = "hard_bounce"
	SuppressComplaint  = "complaint"
	SuppressManual     = "manual"
)

// SuppressionReasons lists them, for the list's filter.
var SuppressionReasons = []string{SuppressHardBounce, SuppressComplaint, SuppressManual}

const maxNoteLen = 1000

// SuppressionNotFound is the 404 of an email not on the list.
func SuppressionNotFound() *apperr.Error { return apperr.NotFound("NOT_FOUND", "suppression") }

// Suppress puts email (normalised) on the tenant's list inside the
// caller's transaction, for an outcome whose address has no contact.
func Suppress(ctx context.Context, q *store.Tx, tenantID, email, reason, sendID string) error {
	return addSuppression(ctx, q, tenantID, email, reason, sendID, "")
}

// addSuppression puts email on the tenant's list; an email already there
// keeps its first reason.
func addSuppression(ctx context.Context, q *store.Tx, tenantID, email, reason, sendID, note string) error {
	if reason == "" {
		reason = SuppressHardBounce
	}
	var send *string
	if sendID != "" {
		send = &sendID
	}
	_, err := q.SuppressionAdd(ctx, queries.SuppressionAddParams{TenantID: tenantID, Email: email, Reason: reason,
		SendID: send, Note: note})
	if store.IsNoRows(err) {
		return nil
	}
	return err
}

// Suppressions keeps a tenant's suppression list: by email, outliving
// contacts (a contact created later with a listed email is suppressed:
// schema 0023's trigger).
type Suppressions struct {
	DB *store.DB
}

// Add suppresses email by hand (reason manual): on the list, and its
// contact, if any, suppressed with its pending sends cancelled
// (suppressed). created is false when the email was on the list already:
// nothing changes then, and the existing entry is returned.
func (s *Suppressions) Add(ctx context.Context, tenantID, email string, note *string) (sup queries.Suppression, created bool, err error) {
	norm, ok := NormalizeEmail(email)
	var f apperr.Fields
	f.Check(ok, "email", "must be a valid email address")
	n := ""
	if note != nil {
		n = strings.TrimSpace(*note)
		f.Check(utf8.RuneCountInString(n) <= maxNoteLen, "note", "must be at most 1000 characters")
	}
	if err := f.Err(); err != nil {
		return sup, false, err
	}
	err = s.DB.InTx(ctx, func(q *store.Tx) error {
		q.AuditResource(norm)
		// The insert decides: of two concurrent adds of one email, the
		// second waits on the first's row and then finds it there, so
		// exactly one answers created.
		sup, err = q.SuppressionAdd(ctx, queries.SuppressionAddParams{TenantID: tenantID, Email: norm,
			Reason: SuppressManual, Note: n})
		if store.IsNoRows(err) {
			sup, err = q.SuppressionGet(ctx, queries.SuppressionGetParams{TenantID: tenantID, Email: norm})
			return err
		}
		if err != nil {
			return err
		}
		created = true
		c, err := q.ContactGetByEmail(ctx, queries.ContactGetByEmailParams{TenantID: tenantID, Email: norm})
		if store.IsNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = ApplyOptOut(ctx, q, OptOut{TenantID: tenantID, ContactID: c.ID, Suppress: true,
			SuppressReason: SuppressManual})
		return err
	})
	if err != nil {
		return sup, false, err // the insert, if any, was rolled back
	}
	return sup, created, err
}

// List returns a page of the list, newest first, of one reason when
// reason is not "".
func (s *Suppressions) List(ctx context.Context, tenantID, reason string, p page.Params) ([]queries.Suppression, *page.Cursor, error) {
	if reason != "" && !slices.Contains(SuppressionReasons, reason) {
		return nil, nil, apperr.Invalid("reason", "must be one of hard_bounce, complaint, manual")
	}
	return page.List(p, func(q page.Query) ([]queries.Suppression, error) {
		if reason != "" {
			return s.DB.SuppressionListByReason(ctx, queries.SuppressionListByReasonParams{TenantID: tenantID,
				Reason: reason, BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
		}
		return s.DB.SuppressionList(ctx, queries.SuppressionListParams{TenantID: tenantID,
			BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
	}, func(x queries.Suppression) page.Cursor { return page.Cursor{Time: x.CreatedAt, ID: x.Email} })
}

// Remove takes email off the list: its contact, if any, is no longer
// suppressed (it is not resubscribed: unsubscribe is the contact's own
// choice), and a suppression_removed timeline entry says so. NOT_FOUND for
// an email not on the list.
func (s *Suppressions) Remove(ctx context.Context, tenantID, email string) error {
	norm, _ := NormalizeEmail(email)
	return s.DB.InTx(ctx, func(q *store.Tx) error {
		q.AuditResource(norm)
		sup, err := q.SuppressionDelete(ctx, queries.SuppressionDeleteParams{TenantID: tenantID, Email: norm})
		if err != nil {
			return apperr.Specific(err, apperr.KindNotFound, SuppressionNotFound())
		}
		c, err := q.ContactUnsuppress(ctx, queries.ContactUnsuppressParams{TenantID: tenantID, Email: norm})
		if store.IsNoRows(err) {
			return nil // no contact has the email
		}
		if err != nil {
			return err
		}
		return events.WriteTimelineEntry(ctx, q, c.TenantID, c.ID, "suppression_removed", map[string]any{"email": norm, "reason": sup.Reason})
	})
}
