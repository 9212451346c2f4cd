package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/domains"
	"tidings/internal/events"
	"tidings/internal/ids"
	"tidings/internal/metrics"
	"tidings/internal/provider"
	"tidings/internal/render"
	"tidings/internal/store"
	"tidings/internal/telemetry"
	"tidings/internal/templates"
	"tidings/internal/tenants"
	"tidings/internal/tracking"
	"tidings/queries"
)

// Request is a validated transactional send (POST /api/send).
type Request struct {
	// To is the recipient's address in stored form (trimmed, lower-cased).
	To string
	// TemplateID names the template; its current version is sent.
	TemplateID string
	// From is the sender as given ("Name <addr>" or "addr"); "" means the
	// tenant's default (the sandbox sender in sandbox).
	From              string
	Variables         map[string]any
	IgnoreUnsubscribe bool
}

// MaxFromLength bounds Request.From, in bytes: the longest address SMTP
// allows (RFC 5321: 64 for the local part, @, 255 for the domain).
const MaxFromLength = 320

// check judges the request's own fields, before anything is looked up.
func (r Request) check() error {
	if len(r.From) > MaxFromLength {
		return apperr.Invalid("from", "must be at most 320 characters")
	}
	return nil
}

// Result is what the caller learns of an accepted send.
type Result struct {
	SendID    string
	MessageID string
	// InRecordDone says Step.InRecord ran and committed with the send
	// record.
	InRecordDone bool
}

// Sender sends one message to one contact: the transactional send here,
// and the sequence engine's steps through the same Deliver.
type Sender struct {
	DB        *store.DB
	Templates *templates.Renderer
	Domains   *domains.Store
	Provider  provider.Provider
	Tracking  *tracking.Signer
	// BaseURL is PUBLIC_BASE_URL, the base of tracking links.
	BaseURL string
	// SandboxFrom is SANDBOX_FROM_ADDRESS, the sender of sandbox sends that
	// name none.
	SandboxFrom string
	Events      *events.Recorder
	Log         *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (s *Sender) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Send performs a transactional send. The checks run in this order, so a
// request with several faults always gets the same answer (docs/decisions.md):
//
//  0. the request's own fields: from at most MaxFromLength (VALIDATION_ERROR);
//  1. the contact exists (CONTACT_NOT_FOUND);
//  2. the template exists (TEMPLATE_NOT_FOUND) and is enabled (VALIDATION_ERROR);
//  3. the contact is subscribed and not suppressed, unless ignoreUnsubscribe
//     (VALIDATION_ERROR);
//  4. the tenant may send to the recipient: not paused, and whitelisted while
//     in sandbox (FORBIDDEN);
//  5. the from address: its domain added (DOMAIN_NOT_FOUND), verified
//     (DOMAIN_NOT_VERIFIED) and enabled for sending (FORBIDDEN);
//  6. the template renders within its budgets (VALIDATION_ERROR);
//  7. the provider accepts it (502 PROVIDER_ERROR, and no send record).
func (s *Sender) Send(ctx context.Context, tenantID string, req Request) (Result, error) {
	if err := req.check(); err != nil {
		return Result{}, err
	}
	tenant, err := s.DB.TenantGet(ctx, tenantID)
	if err != nil {
		return Result{}, apperr.Specific(err, apperr.KindNotFound, tenants.NotFound())
	}
	contact, err := s.DB.ContactGetByEmail(ctx, queries.ContactGetByEmailParams{TenantID: tenantID, Email: req.To})
	if err != nil {
		return Result{}, apperr.Specific(err, apperr.KindNotFound, contacts.NotFound())
	}
	tmpl, err := s.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: tenantID, ID: req.TemplateID})
	if err != nil {
		return Result{}, apperr.Specific(err, apperr.KindNotFound, templates.NotFound())
	}
	if !tmpl.Enabled {
		return Result{}, apperr.Invalid("template", "is disabled")
	}
	if !req.IgnoreUnsubscribe {
		if err := MayMail(contact); err != nil {
			return Result{}, err
		}
	}
	if err := tenants.MayReceive(tenant, contact.Email); err != nil {
		return Result{}, err
	}
	from, err := s.fromAddress(ctx, tenant, req.From)
	if err != nil {
		return Result{}, err
	}
	return s.deliver(ctx, outgoing{tenant: tenant, contact: contact, tmpl: tmpl, from: from,
		variables: req.Variables})
}

// Step is one email step of a sequence to send (the sequence engine calls
// SendStep after its own gates and conditions passed).
type Step struct {
	TenantID, ContactID, TemplateID     string
	SequenceID, StepID, ScheduledSendID string
	// From is the sequence's `from`; "" means the tenant's default.
	From string
	// Event is the event that enrolled the contact, for the render
	// context; nil for a manual enrolment.
	Event *render.Event
	// Tenant and Contact, when set, are the rows the engine read for its
	// gates a moment before; SendStep uses them instead of reading again.
	Tenant  *queries.Tenant
	Contact *queries.Contact
	// InRecord, when set, runs in the transaction that records the send:
	// the engine marks its scheduled send sent and moves the enrolment on
	// there, one commit instead of two and no window between the record
	// and the mark. If the transaction fails with it, the send is recorded
	// without it (the message has left; its record comes first) and
	// Result.InRecordDone is false.
	InRecord func(ctx context.Context, q *queries.Queries, sendID string) error
}

