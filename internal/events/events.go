// Package events is the one entry point through which every event, custom
// or system (email.sent, email.delivered, ...), is recorded: it validates
// names and properties, stores the event, keeps the contact's derived fields
// current and feeds the contact timeline. Capabilities that react to events
// (the sequence engine) plug in as Hooks that run in the same transaction.
package events

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/storable"
	"tidings/internal/store"
	"tidings/queries"
)

// MaxFuture is how far ahead of now a posted event may be dated.
const MaxFuture = 5 * time.Minute

const maxName = 256 // characters

// System event names (API.md section 6).
const (
	Sent         = "email.sent"
	Delivered    = "email.delivered"
	Opened       = "email.opened"
	Clicked      = "email.clicked"
	Bounced      = "email.bounced"
	Complained   = "email.complained"
	Unsubscribed = "email.unsubscribed"
)

// IsSystem reports whether name is reserved for system events.
func IsSystem(name string) bool { return strings.HasPrefix(name, "email.") }

// TimelineType is the timeline entry type an event appears as.
func TimelineType(name string) string {
	switch name {
	case Sent:
		return "send"
	case Delivered, Opened, Clicked, Bounced, Complained, Unsubscribed:
		return strings.TrimPrefix(name, "email.")
	}
	return "event"
}

// ValidateName checks a custom event name.
func ValidateName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return apperr.Invalid("name", "is required")
	case utf8.RuneCountInString(name) > maxName:
		return apperr.Invalid("name", "must be at most 256 characters")
	case storable.Text(name) != "":
		return apperr.Invalid("name", storable.Text(name))
	case IsSystem(name):
		return apperr.Invalid("name", "must not start with \"email.\" (reserved for system events)")
	}
	return nil
}

// Limits of an event's properties (documented in docs/decisions.md);
// numbers are bounded by storable.Number.
const (
	maxStringValue = 4096 // bytes
)

// ValidateProperties checks that event properties are flat: strings,
// numbers and booleans only, within the limits, holding only text
// PostgreSQL can store. It returns the JSON to store, with numbers kept as
// sent (PostgreSQL writes them out in full, which the digit limits bound).
func ValidateProperties(props map[string]json.RawMessage) ([]byte, error) {
	var f apperr.Fields
	storable.Properties(props, func(_ string, raw json.RawMessage) string { return valueProblem(raw) }, f.Add)
	if err := f.Err(); err != nil {
		return nil, err
	}
	if len(props) == 0 {
		return []byte("{}"), nil
	}
	return json.Marshal(props)
}

// valueProblem judges one property value as sent.
func valueProblem(raw json.RawMessage) string {
	v := bytes.TrimSpace(raw)
	if _, p, ok := storable.JSON(v); !ok {
		return p
	}
	switch {
	case len(v) > 0 && v[0] == '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "must be a string, number or boolean"
		}
		if len(s) > maxStringValue {
			return "strings must be at most 4096 bytes"
		}
	case len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')):
		if !json.Valid(v) {
			return "must be a string, number or boolean"
		}
		return storable.Number(string(v))
	case bytes.Equal(v, []byte("true")) || bytes.Equal(v, []byte("false")):
	default:
		return "must be a string, number or boolean"
	}
	return ""
}

// ValidateTimestamp checks the time of a posted event against now.
func ValidateTimestamp(ts, now time.Time) error {
	if ts.After(now.Add(MaxFuture)) {
		return apperr.Invalid("timestamp", "must be at most 5 minutes in the future")
	}
	return nil
}

// Custom is a validated custom event to record.
type Custom struct {
	TenantID      string
	Email         string
	Name          string
	Properties    []byte
	Timestamp     time.Time
	UpdateContact bool
	// Audit is the posting request's audit entry: the transaction that
	// stores the event writes it (a group commit's batch runs on no
	// request's context, so the entry travels with the event). Ingest sets
	// it from the caller's context.
	Audit *store.Audit
}

// Recorded is the stored event with the contact as it now stands.
type Recorded struct {
	EventID            string
	Name               string
	Properties         []byte
	Timestamp          time.Time
	ContactID          string
	ProcessedSequences []string
	TriggeredSequences []string
	Contact            queries.Contact
}

// contactNotFound names the missing row: events never create contacts.
func contactNotFound(err error) error {
	return apperr.Specific(err, apperr.KindNotFound, apperr.NotFound("CONTACT_NOT_FOUND", "contact"))
}

// Hook reacts to a custom event inside the transaction that records it,
// e.g. to enrol the contact in the sequences the event was stored as
// processing (ev.ProcessedSequences: the enabled sequences its name
// triggered when it was stored); it reports those it newly enrolled the
// contact in.
type Hook func(ctx context.Context, q *store.Tx, ev *Recorded) (triggered []string, err error)

