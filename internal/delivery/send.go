package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/domains"
	"tidings/internal/events"
	"tidings/internal/ids"
	"tidings/internal/metrics"
	"tidings/internal/provider"
	"tidings/internal/render"
	"tidings/internal/sendrate"
	"tidings/internal/store"
	"tidings/internal/telemetry"
	"tidings/internal/templates"
	"tidings/internal/tenants"
	"tidings/internal/throttle"
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
	// OnRecord, when set, runs in the transaction that writes the send's
	// record, before the provider is called (the Idempotency-Key names
	// its send there).
	OnRecord func(ctx context.Context, q *store.Tx, sendID string) error
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
	// InDoubt: the provider gave no answer; the record stays in doubt.
	InDoubt bool
	// Warnings name the variables the template reads that the send's
	// context lacks (they rendered empty); never nil for a send.
	Warnings []string
}

// Sender sends one message to one contact: the transactional send here,
// and the sequence engine's steps through the same Deliver.
type Sender struct {
	DB        *store.DB
	Templates *templates.Renderer
	Domains   *domains.Store
	// Pool is the providers of each stream with their circuits (ADDENDUM
	// 22); one provider is a pool of one (provider.PoolOf). It is the
	// Sender's only way to a provider: names in errors and records come
	// from its plan, never from a provider field that a pool leaves nil.
	Pool     *provider.Pool
	Tracking *tracking.Signer
	// BaseURL is PUBLIC_BASE_URL, the base of tracking links.
	BaseURL string
	// SandboxFrom is SANDBOX_FROM_ADDRESS, the sender of sandbox sends that
	// name none.
	SandboxFrom string
	Events      *events.Recorder
	Log         *slog.Logger
	// Rate is PROVIDER_RATE_PER_SECOND's shared bucket; nil: no limit.
	// Transactional sends take from it with priority.
	Rate *sendrate.Bucket
	// Throttle is DESTINATION_LIMITS' buckets; nil: none.
	Throttle *throttle.Throttle
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
//  7. the provider accepts it: a refusal is 502 PROVIDER_ERROR and no send
//     record; no answer is 502 PROVIDER_ERROR naming the send, whose record
//     stays in doubt (deliver, ADDENDUM section 12).
func (s *Sender) Send(ctx context.Context, tenantID string, req Request) (Result, error) {
	o, err := s.outgoingOf(ctx, tenantID, req)
	if err != nil {
		return Result{}, err
	}
	return s.deliver(ctx, o)
}

// outgoingOf runs Send's checks 0-5 and returns the message to render.
func (s *Sender) outgoingOf(ctx context.Context, tenantID string, req Request) (outgoing, error) {
	if err := req.check(); err != nil {
		return outgoing{}, err
	}
	tenant, err := s.DB.TenantGet(ctx, tenantID)
	if err != nil {
		return outgoing{}, apperr.Specific(err, apperr.KindNotFound, tenants.NotFound())
	}
	contact, err := s.DB.ContactGetByEmail(ctx, queries.ContactGetByEmailParams{TenantID: tenantID, Email: req.To})
	if err != nil {
		return outgoing{}, apperr.Specific(err, apperr.KindNotFound, contacts.NotFound())
	}
	tmpl, err := s.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: tenantID, ID: req.TemplateID})
	if err != nil {
		return outgoing{}, apperr.Specific(err, apperr.KindNotFound, templates.NotFound())
	}
	if !tmpl.Enabled {
		return outgoing{}, apperr.Invalid("template", "is disabled")
	}
	if !req.IgnoreUnsubscribe {
		if err := MayMail(contact); err != nil {
			return outgoing{}, err
		}
	}
	if err := tenants.MayReceive(tenant, contact.Email); err != nil {
		return outgoing{}, err
	}
	from, err := s.fromAddress(ctx, tenant, req.From)
	if err != nil {
		return outgoing{}, err
	}
	return outgoing{tenant: tenant, contact: contact, tmpl: tmpl, from: from.addr,
		variables: req.Variables, onRecord: req.OnRecord}, nil
}

