package contacts

import (
	"context"
	"time"

	"tidings/internal/events"
	"tidings/internal/metrics"
	"tidings/internal/store"
	"tidings/queries"
)

// Reasons a contact stops receiving mail; they are also the cancelReason of
// the pending sends the opt-out cancels (ADDENDUM sections 6-7).
const (
	ReasonUnsubscribed = "unsubscribed"
	ReasonSuppressed   = "suppressed"
	// ReasonContactDeleted cancels the open sends of a deleted contact.
	ReasonContactDeleted = "contact_deleted"
)

// OptOut says what happens to one contact.
type OptOut struct {
	TenantID  string
	ContactID string
	// Unsubscribe sets subscribed=false (the unsubscribe link, the
	// provider's unsubscribe event, PATCH or upsert with subscribed:false).
	Unsubscribe bool
	// Suppress sets suppressed=true (hard bounce, spam complaint, a manual
	// suppression) and puts the email on the suppression list with
	// SuppressReason (SuppressHardBounce when empty) and the send that
	// caused it (SendID, "" for none).
	Suppress       bool
	SuppressReason string
	SendID         string
	// Record, with Unsubscribe, records email.unsubscribed when the contact
	// was subscribed: the recipient's own act through the link or the
	// provider, which is a timeline entry; an API client's PATCH is not.
	Record *events.Recorder
	// Properties of the email.unsubscribed event (sendId, templateId, ...).
	Properties map[string]any
	At         time.Time
}

// ApplyOptOut is the one function that unsubscribes or suppresses a
// contact, inside the caller's transaction. It locks the contact, sets the
// flags (never the reverse), records email.unsubscribed as OptOut.Record
// says, and cancels the contact's pending sends through cancelPending. It
// is idempotent: a contact already opted out is left as it is, and its
// pending sends are cancelled again (a no-op). Callers: contacts.Store
// (PATCH and upsert with subscribed:false) and delivery's outcome applier
// (the /t/u/ page and one-click POST, the SendGrid webhook).
func ApplyOptOut(ctx context.Context, q *store.Tx, o OptOut) (queries.Contact, error) {
	c, err := q.ContactGetForUpdate(ctx, queries.ContactGetForUpdateParams{TenantID: o.TenantID, ID: o.ContactID})
	if err != nil {
		return c, notFound(err)
	}
	unsub := o.Unsubscribe && c.Subscribed
	supp := o.Suppress && !c.Suppressed
	if unsub || supp {
		if c, err = q.ContactSetOptOut(ctx, queries.ContactSetOptOutParams{TenantID: o.TenantID, ID: o.ContactID,
			Unsubscribe: unsub, Suppress: supp}); err != nil {
			return c, err
		}
	}
	if unsub && o.Record != nil {
		at := o.At
		if at.IsZero() {
			at = time.Now()
		}
		rec, err := o.Record.RecordSystem(ctx, q, events.System{TenantID: o.TenantID, ContactID: o.ContactID,
			Name: events.Unsubscribed, Properties: o.Properties, Timestamp: at})
		if err != nil {
			return c, err
		}
		c = rec.Contact
	}
	if o.Suppress {
		if err := addSuppression(ctx, q, o.TenantID, c.Email, o.SuppressReason, o.SendID, ""); err != nil {
			return c, err
		}
		if err := cancelPending(ctx, q, o.TenantID, o.ContactID, ReasonSuppressed); err != nil {
			return c, err
		}
	} else if o.Unsubscribe {
		if err := cancelPending(ctx, q, o.TenantID, o.ContactID, ReasonUnsubscribed); err != nil {
			return c, err
		}
	}
	return c, nil
}

// cancelPending cancels the contact's pending, claimed and failed
// scheduled sends with cancelReason reason and exits its active and paused
// enrolments with the same reason (ADDENDUM sections 4, 6 and 8), in the
// caller's transaction. It is two statements of the sequence engine's
// queries rather than a call into internal/sequences/engine, which imports
// this package's callers (delivery) and would close an import cycle; the
// statements also write the sequence_exited timeline entries.
//
// A claimed send is cancelled too: its worker may already be talking to
// the provider, and if the message leaves the row says sent after all
// (queries.ScheduledSendMarkSent), which is the truth.
func cancelPending(ctx context.Context, q *store.Tx, tenantID, contactID, reason string) error {
	// Enrolments first, then sends: the order the sequence worker locks
	// them in, so the two cannot deadlock.
	if err := q.EnrolmentExitByContact(ctx, queries.EnrolmentExitByContactParams{
		TenantID: tenantID, ContactID: contactID, Reason: reason}); err != nil {
		return err
	}
	cancelled, err := q.ScheduledSendCancelByContact(ctx, queries.ScheduledSendCancelByContactParams{
		TenantID: tenantID, ContactID: contactID, Reason: reason})
	if err != nil {
		return err
	}
	return metrics.CountCancelled(ctx, q, tenantID, cancelled)
}