// SendStep sends a sequence step: the template's current version rendered
// for the contact, with List-Unsubscribe, recorded with its sequence, step
// and scheduled send. It checks what the engine does not: the template
// exists and is enabled, and the from address. A failure it returns is
// final unless provider.IsTemporary says the provider may take it later.
func (s *Sender) SendStep(ctx context.Context, st Step) (Result, error) {
	if st.Tenant == nil {
		t, err := s.DB.TenantGet(ctx, st.TenantID)
		if err != nil {
			return Result{}, apperr.Specific(err, apperr.KindNotFound, tenants.NotFound())
		}
		st.Tenant = &t
	}
	if st.Contact == nil {
		c, err := s.DB.ContactGet(ctx, queries.ContactGetParams{TenantID: st.TenantID, ID: st.ContactID})
		if err != nil {
			return Result{}, apperr.Specific(err, apperr.KindNotFound, contacts.NotFound())
		}
		st.Contact = &c
	}
	tenant, contact := *st.Tenant, *st.Contact
	tmpl, err := s.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: st.TenantID, ID: st.TemplateID})
	if err != nil {
		return Result{}, apperr.Specific(err, apperr.KindNotFound, templates.NotFound())
	}
	if !tmpl.Enabled {
		return Result{}, apperr.Invalid("template", "is disabled")
	}
	from, err := s.fromAddress(ctx, tenant, st.From)
	if err != nil {
		return Result{}, err
	}
	return s.deliver(ctx, outgoing{tenant: tenant, contact: contact, tmpl: tmpl, from: from, event: st.Event,
		sequenceID: st.SequenceID, stepID: st.StepID, scheduledSendID: st.ScheduledSendID, inRecord: st.InRecord})
}

// MayMail is the contact's own gate: it is subscribed and not suppressed.
func MayMail(c queries.Contact) error {
	if c.Suppressed {
		return apperr.Invalid("to", "the contact is suppressed (bounced or complained); set ignoreUnsubscribe to send anyway")
	}
	if !c.Subscribed {
		return apperr.Invalid("to", "the contact is unsubscribed; set ignoreUnsubscribe to send anyway")
	}
	return nil
}

// fromAddress resolves the sender: the one given, else the sandbox sender in
// sandbox, else the tenant's defaultFromAddress. A sender outside the sandbox
// must be on a verified domain with sending enabled.
func (s *Sender) fromAddress(ctx context.Context, t queries.Tenant, given string) (provider.Address, error) {
	raw := given
	if raw == "" {
		switch {
		case t.SendingStatus == tenants.Sandbox:
			return provider.Address{Address: s.SandboxFrom}, nil
		case t.DefaultFromAddress != nil && *t.DefaultFromAddress != "":
			raw = *t.DefaultFromAddress
		default:
			return provider.Address{}, apperr.Invalid("from", "is required: the tenant has no defaultFromAddress")
		}
	}
	a, err := mail.ParseAddress(raw)
	if err != nil {
		return provider.Address{}, apperr.Invalid("from", "must be an email address, optionally with a name: Name <addr@domain>")
	}
	if err := s.Domains.CheckFrom(ctx, t.ID, a.Address); err != nil {
		return provider.Address{}, err
	}
	return provider.Address{Name: a.Name, Address: a.Address}, nil
}

// outgoing is one message about to be rendered and handed over.
type outgoing struct {
	tenant    queries.Tenant
	contact   queries.Contact
	tmpl      queries.Template
	from      provider.Address
	variables map[string]any
	// event is the event that started a sequence send; nil otherwise.
	event *render.Event
	// sequenceID, stepID and scheduledSendID are set for sequence sends,
	// which also carry List-Unsubscribe.
	sequenceID, stepID, scheduledSendID string
	// inRecord is Step.InRecord.
	inRecord func(ctx context.Context, q *queries.Queries, sendID string) error
}

