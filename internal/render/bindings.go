package render

import (
	"maps"
	"strings"
	"time"
)

// Context is what a send knows about its recipient, from which Bindings
// builds the Liquid variables.
type Context struct {
	// Variables are the caller's variables (POST /api/send "variables").
	Variables map[string]any
	// Contact is the recipient.
	Contact *Contact
	// Event is the event that started the send, for sequence sends that an
	// event triggered; nil otherwise.
	Event *Event
	// UnsubscribeURL is the recipient's unsubscribe link.
	UnsubscribeURL string
}

// Contact is the recipient as templates see it.
type Contact struct {
	ContactID  string
	Email      string
	UserID     string // empty when the contact has none
	Subscribed bool
	Properties map[string]any
}

// Event is the event that started a send.
type Event struct {
	Name       string
	Properties map[string]any
	Timestamp  time.Time
}

// Names of the bindings the service provides.
const (
	contactVar     = "contact"
	eventVar       = "event"
	unsubscribeVar = "unsubscribeUrl"
)

// contactFields are the keys of the contact binding that properties cannot
// shadow.
var contactFields = map[string]bool{
	"contactId": true, "email": true, "userId": true, "subscribed": true, "properties": true,
}

// Bindings returns the Liquid variables for a send: the caller's variables
// at top level, then contact, event (when there is one) and unsubscribeUrl,
// which the caller's variables cannot override. Caller maps are not modified.
func (c Context) Bindings() map[string]any {
	b := make(map[string]any, len(c.Variables)+3)
	maps.Copy(b, c.Variables)
	// Even without a contact, a caller variable must not pose as one.
	delete(b, contactVar)
	delete(b, unsubscribeVar)
	if c.Contact != nil {
		b[contactVar] = ContactBinding(*c.Contact)
	}
	if c.Event != nil {
		b[eventVar] = EventBinding(*c.Event)
	}
	b[unsubscribeVar] = c.UnsubscribeURL
	return b
}

// ContactBinding is the contact as Liquid sees it: {contactId, email, userId,
// subscribed, properties}, and each property also directly on the contact
// ({{ contact.firstName }}) unless its key is one of those five. userId is
// nil when empty, so {% if contact.userId %} means what it says.
func ContactBinding(c Contact) map[string]any {
	m := make(map[string]any, len(c.Properties)+len(contactFields))
	for k, v := range c.Properties {
		if !contactFields[k] {
			m[k] = v
		}
	}
	var userID any
	if c.UserID != "" {
		userID = c.UserID
	}
	props := c.Properties
	if props == nil {
		props = map[string]any{}
	}
	m["contactId"] = c.ContactID
	m["email"] = c.Email
	m["userId"] = userID
	m["subscribed"] = c.Subscribed
	m["properties"] = props
	return m
}

// EventBinding is the event as Liquid sees it: {name, properties,
// timestamp}, the timestamp formatted as the API formats timestamps (ISO 8601
// UTC with milliseconds), which Liquid's date filter reads.
func EventBinding(e Event) map[string]any {
	props := e.Properties
	if props == nil {
		props = map[string]any{}
	}
	return map[string]any{
		"name":       e.Name,
		"properties": props,
		"timestamp":  e.Timestamp.UTC().Format(timestampFormat),
	}
}

const timestampFormat = "2006-01-02T15:04:05.000Z07:00"

// BindingsForPreview returns the Liquid variables for a preview, from the
// request's variables alone: variables.contact and variables.event are used
// as given (a contact object also gets its properties directly on it, as at
// send time, where that does not replace a key it has), and so is
// variables.unsubscribeUrl.
func BindingsForPreview(variables map[string]any) map[string]any {
	b := maps.Clone(variables)
	if b == nil {
		b = map[string]any{}
	}
	if c, ok := b[contactVar].(map[string]any); ok {
		contact := maps.Clone(c)
		if props, ok := c["properties"].(map[string]any); ok {
			for k, v := range props {
				if _, taken := contact[k]; !taken && !contactFields[k] {
					contact[k] = v
				}
			}
		}
		b[contactVar] = contact
	}
	return b
}

// Missing lists, of the dotted variable paths a template reads (its
// requiredVariables), those b does not hold (absent or null): what a
// preview warns renders empty. unsubscribeUrl is left out: a send always
// has it.
func Missing(required []string, b map[string]any) []string {
	var out []string
	for _, path := range required {
		if path == unsubscribeVar {
			continue
		}
		var v any = b
		for part := range strings.SplitSeq(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[part]
		}
		if v == nil {
			out = append(out, path)
		}
	}
	return out
}
