package contacts

import (
	"encoding/json"

	"tidings/internal/apperr"
	"tidings/internal/strictjson"
)

// Body is a create or upsert request as sent: the body of POST and PUT
// /api/contacts, and each line of an NDJSON import, decoded with
// strictjson (unknown fields refused). Input judges it; PATCH reads the
// same fields for which were sent.
type Body struct {
	Email      strictjson.Opt[string]                     `json:"email" format:"email" doc:"The contact's address (its identity in the tenant; it cannot change)."`
	UserID     strictjson.Opt[string]                     `json:"userId" max:"256" nullable:"true" doc:"Your own id of the person; null clears it."`
	Properties strictjson.Opt[map[string]json.RawMessage] `json:"properties" values:"PropertyValue" doc:"Custom properties, merged into the contact's: a null value removes that property."`
	Subscribed strictjson.Opt[bool]                       `json:"subscribed"`
	Topics     strictjson.Opt[map[string]*bool]           `json:"topics" doc:"Topic subscriptions by topic id: true subscribes, false unsubscribes, null returns to the topic's default."`
}

// Input validates a create or upsert body.
func (b *Body) Input() (Input, error) {
	var f apperr.Fields
	var in Input
	in.Email = RequiredEmail(&f, b.Email)
	if v, ok := b.UserID.Value(); ok {
		f.Check(ValidUserID(v), "userId", "must be at most 256 characters")
		in.UserID = &v
	}
	if v, ok := b.Subscribed.Value(); ok {
		in.Subscribed = &v
	} else if b.Subscribed.Set {
		f.Add("subscribed", "must be a boolean")
	}
	p, err := ParseProperties(b.Properties.V)
	f.Merge(err)
	in.Properties = p
	in.Topics = b.Topics.V
	return in, f.Err()
}

// RequiredEmail normalises a required email field (trimmed, lower-cased,
// valid), noting in f what is wrong with it.
func RequiredEmail(f *apperr.Fields, v strictjson.Opt[string]) string {
	email, ok := NormalizeEmail(v.V)
	switch {
	case !v.Set || v.Null || v.V == "":
		f.Add("email", "is required")
	case !ok:
		f.Add("email", "must be a valid email address")
	}
	return email
}