// deliver renders, hands the message to the provider, and records the send
// with its email.sent event.
func (s *Sender) deliver(ctx context.Context, o outgoing) (Result, error) {
	sendID := ids.New(ids.Send)
	tids := tracking.IDs{TenantID: o.tenant.ID, SendID: sendID, ContactID: o.contact.ID}
	unsubToken, err := s.Tracking.UnsubscribeToken(tids)
	if err != nil {
		return Result{}, err
	}
	unsubURL := tracking.UnsubscribeURL(s.BaseURL, unsubToken)
	recipient, err := RecipientOf(o.contact)
	if err != nil {
		return Result{}, err
	}
	msg, err := s.Templates.RenderCurrent(ctx, o.tenant.ID, o.tmpl, render.Context{
		Variables: o.variables, Event: o.event, UnsubscribeURL: unsubURL, Contact: recipient,
	})
	if err != nil {
		return Result{}, err
	}
	if strings.TrimSpace(msg.Subject) == "" {
		return Result{}, apperr.Invalid("subject", "the template's subject renders empty with these variables")
	}
	html, err := tracking.Rewrite(msg.HTML, s.BaseURL, s.Tracking, tids)
	if err != nil {
		return Result{}, fmt.Errorf("tracking links: %w", err)
	}
	out := provider.Message{SendID: sendID, TenantID: o.tenant.ID, From: o.from, To: o.contact.Email,
		Subject: msg.Subject, HTML: html, Text: msg.Text}
	if o.sequenceID != "" {
		for name, v := range tracking.ListUnsubscribeHeaders(unsubURL) {
			out.Headers = append(out.Headers, provider.Header{Name: name, Value: v})
		}
	}
	messageID, err := s.Provider.Send(ctx, out)
	telemetry.Send(s.Provider.Name(), o.sequenceID != "", err, provider.IsTemporary(err))
	if err != nil {
		return Result{}, providerError(err)
	}
	sentAt := s.now()
	rec := queries.SendInsertParams{TenantID: o.tenant.ID, ID: sendID, MessageID: messageID,
		ContactID: o.contact.ID, TemplateID: o.tmpl.ID, TemplateVersion: o.tmpl.CurrentVersion,
		SequenceID: opt(o.sequenceID), StepID: opt(o.stepID), ScheduledSendID: opt(o.scheduledSendID),
		FromAddress: (&mail.Address{Name: o.from.Name, Address: o.from.Address}).String(), ToAddress: o.contact.Email, Subject: msg.Subject, SentAt: sentAt}
	// The message is gone: record it even if the request has been
	// abandoned meanwhile, or a retry would send it twice.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	res := Result{SendID: sendID, MessageID: messageID}
	err = s.record(rctx, rec, o.inRecord)
	if err == nil {
		res.InRecordDone = o.inRecord != nil
		return res, nil
	}
	if o.inRecord != nil {
		s.Log.Warn("recording a send with its step failed; recording the send alone", "err", err,
			"tenant_id", o.tenant.ID, "send_id", sendID)
		err = s.record(rctx, rec, nil)
	}
	if err != nil {
		// The provider accepted the message; answering an error would make
		// the client send it again. Say so loudly instead.
		s.Log.Error("send accepted by the provider but not recorded", "err", err,
			"tenant_id", o.tenant.ID, "send_id", sendID, "message_id", messageID)
	}
	return res, nil
}

// record stores the send and its email.sent event in one transaction, and
// runs then (Step.InRecord) in it when set.
func (s *Sender) record(ctx context.Context, rec queries.SendInsertParams, then func(context.Context, *queries.Queries, string) error) error {
	return s.DB.Tx(ctx, func(q *queries.Queries) error {
		// The insert also counts the send in the metrics (queries/sends.sql).
		rec.Count = metrics.Enabled()
		if _, err := q.SendInsert(ctx, rec); err != nil {
			return err
		}
		props := map[string]any{"sendId": rec.ID, "templateId": rec.TemplateID}
		if rec.SequenceID != nil {
			props["sequenceId"] = *rec.SequenceID
			props["stepId"] = *rec.StepID
		}
		if _, err := s.Events.RecordSystem(ctx, q, events.System{TenantID: rec.TenantID, ContactID: rec.ContactID,
			Name: events.Sent, Properties: props, Timestamp: rec.SentAt, Sends: 1}); err != nil {
			return err
		}
		if then == nil {
			return nil
		}
		return then(ctx, q, rec.ID)
	})
}

// providerError turns a provider failure into the 502 of ADDENDUM section 8.
// A message the provider's own checks refused is our fault, not the
// provider's: it is logged as such and still answers 502 rather than
// blaming the client for input it could not have known to avoid.
func providerError(err error) error {
	msg := "the email provider did not accept the message"
	var pe *provider.Error
	if errors.As(err, &pe) && pe.Message != "" {
		msg += ": " + pe.Message
	}
	return apperr.Upstream("PROVIDER_ERROR", msg, err)
}

// RecipientOf is a stored contact as the render context sees it; a dry
// run's preview and a send build it the same way.
func RecipientOf(c queries.Contact) (*render.Contact, error) {
	var props map[string]any
	if err := json.Unmarshal(c.Properties, &props); err != nil {
		return nil, fmt.Errorf("contact %s properties: %w", c.ID, err)
	}
	userID := ""
	if c.UserID != nil {
		userID = *c.UserID
	}
	return &render.Contact{ContactID: c.ID, Email: c.Email, UserID: userID,
		Subscribed: c.Subscribed, Properties: props}, nil
}

// EventOf is a stored event (the one that enrolled a contact) as the
// render context's `event`.
func EventOf(e queries.EnrolmentTriggerEventRow) *render.Event {
	var props map[string]any
	_ = json.Unmarshal(e.Properties, &props) // stored by events.Record: valid JSON
	return &render.Event{Name: e.Name, Properties: props, Timestamp: e.OccurredAt}
}
