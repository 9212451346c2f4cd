package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"net/mail"
	"slices"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/events"
	"tidings/internal/metrics"
	"tidings/internal/sendgridevents"
	"tidings/internal/store"
	"tidings/internal/telemetry"
	"tidings/internal/tenants"
	"tidings/queries"
)

// Outcome is one thing that became of a send: a provider event or a
// tracking hit. Its kind is a sendgridevents.Outcome whatever its source,
// so both sources obey one precedence.
type Outcome struct {
	TenantID string
	SendID   string
	Kind     sendgridevents.Outcome
	// At is when it happened; zero means now.
	At time.Time
	// URL is the clicked link (Clicked).
	URL string
	// Reason is the provider's text of a bounce or drop, kept on the event.
	Reason string
	// ContactID, when set, must be the send's contact (an unsubscribe
	// token names both): a mismatch is treated as an unknown send.
	ContactID string
	// Email is the recipient as the provider reported it: the contact a
	// bounce, complaint or unsubscribe falls back to when the send's
	// record is gone (Webhooks.Unpark).
	Email string
	// Method and UserAgent are our own pixel's or redirect's request (set
	// only for those hits): Machine classifies them. Machine, for a
	// provider's event, is the provider's own flag (sg_machine_open).
	Method, UserAgent string
	Machine           bool
	// Provider is the provider whose webhook reported the outcome (""
	// for our own tracking hits). A provider can only report on mail it
	// carried: when the send's record names another provider, the outcome
	// is not applied (Counts.OtherProvider). A record without a provider
	// (written before pools) takes any.
	Provider string
}

// Counts says what applying a set of outcomes did.
type Counts struct {
	// Applied outcomes found their send (whether or not they changed it).
	Applied int
	// Dropped outcomes named a tenant or send that does not exist.
	Dropped int
	// Missing are the dropped outcomes themselves, for a caller that parks
	// them until the record appears.
	Missing []Outcome
	// OtherProvider outcomes found their send, but its record names
	// another provider than the one that reported them: not applied.
	OtherProvider int
}