// BatchHook is a Hook for a batch of custom events of distinct contacts,
// run once in the transaction that records them all (RecordCustomMany),
// so its cost is per batch rather than per event. It appends to each
// event's TriggeredSequences what the Hook returns for it, and must leave
// the database as the Hook run on each event in turn would.
type BatchHook func(ctx context.Context, q *store.Tx, evs []*Recorded) error

// SystemHook reacts to system events inside the transaction that records
// them, all of a batch at once (a webhook batch, a batch of sends), so its
// cost is per batch rather than per event.
type SystemHook func(ctx context.Context, q *store.Tx, evs []SystemRecorded) error

// SystemRecorded is a stored system event, as a SystemHook sees it.
type SystemRecorded struct {
	TenantID, ContactID, EventID, Name string
}

// Recorder records events.
type Recorder struct {
	DB    *store.DB
	Hooks []Hook
	// BatchHooks, when set, do in RecordCustomMany what Hooks do per event
	// (one BatchHook per Hook); unset, RecordCustomMany runs Hooks on each
	// event of the batch in turn.
	BatchHooks []BatchHook
	// SystemHooks run after system events are stored.
	SystemHooks []SystemHook
}

// RecordCustom stores a custom event against an existing contact found by
// email; CONTACT_NOT_FOUND otherwise (events never create contacts).
func (r *Recorder) RecordCustom(ctx context.Context, in Custom) (*Recorded, error) {
	// Without hooks or an audit entry the one statement is atomic on its
	// own: skipping BEGIN/COMMIT saves two round trips on the hottest
	// write path.
	if len(r.Hooks) == 0 && in.Audit == nil {
		return r.recordCustom(ctx, r.DB.Queries, in)
	}
	if in.Audit != nil {
		ctx = store.WithAudit(ctx, in.Audit)
	}
	var rec *Recorded
	err := r.DB.InTx(ctx, func(q *store.Tx) error {
		var err error
		if rec, err = r.recordCustom(ctx, q.Queries, in); err != nil {
			return err
		}
		q.AuditResource(rec.EventID)
		return r.runHooks(ctx, q, rec)
	})
	return rec, err
}

func (r *Recorder) recordCustom(ctx context.Context, q *queries.Queries, in Custom) (*Recorded, error) {
	row, err := q.EventRecordByEmail(ctx, queries.EventRecordByEmailParams{
		TenantID: in.TenantID, Email: in.Email, OccurredAt: in.Timestamp, UpdateContact: in.UpdateContact,
		ID: ids.New(ids.Event), Name: in.Name, Properties: in.Properties,
	})
	if err != nil {
		return nil, contactNotFound(err)
	}
	return recorded(in, row), nil
}

// recorded is the record of the custom event in as EventRecordByEmail (or
// its batch form) stored it.
func recorded(in Custom, row queries.EventRecordByEmailRow) *Recorded {
	var last *time.Time
	if t, ok := row.LastEventAt.(time.Time); ok {
		last = &t
	}
	return &Recorded{EventID: row.EventID, Name: in.Name, Properties: in.Properties, Timestamp: row.EventOccurredAt,
		ContactID: row.ContactID, ProcessedSequences: row.ProcessedSequences, TriggeredSequences: []string{},
		Contact: queries.Contact{TenantID: in.TenantID, ID: row.ContactID, Email: row.Email, UserID: row.UserID,
			Properties: row.ContactProperties, Subscribed: row.Subscribed, Suppressed: row.Suppressed, Topics: row.Topics,
			TotalSends: row.TotalSends, TotalOpens: row.TotalOpens, TotalClicks: row.TotalClicks,
			LastEventAt: last, CreatedAt: row.CreatedAt, UpdatedAt: row.UpdatedAt}}
}

// System is a system event about a contact; the deltas move the derived
// counters (a first open of a send counts one open, and so on).
type System struct {
	TenantID   string
	ContactID  string
	Name       string
	Properties map[string]any // send id, template id, sequence id, ...
	Timestamp  time.Time
	Sends      int64
	Opens      int64
	Clicks     int64
	// Machine marks an open or click by a machine (ADDENDUM 17): recorded
	// with properties.machine, it moves none of the contact's derived
	// fields (lastEventAt included) and runs no hooks (exit conditions).
	Machine bool
}