// Step is one email step of a sequence to send (the sequence engine calls
// SendSteps after its own gates and conditions passed).
type Step struct {
	TenantID, ContactID, TemplateID     string
	SequenceID, StepID, ScheduledSendID string
	// BroadcastID is set instead of the sequence fields for a broadcast's
	// recipient.
	BroadcastID string
	// From is the sequence's `from`; "" means the tenant's default.
	From string
	// Subject, when set, is the subject line rendered instead of the
	// template's (an A/B broadcast's variant).
	Subject string
	// Topic is the message's topic id, which its unsubscribe link leaves
	// (the caller checked the contact is subscribed to it); "" for none.
	Topic string
	// Event is the event that enrolled the contact, for the render
	// context; nil for a manual enrolment.
	Event *render.Event
	// Tenant and Contact, when set, are the rows the engine read for its
	// gates a moment before; SendSteps uses them instead of reading again.
	Tenant  *queries.Tenant
	Contact *queries.Contact
	// InRecord, when set, runs in the transaction that settles the send
	// after the provider's answer (accepted or in doubt): the engine marks
	// its scheduled send sent and moves the enrolment on there, one commit
	// and no window between the settled record and the mark. If that
	// transaction keeps failing with it, the send is settled without it
	// and Result.InRecordDone is false.
	InRecord func(ctx context.Context, q *store.Tx, sendID string) error
}

// stepCache keeps, within one batch of steps, the templates and senders
// already read, so a batch reads each once.
type stepCache struct {
	mu        sync.Mutex
	templates map[[2]string]queries.Template
	froms     map[[2]string]sender
}

func newStepCache() *stepCache {
	return &stepCache{templates: map[[2]string]queries.Template{}, froms: map[[2]string]sender{}}
}

// stepOutgoing checks what the engine does not (the template exists and is
// enabled, the from address) and builds the message to send; c may be nil.
func (s *Sender) stepOutgoing(ctx context.Context, st Step, c *stepCache) (outgoing, error) {
	if st.Tenant == nil {
		t, err := s.DB.TenantGet(ctx, st.TenantID)
		if err != nil {
			return outgoing{}, apperr.Specific(err, apperr.KindNotFound, tenants.NotFound())
		}
		st.Tenant = &t
	}
	if st.Contact == nil {
		ct, err := s.DB.ContactGet(ctx, queries.ContactGetParams{TenantID: st.TenantID, ID: st.ContactID})
		if err != nil {
			return outgoing{}, apperr.Specific(err, apperr.KindNotFound, contacts.NotFound())
		}
		st.Contact = &ct
	}
	tenant, contact := *st.Tenant, *st.Contact
	tk := [2]string{st.TenantID, st.TemplateID}
	tmpl, ok := c.template(tk)
	if !ok {
		var err error
		tmpl, err = s.DB.TemplateGet(ctx, queries.TemplateGetParams{TenantID: st.TenantID, ID: st.TemplateID})
		if err != nil {
			return outgoing{}, apperr.Specific(err, apperr.KindNotFound, templates.NotFound())
		}
		c.putTemplate(tk, tmpl)
	}
	if !tmpl.Enabled {
		return outgoing{}, apperr.Invalid("template", "is disabled")
	}
	fk := [2]string{st.TenantID, st.From}
	from, ok := c.from(fk)
	if !ok {
		var err error
		if from, err = s.fromAddress(ctx, tenant, st.From); err != nil {
			return outgoing{}, err
		}
		c.putFrom(fk, from)
	}
	return outgoing{tenant: tenant, contact: contact, tmpl: tmpl, from: from.addr, warmup: from.warmup, event: st.Event,
		sequenceID: st.SequenceID, stepID: st.StepID, scheduledSendID: st.ScheduledSendID, broadcastID: st.BroadcastID,
		topic: st.Topic, inRecord: st.InRecord, subject: st.Subject}, nil
}

