package sendgridevents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Outcome is what an event means for Tidings.
type Outcome int

// Outcomes. Ignored covers event types Tidings does not act on
// (group_resubscribe, types SendGrid adds later) and events it cannot
// attribute (see Event.IgnoreReason). Processed (processed, deferred)
// changes nothing on the send but proves SendGrid has the message: it
// settles a send in doubt (ADDENDUM section 12).
const (
	Ignored Outcome = iota
	Delivered
	BouncedHard
	BouncedSoft
	Rejected
	Complained
	Opened
	Clicked
	Unsubscribed
	Processed
)

var outcomeNames = [...]string{"ignored", "delivered", "bounced_hard", "bounced_soft", "rejected", "complained", "opened",
	"clicked", "unsubscribed", "processed"}

// ParseOutcome is String reversed (parked events store the name).
func ParseOutcome(name string) (Outcome, bool) {
	for i, n := range outcomeNames {
		if n == name {
			return Outcome(i), true
		}
	}
	return Ignored, false
}

func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Limits of one POST. SendGrid posts a batch when it reaches 768 KB or
// every 30 seconds, so a body of 4 MiB is several batches; an over-limit
// body is refused whole (413) rather than half-read.
const (
	MaxBodyBytes = 4 << 20
	MaxEvents    = 10000
	// maxFieldLen bounds the ids an event is attributed by: ours are 30
	// bytes, SendGrid's under 100. Longer ones are not ours.
	maxFieldLen = 256
	// maxReasonLen bounds the provider's text kept for timelines.
	maxReasonLen = 1024
)

// ErrTooLarge is returned by Parse for a body or batch over the limits.
var ErrTooLarge = errors.New("sendgridevents: batch too large")

// Event is one SendGrid event, with the fields Tidings uses.
type Event struct {
	Type      string    // SendGrid's "event": delivered, bounce, open, ...
	Email     string    // recipient
	Timestamp time.Time // when it happened at SendGrid; zero if absent
	EventID   string    // sg_event_id: the deduplication key
	MessageID string    // sg_message_id
	// BounceType is SendGrid's "type" of a bounce event: "bounce" or
	// "blocked".
	BounceType           string
	BounceClassification string // bounce_classification, e.g. "Invalid Address"
	Status               string // SMTP enhanced status, e.g. "5.1.1"
	Reason               string // provider's text, truncated to maxReasonLen
	URL                  string // clicked link
	MachineOpen          bool   // sg_machine_open: an open by a proxy such as Apple Mail Privacy Protection
	// SendID and TenantID are our custom_args, which SendGrid flattens into
	// the event object.
	SendID   string
	TenantID string

	Outcome Outcome
	// IgnoreReason says why an event of an otherwise known type maps to
	// Ignored ("" when it does not, or its type is simply not acted on).
	IgnoreReason string
}

// wireEvent is the JSON shape. Fields are json.RawMessage where SendGrid's
// type has varied or a wrong type must not cost the whole batch.
type wireEvent struct {
	Event                string          `json:"event"`
	Email                string          `json:"email"`
	Timestamp            json.RawMessage `json:"timestamp"`
	EventID              string          `json:"sg_event_id"`
	MessageID            string          `json:"sg_message_id"`
	Type                 string          `json:"type"`
	BounceClassification string          `json:"bounce_classification"`
	Status               json.RawMessage `json:"status"`
	Reason               string          `json:"reason"`
	URL                  string          `json:"url"`
	MachineOpen          json.RawMessage `json:"sg_machine_open"`
	SendID               string          `json:"send_id"`
	TenantID             string          `json:"tenant_id"`
}