// RecordSystem stores a system event inside the caller's transaction, so the
// send record or outcome that caused it commits together with it.
func (r *Recorder) RecordSystem(ctx context.Context, q *store.Tx, in System) (*Recorded, error) {
	props := []byte("{}")
	if len(in.Properties) > 0 {
		var err error
		if props, err = json.Marshal(in.Properties); err != nil {
			return nil, err
		}
	}
	c, err := q.ContactTouchDerived(ctx, queries.ContactTouchDerivedParams{TenantID: in.TenantID, ID: in.ContactID,
		OccurredAt: in.Timestamp, Sends: in.Sends, Opens: in.Opens, Clicks: in.Clicks})
	if err != nil {
		return nil, contactNotFound(err)
	}
	ev, err := q.EventInsert(ctx, queries.EventInsertParams{TenantID: in.TenantID, ID: ids.New(ids.Event),
		ContactID: in.ContactID, Name: in.Name, Properties: props, OccurredAt: in.Timestamp})
	if err != nil {
		return nil, err
	}
	rec := &Recorded{EventID: ev.ID, Name: ev.Name, Properties: ev.Properties, Timestamp: ev.OccurredAt,
		ContactID: ev.ContactID, ProcessedSequences: []string{}, TriggeredSequences: []string{}, Contact: c}
	return rec, r.runSystemHooks(ctx, q, []SystemRecorded{{TenantID: in.TenantID, ContactID: in.ContactID,
		EventID: ev.ID, Name: ev.Name}})
}

func (r *Recorder) runSystemHooks(ctx context.Context, q *store.Tx, evs []SystemRecorded) error {
	for _, h := range r.SystemHooks {
		if err := h(ctx, q, evs); err != nil {
			return err
		}
	}
	return nil
}

func (r *Recorder) runHooks(ctx context.Context, q *store.Tx, rec *Recorded) error {
	for _, h := range r.Hooks {
		triggered, err := h(ctx, q, rec)
		if err != nil {
			return err
		}
		rec.TriggeredSequences = append(rec.TriggeredSequences, triggered...)
	}
	return nil
}

// RecordSystemMany stores many system events inside the caller's
// transaction in two statements, one insert for the events and one update
// for the contacts' derived fields (deltas summed per contact), where
// RecordSystem takes two round trips per event, then runs the system hooks
// once for them all. Outcome batches from the provider's webhook and
// batches of sends go through here.
//
// Callers that change several contacts lock them in key order first
// (queries.ContactLockMany): the update below takes row locks in whatever
// order the plan visits them.
func (r *Recorder) RecordSystemMany(ctx context.Context, q *store.Tx, in []System) error {
	if len(in) == 0 {
		return nil
	}
	type eventRow struct {
		TenantID   string          `json:"tenant_id"`
		ID         string          `json:"id"`
		ContactID  string          `json:"contact_id"`
		Name       string          `json:"name"`
		Properties json.RawMessage `json:"properties"`
		OccurredAt time.Time       `json:"occurred_at"`
	}
	type touchRow struct {
		TenantID   string    `json:"tenant_id"`
		ID         string    `json:"id"`
		OccurredAt time.Time `json:"occurred_at"`
		Sends      int64     `json:"sends"`
		Opens      int64     `json:"opens"`
		Clicks     int64     `json:"clicks"`
	}
	evs := make([]eventRow, 0, len(in))
	machine := map[int]bool{}
	touches := map[[2]string]*touchRow{}
	for _, s := range in {
		props := json.RawMessage("{}")
		if len(s.Properties) > 0 {
			b, err := json.Marshal(s.Properties)
			if err != nil {
				return err
			}
			props = b
		}
		evs = append(evs, eventRow{TenantID: s.TenantID, ID: ids.New(ids.Event), ContactID: s.ContactID,
			Name: s.Name, Properties: props, OccurredAt: s.Timestamp})
		if s.Machine {
			machine[len(evs)-1] = true
			continue
		}
		k := [2]string{s.TenantID, s.ContactID}
		t := touches[k]
		if t == nil {
			t = &touchRow{TenantID: s.TenantID, ID: s.ContactID, OccurredAt: s.Timestamp}
			touches[k] = t
		}
		if s.Timestamp.After(t.OccurredAt) {
			t.OccurredAt = s.Timestamp
		}
		t.Sends += s.Sends
		t.Opens += s.Opens
		t.Clicks += s.Clicks
	}
	rows := make([]*touchRow, 0, len(touches))
	for _, t := range touches {
		rows = append(rows, t)
	}
	// Key order, so a plan that visits contacts in input order locks them
	// in the order ContactLockMany would.
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].TenantID < rows[j].TenantID || (rows[i].TenantID == rows[j].TenantID && rows[i].ID < rows[j].ID)
	})
	evJSON, err := json.Marshal(evs)
	if err != nil {
		return err
	}
	touchJSON, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	if err := q.ContactTouchDerivedMany(ctx, touchJSON); err != nil {
		return err
	}
	if err := q.EventInsertMany(ctx, evJSON); err != nil {
		return err
	}
	if len(r.SystemHooks) == 0 {
		return nil
	}
	recs := make([]SystemRecorded, 0, len(evs))
	for i, e := range evs {
		if !machine[i] {
			recs = append(recs, SystemRecorded{TenantID: e.TenantID, ContactID: e.ContactID, EventID: e.ID, Name: e.Name})
		}
	}
	return r.runSystemHooks(ctx, q, recs)
}
