package sesevents

import (
	"encoding/json"
	"strings"
	"time"

	"tidings/internal/sendgridevents"
)

// Event is one SES event with what Tidings uses of it. Outcomes are the
// same kinds as SendGrid's (sendgridevents.Outcome): one set of rules
// applies them whatever provider sent the message.
type Event struct {
	// EventID deduplicates: the SNS MessageId, the same on each of SNS's
	// redeliveries of one notification.
	EventID   string
	Type      string // SES eventType
	MessageID string // SES's mail.messageId
	SendID    string
	TenantID  string
	Email     string
	At        time.Time
	URL       string
	Reason    string
	Outcome   sendgridevents.Outcome
	// IgnoreReason says why a known type maps to Ignored.
	IgnoreReason string
}

// wire is SES's event-publishing JSON, the fields Tidings reads. The
// older identity notifications name the type notificationType.
type wire struct {
	EventType        string `json:"eventType"`
	NotificationType string `json:"notificationType"`
	Mail             struct {
		MessageID   string   `json:"messageId"`
		Destination []string `json:"destination"`
		// Only our two tags: SES adds its own (ses:configuration-set,
		// ses:source-ip...) that a map would allocate for.
		Tags struct {
			SendID   []string `json:"send_id"`
			TenantID []string `json:"tenant_id"`
		} `json:"tags"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string `json:"bounceType"`
		BounceSubType     string `json:"bounceSubType"`
		Timestamp         string `json:"timestamp"`
		BouncedRecipients []struct {
			EmailAddress   string `json:"emailAddress"`
			DiagnosticCode string `json:"diagnosticCode"`
		} `json:"bouncedRecipients"`
	} `json:"bounce"`
	Complaint *struct {
		Timestamp           string `json:"timestamp"`
		ComplainedRecipient []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"complainedRecipients"`
	} `json:"complaint"`
	Delivery *struct {
		Timestamp string `json:"timestamp"`
	} `json:"delivery"`
	Open *struct {
		Timestamp string `json:"timestamp"`
	} `json:"open"`
	Click *struct {
		Timestamp string `json:"timestamp"`
		Link      string `json:"link"`
	} `json:"click"`
	Reject *struct {
		Reason string `json:"reason"`
	} `json:"reject"`
}

// maxField bounds ids we take from an event; ours are about 30 bytes.
const maxField = 256

// Parse reads the SES event inside a verified notification. A message
// that is not an SES event, or names no send of ours, is Ignored with a
// reason; it never fails, so one odd message is not retried forever.
func Parse(e *Envelope) Event {
	ev := Event{EventID: e.MessageID}
	var w wire
	if err := json.Unmarshal([]byte(e.Message), &w); err != nil {
		ev.IgnoreReason = "not an SES event"
		return ev
	}
	ev.Type = w.EventType
	if ev.Type == "" {
		ev.Type = w.NotificationType
	}
	ev.MessageID = w.Mail.MessageID
	ev.SendID = tag(w.Mail.Tags.SendID)
	ev.TenantID = tag(w.Mail.Tags.TenantID)
	if len(w.Mail.Destination) > 0 {
		ev.Email = w.Mail.Destination[0]
	}
	stamp := ""
	switch ev.Type {
	case "Delivery":
		ev.Outcome = sendgridevents.Delivered
		if w.Delivery != nil {
			stamp = w.Delivery.Timestamp
		}
	case "Bounce":
		if w.Bounce == nil {
			ev.IgnoreReason = "bounce without its details"
			return ev
		}
		// Permanent is a hard bounce; Transient and Undetermined may pass
		// on another try: soft.
		ev.Outcome = sendgridevents.BouncedSoft
		if w.Bounce.BounceType == "Permanent" {
			ev.Outcome = sendgridevents.BouncedHard
		}
		stamp = w.Bounce.Timestamp
		ev.Reason = w.Bounce.BounceType + "/" + w.Bounce.BounceSubType
		if rs := w.Bounce.BouncedRecipients; len(rs) > 0 {
			ev.Email = rs[0].EmailAddress
			if rs[0].DiagnosticCode != "" {
				ev.Reason += ": " + rs[0].DiagnosticCode
			}
		}
	case "Complaint":
		ev.Outcome = sendgridevents.Complained
		if w.Complaint != nil {
			stamp = w.Complaint.Timestamp
			if rs := w.Complaint.ComplainedRecipient; len(rs) > 0 {
				ev.Email = rs[0].EmailAddress
			}
		}
	case "Open":
		ev.Outcome = sendgridevents.Opened
		if w.Open != nil {
			stamp = w.Open.Timestamp
		}
	case "Click":
		ev.Outcome = sendgridevents.Clicked
		if w.Click != nil {
			stamp, ev.URL = w.Click.Timestamp, w.Click.Link
		}
	case "Reject":
		// SES refused to send it (a virus): it never left.
		ev.Outcome = sendgridevents.Rejected
		if w.Reject != nil {
			ev.Reason = w.Reject.Reason
		}
	case "Send", "DeliveryDelay":
		// SES has the message: settles a send in doubt.
		ev.Outcome = sendgridevents.Processed
	default:
		return ev // Rendering Failure, Subscription...: not acted on
	}
	if t, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
		ev.At = t.UTC()
	}
	ev.Reason = clean(truncate(ev.Reason, 1024))
	ev.URL, ev.Email = clean(ev.URL), clean(ev.Email)
	switch {
	case ev.EventID == "" || len(ev.EventID) > maxField:
		ev.Outcome, ev.IgnoreReason = sendgridevents.Ignored, "no SNS MessageId"
	case ev.SendID == "" || ev.TenantID == "" || len(ev.SendID) > maxField || len(ev.TenantID) > maxField:
		// Not sent by Tidings, or sent without our tags.
		ev.Outcome, ev.IgnoreReason = sendgridevents.Ignored, "no send_id or tenant_id tag"
	}
	return ev
}

func tag(v []string) string {
	if len(v) > 0 {
		return clean(v[0])
	}
	return ""
}

// storedEnvelope is what is kept of a verified notification: what says
// where it came from and what it carries, without the signature fields
// (checked on arrival; a third of the body), so the worker reads and
// rewrites less of each row.
type storedEnvelope struct {
	Type      string
	MessageID string `json:"MessageId"`
	TopicArn  string
	Subject   *string `json:",omitempty"`
	Timestamp string
	Message   string
}

// Stored is the body kept of a verified notification e (ParseStored reads
// it, and also the whole signed body rows stored before kept).
func Stored(e *Envelope) []byte {
	b, err := json.Marshal(storedEnvelope{Type: e.Type, MessageID: e.MessageID, TopicArn: e.TopicArn,
		Subject: e.Subject, Timestamp: e.Timestamp, Message: e.Message})
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return b
}

// ParseStored is Parse of a stored notification (a body Verify accepted):
// only its MessageId and Message are decoded, the signature fields are
// skipped. The worker applies a thousand at a time.
func ParseStored(body []byte) (Event, error) {
	var e struct {
		MessageID string `json:"MessageId"`
		Message   string
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return Event{}, err
	}
	return Parse(&Envelope{Type: TypeNotification, MessageID: e.MessageID, Message: e.Message}), nil
}

// clean keeps text storable: PostgreSQL's text refuses NUL.
func clean(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