// Parse reads the JSON array SendGrid posts. It fails only when the body is
// not a JSON array of objects or is over the limits; within a well-formed
// batch, an event that cannot be read or attributed is kept as Ignored
// with a reason, so one odd event does not make SendGrid retry the rest.
func Parse(body []byte) ([]Event, error) {
	if len(body) > MaxBodyBytes {
		return nil, ErrTooLarge
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, fmt.Errorf("sendgridevents: body is not a JSON array: %w", err)
	}
	if len(raws) > MaxEvents {
		return nil, ErrTooLarge
	}
	events := make([]Event, 0, len(raws))
	for i, raw := range raws {
		if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
			return nil, fmt.Errorf("sendgridevents: element %d is not an object", i)
		}
		events = append(events, parseEvent(raw))
	}
	return events, nil
}

func parseEvent(raw json.RawMessage) Event {
	var w wireEvent
	if err := json.Unmarshal(raw, &w); err != nil {
		return Event{Outcome: Ignored, IgnoreReason: "malformed event"}
	}
	e := Event{
		Type:                 text(w.Event),
		Email:                text(w.Email),
		EventID:              text(w.EventID),
		MessageID:            text(w.MessageID),
		BounceType:           text(w.Type),
		BounceClassification: text(w.BounceClassification),
		Status:               text(stringish(w.Status)),
		Reason:               text(truncate(w.Reason, maxReasonLen)),
		URL:                  text(w.URL),
		MachineOpen:          string(w.MachineOpen) == "true",
		SendID:               text(w.SendID),
		TenantID:             text(w.TenantID),
	}
	if ts, ok := unixSeconds(w.Timestamp); ok {
		e.Timestamp = time.Unix(ts, 0).UTC()
	}
	e.Outcome = Classify(e.Type, e.BounceType)
	switch {
	case e.Outcome == Ignored:
	case e.EventID == "" || len(e.EventID) > maxFieldLen:
		// Without an id the event cannot be deduplicated, and SendGrid
		// delivers at least once: counting it could count it twice.
		e.Outcome, e.IgnoreReason = Ignored, "no sg_event_id"
	case e.SendID == "" || e.TenantID == "" || len(e.SendID) > maxFieldLen || len(e.TenantID) > maxFieldLen:
		// Not sent by Tidings (another sender on the same account), or
		// sent without our custom_args.
		e.Outcome, e.IgnoreReason = Ignored, "no send_id or tenant_id"
	}
	return e
}

// Classify maps a SendGrid event type, and for bounces their "type", to an
// Outcome (ADDENDUM 8). A bounce whose type is missing or unknown is taken
// as hard: SendGrid's bounce events have always been permanent failures,
// and "blocked" is the one kind it marks as temporary.
// group_unsubscribe counts as an unsubscribe: Tidings sets no ASM groups,
// and a recipient who asked to stop should stop.
func Classify(eventType, bounceType string) Outcome {
	switch eventType {
	case "delivered":
		return Delivered
	case "bounce":
		if bounceType == "blocked" {
			return BouncedSoft
		}
		return BouncedHard
	case "blocked":
		return BouncedSoft
	case "dropped":
		return Rejected
	case "spamreport":
		return Complained
	case "open":
		return Opened
	case "click":
		return Clicked
	case "unsubscribe", "group_unsubscribe":
		return Unsubscribed
	case "processed", "deferred":
		return Processed
	}
	return Ignored
}

// unixSeconds reads a timestamp that SendGrid sends as a JSON integer; a
// number with a fraction or a numeric string is accepted too.
func unixSeconds(raw json.RawMessage) (int64, bool) {
	s := stringish(raw)
	if s == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, n > 0 && n < 1<<40
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f >= 1<<40 {
		return 0, false
	}
	return int64(f), true
}

// stringish returns a JSON string's value or a JSON number's text, and ""
// for anything else.
func stringish(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return truncate(s, maxFieldLen)
		}
		return ""
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// text makes a decoded string storable: Go's decoder has already turned
// invalid UTF-8 into U+FFFD, and a \u0000 escape becomes U+FFFD too, since
// PostgreSQL's text and jsonb refuse NUL. Without it, one reason or URL
// with a NUL (text a remote mail server chose) failed the whole batch's
// transaction on every retry.
func text(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