// Outcomes applies outcomes to sends: one set of rules for the webhook and
// for tracking (docs/architecture.md "Who owns which rule").
type Outcomes struct {
	DB     *store.DB
	Events *events.Recorder
	// Guard, when set, pauses a tenant whose hard bounces or complaints
	// pass its rates (ADDENDUM 17).
	Guard *tenants.Guard
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (a *Outcomes) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// UnknownSend is ApplyOutcome's answer for a tenant or send that does not
// exist (or a contact that is not the send's): a plain NOT_FOUND, since a
// tracking page should not tell what is missing.
func UnknownSend() *apperr.Error { return apperr.NotFound("NOT_FOUND", "send") }

// Record applies one outcome in its own transaction (a tracking hit).
func (a *Outcomes) Record(ctx context.Context, o Outcome) error {
	return a.DB.InTx(ctx, func(q *store.Tx) error { return a.ApplyOutcome(ctx, q, o) })
}

// Recipient is what the unsubscribe page says of the token's message.
type Recipient struct {
	Subscribed bool
	// Email is the contact's address; Sender who the message came from:
	// the send's sender (its display name, else its address), else the
	// tenant's name.
	Email, Sender string
	// Topics are the contact's own topic choices (the preference page).
	Topics json.RawMessage
}

// Recipient reads the contact of an unsubscribe token; UnknownSend when
// the contact (or tenant) is gone, or the send's record exists and is
// another contact's. A token whose send has no record (ADDENDUM 12:
// opt-outs never depend on a record's timing) still names its contact, and
// the signed token is the capability.
func (a *Outcomes) Recipient(ctx context.Context, tenantID, sendID, contactID string) (Recipient, error) {
	var r Recipient
	s, err := a.DB.SendGet(ctx, queries.SendGetParams{TenantID: tenantID, ID: sendID})
	switch {
	case apperr.IsKind(err, apperr.KindNotFound):
		if t, err := a.DB.TenantGet(ctx, tenantID); err == nil {
			r.Sender = t.Name
		}
	case err != nil:
		return r, err
	case s.ContactID != contactID:
		return r, UnknownSend()
	default:
		r.Sender = s.FromAddress
		if from, err := mail.ParseAddress(s.FromAddress); err == nil {
			r.Sender = cmp.Or(from.Name, from.Address)
		}
	}
	c, err := a.DB.ContactGet(ctx, queries.ContactGetParams{TenantID: tenantID, ID: contactID})
	if err != nil {
		return r, apperr.Specific(err, apperr.KindNotFound, UnknownSend())
	}
	r.Subscribed, r.Email, r.Topics = c.Subscribed, c.Email, c.Topics
	return r, nil
}

// ApplyOutcome applies one outcome inside the caller's transaction; an
// unknown send is UnknownSend. An unsubscribe naming its contact (the
// signed one-click token) unsubscribes that contact even when the send has
// no record (ADDENDUM section 12).
func (a *Outcomes) ApplyOutcome(ctx context.Context, q *store.Tx, o Outcome) error {
	n, err := a.Apply(ctx, q, []Outcome{o})
	if err != nil || n.Dropped == 0 {
		return err
	}
	if o.Kind == sendgridevents.Unsubscribed && o.ContactID != "" {
		if _, err := a.DB.SendGet(ctx, queries.SendGetParams{TenantID: o.TenantID, ID: o.SendID}); !apperr.IsKind(err, apperr.KindNotFound) {
			return UnknownSend() // the record exists: another contact's
		}
		_, err := contacts.ApplyOptOut(ctx, q, a.optOut(o, o.ContactID))
		return apperr.Specific(err, apperr.KindNotFound, UnknownSend())
	}
	return UnknownSend()
}

// fallBack applies an outcome whose send has no record to the contact
// with its address: a hard bounce or complaint suppresses it, an
// unsubscribe unsubscribes it (ADDENDUM 12). It reports false for any
// other outcome, and when the tenant has no such contact.
func (a *Outcomes) fallBack(ctx context.Context, q *store.Tx, o Outcome) (bool, error) {
	switch o.Kind {
	case sendgridevents.BouncedHard, sendgridevents.Complained, sendgridevents.Unsubscribed:
	default:
		return false, nil
	}
	email, ok := contacts.NormalizeEmail(o.Email)
	if !ok {
		return false, nil
	}
	c, err := q.ContactGetByEmail(ctx, queries.ContactGetByEmailParams{TenantID: o.TenantID, Email: email})
	if apperr.IsKind(err, apperr.KindNotFound) {
		// No contact: the address still goes on the suppression list, so
		// a contact created with it later is suppressed.
		if reason := suppressReason(o.Kind); reason != "" {
			return false, contacts.Suppress(ctx, q, o.TenantID, email, reason, o.SendID)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := contacts.ApplyOptOut(ctx, q, a.optOut(o, c.ID)); err != nil {
		return false, err
	}
	return true, nil
}

// optOut is what an unsubscribe, hard bounce or complaint does to the
// contact it reached, whose send has no record.
func (a *Outcomes) optOut(o Outcome, contactID string) contacts.OptOut {
	oo := contacts.OptOut{TenantID: o.TenantID, ContactID: contactID}
	switch o.Kind {
	case sendgridevents.Unsubscribed:
		oo.Unsubscribe, oo.Record, oo.At = true, a.Events, o.At
		oo.Properties = map[string]any{"sendId": o.SendID}
	case sendgridevents.BouncedHard, sendgridevents.Complained:
		oo.Suppress, oo.SuppressReason, oo.SendID = true, suppressReason(o.Kind), o.SendID
	}
	return oo
}

// suppressReason is the suppression list's reason of an outcome, "" for
// one that does not suppress.
func suppressReason(k sendgridevents.Outcome) string {
	switch k {
	case sendgridevents.BouncedHard:
		return contacts.SuppressHardBounce
	case sendgridevents.Complained:
		return contacts.SuppressComplaint
	}
	return ""
}

// Apply applies outcomes inside the caller's transaction in a fixed number
// of statements, however many there are (the webhook applies up to a
// thousand at once):
//
//  1. lock the sends, in key order (SendLockMany); outcomes of sends that
//     are not there are dropped;
//  2. fold each send's outcomes, oldest first, through step: the status
//     moves by sendgridevents.Apply precedence, first-open and first-click
//     times are the earliest seen, counts grow with every open and click;
//  3. lock the contacts concerned, in key order, when there are several;
//  4. write the changed sends (SendUpdateOutcomes);
//  5. record the system events with the contacts' derived counters
//     (events.RecordSystemMany): totalOpens and totalClicks grow only with
//     a send's first open or click (ADDENDUM 4);
//  6. unsubscribe or suppress contacts (contacts.ApplyOptOut): hard bounce
//     and complaint suppress, an unsubscribe unsubscribes and records
//     email.unsubscribed.
//
// Applying an outcome twice changes the status and first times nothing,
// but counts an open or click twice: deduplicating provider events is the
// caller's (provider_events), and every pixel hit is an open.
func (a *Outcomes) Apply(ctx context.Context, q *store.Tx, in []Outcome) (Counts, error) {
	var n Counts
	if len(in) == 0 {
		return n, nil
	}
	now := a.now()
	todo := make([]Outcome, len(in))
	copy(todo, in)
	for i := range todo {
		if todo[i].At.IsZero() {
			todo[i].At = now
		}
	}
	slices.SortStableFunc(todo, func(x, y Outcome) int {
		return cmp.Or(cmp.Compare(x.TenantID, y.TenantID), cmp.Compare(x.SendID, y.SendID), x.At.Compare(y.At))
	})

	var keys queries.SendLockManyParams
	for i, o := range todo {
		if i == 0 || o.TenantID != todo[i-1].TenantID || o.SendID != todo[i-1].SendID {
			keys.TenantIds = append(keys.TenantIds, o.TenantID)
			keys.Ids = append(keys.Ids, o.SendID)
		}
	}
	locked, err := q.SendLockMany(ctx, keys)
	if err != nil {
		return n, err
	}
	sends := make(map[[2]string]*queries.Send, len(locked))
	for i := range locked {
		sends[[2]string{locked[i].TenantID, locked[i].ID}] = &locked[i]
	}

	dirty := map[*queries.Send]bool{}
	var recs []events.System
	var facts []metrics.Fact
	optOuts := map[[2]string]*contacts.OptOut{}
	// The tenants whose guard window moved: any delivered, bounced or
	// complained status applied, in whatever order the outcomes arrive
	// (a delivered after another send's complaint can complete the
	// sample; ADDENDUM 19).
	guarded := map[string]bool{}
	for _, o := range todo {
		s := sends[[2]string{o.TenantID, o.SendID}]
		if s == nil || (o.ContactID != "" && o.ContactID != s.ContactID) {
			n.Dropped++
			n.Missing = append(n.Missing, o)
			continue
		}
		if o.Provider != "" && s.Provider != nil && *s.Provider != o.Provider {
			// A forged or misrouted event (another account's webhook
			// pointed at us, a send_id guessed): the provider that
			// carried the message is the only one that can report on it.
			// It settles nothing, not even a send in doubt.
			n.OtherProvider++
			continue
		}
		n.Applied++
		e := step(s, o)
		if e.changed {
			dirty[s] = true
			switch s.DeliveryStatus {
			case sendgridevents.StatusDelivered, sendgridevents.StatusBounced, sendgridevents.StatusComplained:
				guarded[s.TenantID] = true
			}
		}
		// Any outcome of a send is the provider's word that it has the
		// message: a send in doubt is settled (ADDENDUM section 12).
		if s.InDoubt {
			s.InDoubt, dirty[s] = false, true
		}
		if e.unsubscribe {
			e.counts.Unsubscribed++
		}
		if e.counts != (metrics.Counts{}) {
			facts = append(facts, metrics.Fact{TenantID: s.TenantID, TemplateID: s.TemplateID,
				SequenceID: deref(s.SequenceID), BroadcastID: deref(s.BroadcastID), At: o.At, Counts: e.counts})
		}
		if e.event != "" {
			props := sendProps(s)
			for k, v := range e.props {
				props[k] = v
			}
			recs = append(recs, events.System{TenantID: s.TenantID, ContactID: s.ContactID, Name: e.event,
				Properties: props, Timestamp: o.At, Opens: e.opens, Clicks: e.clicks, Machine: e.machine})
		}
		if e.suppress || e.unsubscribe {
			k := [2]string{s.TenantID, s.ContactID}
			oo := optOuts[k]
			if oo == nil {
				oo = &contacts.OptOut{TenantID: s.TenantID, ContactID: s.ContactID}
				optOuts[k] = oo
			}
			if e.suppress && !oo.Suppress {
				oo.Suppress, oo.SuppressReason, oo.SendID = true, suppressReason(o.Kind), s.ID
			}
			if e.unsubscribe && !oo.Unsubscribe {
				oo.Unsubscribe, oo.Record, oo.Properties, oo.At = true, a.Events, sendProps(s), o.At
			}
		}
	}

	if err := lockContacts(ctx, q, recs, optOuts); err != nil {
		return n, err
	}
	if len(dirty) > 0 {
		rows := make([]outcomeRow, 0, len(dirty))
		for s := range dirty {
			rows = append(rows, outcomeRowOf(s))
		}
		b, err := json.Marshal(rows)
		if err != nil {
			return n, err
		}
		if err := q.SendUpdateOutcomes(ctx, b); err != nil {
			return n, err
		}
	}
	if err := a.Events.RecordSystemMany(ctx, q, recs); err != nil {
		return n, err
	}
	if err := metrics.Count(ctx, q, facts...); err != nil {
		return n, err
	}
	var mOpens, mClicks int64
	for _, f := range facts {
		mOpens, mClicks = mOpens+f.MachineOpened, mClicks+f.MachineClicked
	}
	if mOpens+mClicks > 0 {
		q.AfterCommit(func(context.Context) { telemetry.MachineHits(mOpens, mClicks) })
	}
	for _, k := range sortedKeys(optOuts) {
		if _, err := contacts.ApplyOptOut(ctx, q, *optOuts[k]); err != nil {
			return n, err
		}
		if optOuts[k].Suppress {
			guarded[k[0]] = true
		}
	}
	// Any outcome in the window can take a tenant past the guard's rates
	// (a hard bounce or complaint, or the delivered that completes the
	// sample); the tenant row is locked last (docs/decisions.md "Lock
	// order").
	if a.Guard != nil {
		for _, t := range slices.Sorted(maps.Keys(guarded)) {
			if _, err := a.Guard.Check(ctx, q, t); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// lockContacts locks, in key order, the contacts the outcomes will change,
// when there are several: with one, its first update is the only lock.
func lockContacts(ctx context.Context, q *store.Tx, recs []events.System, optOuts map[[2]string]*contacts.OptOut) error {
	set := map[[2]string]bool{}
	for _, r := range recs {
		set[[2]string{r.TenantID, r.ContactID}] = true
	}
	for k := range optOuts {
		set[k] = true
	}
	if len(set) < 2 {
		return nil
	}
	var p queries.ContactLockManyParams
	for _, k := range sortedKeys(set) {
		p.TenantIds = append(p.TenantIds, k[0])
		p.Ids = append(p.Ids, k[1])
	}
	return q.ContactLockMany(ctx, p)
}

func sortedKeys[V any](m map[[2]string]V) [][2]string {
	keys := make([][2]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y [2]string) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
	return keys
}

// effect is what one outcome does beyond the send row.
type effect struct {
	changed bool // the send row changed
	// event is the system event to record ("" for none), with its own
	// properties besides the send's.
	event         string
	props         map[string]any
	opens, clicks int64 // moves of the contact's derived counters
	// counts are the metrics it moves: a status move (as its event), a
	// send's first open or click.
	counts      metrics.Counts
	suppress    bool
	unsubscribe bool
	// machine marks a machine's open or click (its event moves no derived
	// field and runs no hook).
	machine bool
}

// machineOf classifies an open or click: by our own request's method,
// user agent and timing (Machine), or for a provider's event by the
// provider's flag. "" is a person's.
func machineOf(s *queries.Send, o Outcome) string {
	if o.Method == "" {
		if o.Machine {
			return "provider"
		}
		return ""
	}
	return Machine(Hit{Click: o.Kind == sendgridevents.Clicked, Method: o.Method, UserAgent: o.UserAgent,
		At: o.At, SentAt: s.SentAt, FirstClickAt: s.ClickedAt})
}

// step applies one outcome to the send in memory and says what else it
// does. A status event (delivered, bounced, complained, rejected) is
// recorded only when the status moved: a delivered after a bounce, or the
// same bounce reported twice, is no news. Suppression follows the outcome,
// not the status: a hard bounce after a complaint still suppresses. Every
// open and click is an event and a count; only a send's first open or
// click moves the contact's totalOpens or totalClicks.
func step(s *queries.Send, o Outcome) effect {
	at := o.At
	switch o.Kind {
	case sendgridevents.Delivered, sendgridevents.BouncedHard, sendgridevents.BouncedSoft,
		sendgridevents.Rejected, sendgridevents.Complained:
		e := effect{suppress: o.Kind == sendgridevents.BouncedHard || o.Kind == sendgridevents.Complained}
		cur := sendgridevents.Delivery{Status: s.DeliveryStatus}
		if s.BounceType != nil {
			cur.BounceType = *s.BounceType
		}
		next, changed := sendgridevents.Apply(cur, o.Kind)
		if !changed {
			return e
		}
		e.changed = true
		s.DeliveryStatus, s.BounceType = next.Status, nil
		if next.BounceType != "" {
			bt := next.BounceType
			s.BounceType = &bt
		}
		switch next.Status {
		case sendgridevents.StatusDelivered:
			s.DeliveredAt, e.event = &at, events.Delivered
			e.counts.Delivered = 1
		case sendgridevents.StatusBounced:
			s.BouncedAt, e.event = &at, events.Bounced
			e.props = map[string]any{"bounceType": next.BounceType}
			if next.BounceType == sendgridevents.BounceHard {
				e.counts.BouncedHard = 1
			} else {
				e.counts.BouncedSoft = 1
			}
		case sendgridevents.StatusRejected:
			// API.md has no rejected event or timeline type: the status
			// and rejectedAt say it.
			s.RejectedAt = &at
		case sendgridevents.StatusComplained:
			s.ComplainedAt, e.event = &at, events.Complained
			e.counts.Complained = 1
		}
		if o.Reason != "" && e.event != "" {
			if e.props == nil {
				e.props = map[string]any{}
			}
			e.props["reason"] = o.Reason
		}
		return e
	case sendgridevents.Opened, sendgridevents.Clicked:
		e := hit(s, o)
		if !inHitWindow(s, o.Kind, at) {
			// Past the window's events: counted (the send's counts, the
			// machine metrics), no event row, no webhook.
			e.event, e.props = "", nil
		}
		return e
	case sendgridevents.Unsubscribed:
		return effect{unsubscribe: true}
	}
	return effect{}
}

// MaxHitEvents is how many opens, and how many clicks, of one send are
// recorded as events (a row each, a timeline entry, a webhook message)
// within HitWindow; past it a hit only moves the send's openCount or
// clickCount and the machine metrics. A person opens an email a few times
// and clicks a few of its links; hits past twenty an hour are a pixel
// fetched in a loop, a link hammered or a message forwarded to a list,
// whose rows would only grow the tables (docs/decisions.md "Outbound
// webhooks: hardened").
const MaxHitEvents = 20

// HitWindow is the window MaxHitEvents counts in: it starts with a send's
// first hit after the previous one has passed.
const HitWindow = time.Hour

// inHitWindow counts a hit of kind at `at` in the send's window (starting
// a new one when the current has passed) and reports whether it is still
// among the window's MaxHitEvents of its kind. A hit older than the window
// (a provider's late event) counts in the current one.
func inHitWindow(s *queries.Send, k sendgridevents.Outcome, at time.Time) bool {
	if s.HitWindowAt == nil || !at.Before(s.HitWindowAt.Add(HitWindow)) {
		start := at
		s.HitWindowAt, s.HitWindowOpens, s.HitWindowClicks = &start, 0, 0
	}
	n := &s.HitWindowOpens
	if k == sendgridevents.Clicked {
		n = &s.HitWindowClicks
	}
	*n++
	return *n <= MaxHitEvents
}

// hit is what an open or click does, its window aside.
func hit(s *queries.Send, o Outcome) effect {
	at := o.At
	if why := machineOf(s, o); why != "" {
		// A machine's hit: an event that says so, counted apart, and
		// nothing else (ADDENDUM 17) but the send's hit window.
		e := effect{changed: true, event: events.Opened, machine: true,
			props: map[string]any{"machine": true, "machineReason": why}}
		e.counts.MachineOpened = 1
		if o.Kind == sendgridevents.Clicked {
			e.event, e.counts = events.Clicked, metrics.Counts{MachineClicked: 1}
			e.props["url"] = o.URL
		}
		return e
	}
	switch o.Kind {
	case sendgridevents.Opened:
		first := s.OpenedAt == nil
		if first || at.Before(*s.OpenedAt) {
			s.OpenedAt = &at
		}
		s.OpenCount++
		e := effect{changed: true, event: events.Opened, props: map[string]any{"first": first}}
		if first {
			e.opens, e.counts.Opened = 1, 1
		}
		return e
	default:
		first := s.ClickedAt == nil
		if first || at.Before(*s.ClickedAt) {
			s.ClickedAt = &at
		}
		s.ClickCount++
		e := effect{changed: true, event: events.Clicked, props: map[string]any{"first": first, "url": o.URL}}
		if first {
			e.clicks, e.counts.Clicked = 1, 1
		}
		return e
	}
}

// sendProps are the properties every outcome event carries (API.md
// section 6: send, template and sequence ids).
func sendProps(s *queries.Send) map[string]any {
	p := map[string]any{"sendId": s.ID, "templateId": s.TemplateID}
	if s.SequenceID != nil {
		p["sequenceId"] = *s.SequenceID
	}
	if s.StepID != nil {
		p["stepId"] = *s.StepID
	}
	if s.BroadcastID != nil {
		p["broadcastId"] = *s.BroadcastID
	}
	return p
}

// outcomeRow is one row of SendUpdateOutcomes.
type outcomeRow struct {
	TenantID       string     `json:"tenant_id"`
	ID             string     `json:"id"`
	DeliveryStatus string     `json:"delivery_status"`
	BounceType     *string    `json:"bounce_type"`
	DeliveredAt    *time.Time `json:"delivered_at"`
	OpenedAt       *time.Time `json:"opened_at"`
	ClickedAt      *time.Time `json:"clicked_at"`
	BouncedAt      *time.Time `json:"bounced_at"`
	ComplainedAt   *time.Time `json:"complained_at"`
	RejectedAt     *time.Time `json:"rejected_at"`
	OpenCount      int32      `json:"open_count"`
	ClickCount     int32      `json:"click_count"`
	InDoubt        bool       `json:"in_doubt"`
	HitWindowAt    *time.Time `json:"hit_window_at"`
	HitWindowOpens int32      `json:"hit_window_opens"`
	HitWindowClick int32      `json:"hit_window_clicks"`
}

func outcomeRowOf(s *queries.Send) outcomeRow {
	return outcomeRow{TenantID: s.TenantID, ID: s.ID, DeliveryStatus: s.DeliveryStatus, BounceType: s.BounceType,
		DeliveredAt: s.DeliveredAt, OpenedAt: s.OpenedAt, ClickedAt: s.ClickedAt, BouncedAt: s.BouncedAt,
		ComplainedAt: s.ComplainedAt, RejectedAt: s.RejectedAt, OpenCount: s.OpenCount, ClickCount: s.ClickCount,
		InDoubt: s.InDoubt, HitWindowAt: s.HitWindowAt, HitWindowOpens: s.HitWindowOpens, HitWindowClick: s.HitWindowClicks}
}