func (c *stepCache) template(k [2]string) (queries.Template, bool) {
	if c == nil {
		return queries.Template{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.templates[k]
	return t, ok
}

func (c *stepCache) putTemplate(k [2]string, t queries.Template) {
	if c != nil {
		c.mu.Lock()
		c.templates[k] = t
		c.mu.Unlock()
	}
}

func (c *stepCache) from(k [2]string) (sender, bool) {
	if c == nil {
		return sender{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.froms[k]
	return a, ok
}

func (c *stepCache) putFrom(k [2]string, a sender) {
	if c != nil {
		c.mu.Lock()
		c.froms[k] = a
		c.mu.Unlock()
	}
}

// CheckFrom checks a sender given for later sends (a broadcast's `from`)
// as a send checks it: an address, on a domain of the tenant that is
// verified with sending enabled. "" is always fine (the tenant's default
// or the sandbox sender then).
func (s *Sender) CheckFrom(ctx context.Context, tenantID, given string) error {
	if given == "" {
		return nil
	}
	t, err := s.DB.TenantGet(ctx, tenantID)
	if err != nil {
		return apperr.Specific(err, apperr.KindNotFound, tenants.NotFound())
	}
	_, err = s.fromAddress(ctx, t, given)
	return err
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
func (s *Sender) fromAddress(ctx context.Context, t queries.Tenant, given string) (sender, error) {
	raw := given
	if raw == "" {
		switch {
		case t.SendingStatus == tenants.Sandbox:
			return sender{addr: provider.Address{Address: s.SandboxFrom}}, nil
		case t.DefaultFromAddress != nil && *t.DefaultFromAddress != "":
			raw = *t.DefaultFromAddress
		default:
			return sender{}, apperr.Invalid("from", "is required: the tenant has no defaultFromAddress")
		}
	}
	a, err := mail.ParseAddress(raw)
	if err != nil {
		return sender{}, apperr.Invalid("from", "must be an email address, optionally with a name: Name <addr@domain>")
	}
	d, err := s.Domains.FromDomain(ctx, t.ID, a.Address)
	if err != nil {
		return sender{}, err
	}
	out := sender{addr: provider.Address{Name: a.Name, Address: a.Address}}
	if d.WarmupEnabled {
		out.warmup = d.Domain
	}
	return out, nil
}

// sender is a message's from address, and its domain when that domain is
// warming up (domains.Warmup).
type sender struct {
	addr   provider.Address
	warmup string
}

// outgoing is one message about to be rendered and handed over.
type outgoing struct {
	tenant  queries.Tenant
	contact queries.Contact
	tmpl    queries.Template
	from    provider.Address
	// warmup is the from address's domain when it is warming up.
	warmup    string
	variables map[string]any
	// event is the event that started a sequence send; nil otherwise.
	event *render.Event
	// sequenceID, stepID and scheduledSendID are set for sequence sends,
	// which also carry List-Unsubscribe.
	sequenceID, stepID, scheduledSendID string
	// broadcastID is set for a broadcast's message, which carries
	// List-Unsubscribe as sequence mail does.
	broadcastID string
	// topic is the message's topic: its unsubscribe link offers to leave
	// that topic only.
	topic string
	// inRecord is Step.InRecord; onRecord is Request.OnRecord.
	inRecord, onRecord func(ctx context.Context, q *store.Tx, sendID string) error
	// subject is Step.Subject.
	subject string
}

// deliver renders the message, writes its record, hands it to the
// provider and settles the record by the answer: the send ledger
// (docs/decisions.md "Delivery").
//
//  1. The record is committed before the provider is called (SendInsert,
//     with o.onRecord in the same transaction): the message never leaves
//     without it, and its id travels as custom_arg send_id.
//  2. The provider call is bounded by PROVIDER_TIMEOUT (the provider's).
//  3. Accepted: the record is settled (SendSettleMany: no longer in doubt, the
//     provider's message id, `sent` counted) with email.sent, and o.inRecord
//     in the same transaction. Refused, or nothing reached the provider:
//     the record is deleted and the error returned (502 for a
//     transactional send). No answer: the record is settled in doubt, as
//     sent, and never sent again; the error says so (ErrInDoubt).
func (s *Sender) deliver(ctx context.Context, o outgoing) (Result, error) {
	p, err := s.prepare(ctx, o)
	if err != nil {
		return Result{}, err
	}
	prio, stream := sendrate.Low, provider.Marketing
	if o.sequenceID == "" && o.broadcastID == "" {
		prio, stream = sendrate.High, provider.Transactional
	}
	pool := s.pool()
	plan := pool.Plan(stream)
	first := plan[0].Name()
	p.rec.Provider = &first
	out, rec, sendID := p.msg, p.rec, p.rec.ID
	if prio == sendrate.High && s.Throttle != nil {
		if err := s.Throttle.TakeFree(ctx, []string{out.To}); err != nil {
			s.Log.Warn("destination throttle not counted for a transactional send", "err", err)
		}
	}
	// The provider's rate first, so no record waits `sending` for it.
	if err := s.Rate.Wait(ctx, prio); err != nil {
		return Result{}, providerError(&provider.Error{Provider: first, Transient: true, Err: err})
	}
	p.rec.SentAt = s.now() // its turn to leave, after the rate wait
	rec.SentAt = p.rec.SentAt
	// The record is not yet the write: the request's audit entry waits for
	// the provider's acceptance and goes with the settling transaction.
	if err := s.recordFirst(store.WithoutAudit(ctx), p, o.onRecord); err != nil {
		var capped *CappedError
		if errors.Is(err, ErrWithdrawn) || errors.As(err, &capped) ||
			!s.committedAnyway(ctx, err, []string{rec.TenantID}, []string{sendID})[sendID] {
			return Result{}, err
		}
	}

	name, messageID, perr := pool.Send(ctx, stream, plan, out, s.moveTo(rec.TenantID, sendID))
	s.backoff(perr)
	telemetry.Send(name, o.sequenceID != "", perr, provider.IsTemporary(perr))
	// From here the answer is decided: it is written even if the request or
	// task has been abandoned meanwhile.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if perr != nil && !provider.IsInDoubt(perr) {
		if err := s.retryWrite(sctx, "deleting a refused send's record", func() error {
			_, err := s.DB.SendDelete(sctx, queries.SendDeleteParams{TenantID: rec.TenantID, ID: sendID})
			return err
		}); err != nil {
			// The record stays `sending`; the ledger sweep settles it in
			// doubt, which overstates but never resends.
			s.Log.Error("refused send's record not deleted", "err", err, "tenant_id", rec.TenantID, "send_id", sendID)
		}
		return Result{}, providerError(perr)
	}
	inDoubt := perr != nil
	if inDoubt {
		// Answered as an error (502): a failed write leaves no audit entry.
		sctx = store.WithoutAudit(sctx)
	}
	res := Result{SendID: sendID, MessageID: messageID, InDoubt: inDoubt, Warnings: p.warnings}
	res.InRecordDone, err = s.settle(sctx, rec.TenantID, sendID, messageID, inDoubt, o.inRecord)
	if err != nil {
		// The provider has the message and its record exists: answering an
		// error would make a client send it again. The record stays
		// `sending` until the ledger sweep (or the step's next claim)
		// settles it in doubt.
		s.Log.Error("send handed to the provider but not settled", "err", err,
			"tenant_id", rec.TenantID, "send_id", sendID, "message_id", messageID)
	}
	if inDoubt {
		s.Log.Warn("provider gave no answer: send in doubt, not retried", "tenant_id", rec.TenantID,
			"send_id", sendID, "err", perr)
		return res, inDoubtError(sendID, perr)
	}
	return res, nil
}

// pool is the Sender's pool.
func (s *Sender) pool() *provider.Pool { return s.Pool }

// moveTo is the pool's failover hook for one record: it names the next
// provider on the record before the message is handed to it.
func (s *Sender) moveTo(tenantID, sendID string) func(context.Context, string) error {
	return func(ctx context.Context, name string) error {
		_, err := s.DB.SendSetProvider(ctx, queries.SendSetProviderParams{TenantID: tenantID, ID: sendID, Provider: &name})
		return err
	}
}

// backoff holds the shared rate bucket when the provider said it is over
// its rate (HTTP 429), for as long as it asked.
func (s *Sender) backoff(err error) {
	var pe *provider.Error
	if s.Rate == nil || !errors.As(err, &pe) || pe.Status != http.StatusTooManyRequests {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.Rate.Backoff(ctx, pe.RetryAfter); err != nil {
		s.Log.Warn("provider rate backoff not set", "err", err)
	}
}

// prepared is a message ready to leave and its record.
type prepared struct {
	msg provider.Message
	rec queries.SendInsertParams
	// capped says the tenant's frequency cap judges the message (a
	// sequence or broadcast message of a tenant with a cap), with the rows
	// it needs.
	capped capped
	capOn  bool
	// warnings are the template's (templates.Rendered.Warnings).
	warnings []string
	// warmup is the sending domain warming up (a sequence or broadcast
	// message from it), loc the tenant's zone whose day it counts by.
	warmup string
	loc    *time.Location
}

// prepare renders o for its recipient (tracking links, List-Unsubscribe on
// sequence mail) under a new send id, and builds the record it will have.
func (s *Sender) prepare(ctx context.Context, o outgoing) (prepared, error) {
	sendID := ids.New(ids.Send)
	tids := tracking.IDs{TenantID: o.tenant.ID, SendID: sendID, ContactID: o.contact.ID, Topic: o.topic}
	unsubToken, err := s.Tracking.UnsubscribeToken(tids)
	if err != nil {
		return prepared{}, err
	}
	unsubURL := tracking.UnsubscribeURL(s.BaseURL, unsubToken)
	recipient, err := RecipientOf(o.contact)
	if err != nil {
		return prepared{}, err
	}
	msg, err := s.Templates.RenderCurrentSubject(ctx, o.tenant.ID, o.tmpl, o.subject, render.Context{
		Variables: o.variables, Event: o.event, UnsubscribeURL: unsubURL, Contact: recipient,
	})
	if err != nil {
		return prepared{}, err
	}
	if strings.TrimSpace(msg.Subject) == "" {
		return prepared{}, apperr.Invalid("subject", "the template's subject renders empty with these variables")
	}
	html, err := tracking.Rewrite(msg.HTML, s.BaseURL, s.Tracking, tids)
	if err != nil {
		return prepared{}, fmt.Errorf("tracking links: %w", err)
	}
	out := provider.Message{SendID: sendID, TenantID: o.tenant.ID, From: o.from, To: o.contact.Email,
		Subject: msg.Subject, HTML: html, Text: msg.Text}
	if o.sequenceID != "" || o.broadcastID != "" {
		for name, v := range tracking.ListUnsubscribeHeaders(unsubURL) {
			out.Headers = append(out.Headers, provider.Header{Name: name, Value: v})
		}
	}
	rec := queries.SendInsertParams{TenantID: o.tenant.ID, ID: sendID,
		ContactID: o.contact.ID, TemplateID: o.tmpl.ID, TemplateVersion: o.tmpl.CurrentVersion,
		SequenceID: opt(o.sequenceID), StepID: opt(o.stepID), ScheduledSendID: opt(o.scheduledSendID),
		BroadcastID: opt(o.broadcastID), FromAddress: fromHeader(o.from), ToAddress: o.contact.Email, Subject: msg.Subject, SentAt: s.now(),
		Locale: msg.Locale}
	p := prepared{msg: out, rec: rec, warnings: msg.Warnings}
	if o.sequenceID != "" || o.broadcastID != "" {
		if tenants.CapOf(o.tenant) != nil {
			p.capOn, p.capped = true, capped{tenant: o.tenant, contact: o.contact}
		}
		if o.warmup != "" {
			p.warmup, p.loc = o.warmup, tenantZone(o.tenant)
		}
	}
	return p, nil
}

// settleTimeout bounds the writes after the provider's answer.
const settleTimeout = 15 * time.Second

// fromHeader is the from address as stored: "Name <addr>" with a display
// name, the bare address without one.
func fromHeader(a provider.Address) string {
	if a.Name == "" {
		return a.Address
	}
	return (&mail.Address{Name: a.Name, Address: a.Address}).String()
}

// recordFirst commits the send's record before the provider is called,
// with then (an Idempotency-Key's link to the send) in its transaction.
func (s *Sender) recordFirst(ctx context.Context, p prepared, then func(context.Context, *store.Tx, string) error) error {
	rec := p.rec
	if then == nil && !p.capOn {
		_, err := s.DB.SendInsert(ctx, rec)
		return withdrawn(rec, err)
	}
	return s.DB.InTx(ctx, func(q *store.Tx) error {
		if p.capOn {
			over, err := applyCap(ctx, q, s.now(), []capped{p.capped})
			if err != nil {
				return err
			}
			if until, ok := over[0]; ok {
				return &CappedError{Until: until}
			}
		}
		if _, err := q.SendInsert(ctx, rec); err != nil {
			return withdrawn(rec, err)
		}
		if then == nil {
			return nil
		}
		return then(ctx, q, rec.ID)
	})
}

// withdrawn says what SendInsert's no row means: a step whose scheduled
// send is no longer claimed (cancelled before its record) gets none, and
// its message does not leave (ErrWithdrawn).
func withdrawn(rec queries.SendInsertParams, err error) error {
	if rec.ScheduledSendID != nil && store.IsNoRows(err) {
		return ErrWithdrawn
	}
	return err
}

// settle ends the record's `sending` (accepted, or in doubt) with its
// email.sent event and the contact's totalSends, in one transaction that
// also runs then (Step.InRecord): settleMany for one send. It reports
// whether then ran and committed.
func (s *Sender) settle(ctx context.Context, tenantID, sendID, messageID string, inDoubt bool,
	then func(context.Context, *store.Tx, string) error) (bool, error) {
	var thenMany func(context.Context, *store.Tx, []Settled) error
	if then != nil {
		thenMany = func(ctx context.Context, q *store.Tx, _ []Settled) error { return then(ctx, q, sendID) }
	}
	return s.settleMany(ctx, []settleRow{{TenantID: tenantID, ID: sendID, MessageID: messageID, InDoubt: inDoubt}},
		[]Settled{{SendID: sendID, InDoubt: inDoubt}}, thenMany)
}

// SettleInDoubt settles a record still `sending` whose attempt ended
// without the provider's answer being written (its process died): it
// stays, in doubt, as sent, and then runs in the settling transaction (the
// engine marks the step sent). A record settled already is left as it is,
// and then still runs.
func (s *Sender) SettleInDoubt(ctx context.Context, tenantID, sendID string, then func(context.Context, *store.Tx, string) error) error {
	done, err := s.settle(ctx, tenantID, sendID, "", true, then)
	if err == nil && then != nil && !done {
		err = fmt.Errorf("send %s settled, but what follows it did not commit", sendID)
	}
	return err
}

// SweepSending settles in doubt the records still `sending` that were
// written before before (their process died waiting for the provider's
// answer); it returns how many it settled. A sequence step's record is
// its scheduled send's next claim's to settle while the row is open; one
// whose row is finished (it can no longer be claimed) is settled here, and
// the row marked sent with it: the record says the message may have left,
// and in doubt counts as sent (ADDENDUM 12), so no record stays `sending`
// and no row contradicts its record.
func (s *Sender) SweepSending(ctx context.Context, before time.Time) (int, error) {
	rows, err := s.DB.SendListSending(ctx, queries.SendListSendingParams{Before: before, Lim: sweepSendingPage})
	if err != nil {
		return 0, err
	}
	for i, r := range rows {
		var then func(context.Context, *store.Tx, string) error
		if r.ScheduledSendID != nil {
			then = func(ctx context.Context, q *store.Tx, sendID string) error {
				return markStepSent(ctx, q, r.TenantID, *r.ScheduledSendID, sendID)
			}
		}
		if err := s.SettleInDoubt(ctx, r.TenantID, r.ID, then); err != nil {
			return i, err
		}
		s.Log.Warn("send settled in doubt: its process stopped before the provider answered",
			"tenant_id", r.TenantID, "send_id", r.ID)
	}
	return len(rows), nil
}

const sweepSendingPage = 1000

// markStepSent marks a finished scheduled send sent with its record (the
// sweep's mark: its enrolment ended or the step was given up, so nothing
// moves on), and takes back a cancellation the metrics counted.
func markStepSent(ctx context.Context, q *store.Tx, tenantID, scheduledSendID, sendID string) error {
	was, err := q.ScheduledSendMarkSent(ctx, queries.ScheduledSendMarkSentParams{TenantID: tenantID,
		ID: scheduledSendID, SendID: &sendID})
	if err != nil || len(was) == 0 || was[0].WasStatus != "cancelled" || was[0].WasFinishedAt == nil {
		return err
	}
	row, err := q.ScheduledSendGetByID(ctx, queries.ScheduledSendGetByIDParams{TenantID: tenantID, ID: scheduledSendID})
	if err != nil {
		return err
	}
	un := metrics.Cancelled(tenantID, row.SequenceID, row.TemplateID, *was[0].WasFinishedAt)
	un.Cancelled = -1
	return metrics.Count(ctx, q, un)
}

// Answer is what POST /api/send answers for a send already recorded (the
// repeat of a request that died after recording it): the result when the
// provider accepted it, the in-doubt error while it is (or stays) in doubt,
// and NotFound when the record is gone (the provider refused it: nothing
// was sent).
func (s *Sender) Answer(ctx context.Context, tenantID, sendID string) (Result, error) {
	r, err := s.DB.SendGet(ctx, queries.SendGetParams{TenantID: tenantID, ID: sendID})
	if err != nil {
		return Result{}, err
	}
	if r.InDoubt {
		return Result{SendID: r.ID, InDoubt: true}, inDoubtError(r.ID, ErrInDoubt)
	}
	return Result{SendID: r.ID, MessageID: r.MessageID}, nil
}

// ErrInDoubt marks a send the provider may or may not have taken: the
// request was written but no answer came. Its record stays, in doubt, and
// it is never sent again automatically.
var ErrInDoubt = errors.New("the email provider gave no answer: the message may have been sent")

// IsInDoubt reports whether err is a send in doubt (ErrInDoubt).
func IsInDoubt(err error) bool { return errors.Is(err, ErrInDoubt) }

// inDoubtError is the 502 PROVIDER_ERROR of a transactional send in doubt,
// naming the send (ADDENDUM section 12).
func inDoubtError(sendID string, cause error) error {
	e := apperr.Upstream("PROVIDER_ERROR", "the email provider gave no answer in time: the message may have "+
		"been sent; its record "+sendID+" stays in doubt and it is not sent again", errors.Join(ErrInDoubt, cause))
	e.Details = map[string]any{"sendId": sendID, "inDoubt": true}
	return e
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
