package tracking

import (
	_ "embed"
	"html/template"
	"io"
)

//go:embed unsubscribe.html
var unsubscribeHTML string

var unsubscribePage = template.Must(template.New("unsubscribe").Parse(unsubscribeHTML))

// UnsubscribePage is what the GET /t/u/<token> page shows: a small
// preference page with no script, whose forms post to the token's own URL
// (the signed token in the path is what makes a POST valid). Action is the
// unsubscribe URL itself, so the form's POST is the same request as an
// RFC 8058 one-click POST (body List-Unsubscribe=One-Click) and one handler
// serves both.
type UnsubscribePage struct {
	Action string
	// Done shows the confirmation instead of the form (after the POST, or
	// for a contact that is already unsubscribed).
	Done bool
	// Sender is who the mail came from (the send's sender, else the
	// tenant's name) and Email the address it went to; either may be "".
	// Both are escaped as HTML text.
	Sender, Email string
	// Invalid shows that the link is not valid (a tampered token, a
	// contact that is gone) instead of the form.
	Invalid bool
	// Topic is the name of the message's topic: a first form leaves that
	// topic only (the RFC 8058 one-click POST does the same). "" for a
	// message without a topic, whose one-click leaves everything.
	Topic string
	// Topics are the tenant's topics with the contact's subscription to
	// each: a form saves them all (checked: subscribed).
	Topics []TopicChoice
	// Left names the topic just left; Saved says the preferences were
	// just saved.
	Left  string
	Saved bool
}

// TopicChoice is one checkbox of the preference form.
type TopicChoice struct {
	ID, Name, Description string
	Subscribed            bool
}

// RenderUnsubscribePage writes the page. It loads nothing from elsewhere,
// so the handler can serve it with a strict Content-Security-Policy
// (default-src 'none'; style-src 'unsafe-inline'; form-action 'self').
func RenderUnsubscribePage(w io.Writer, p UnsubscribePage) error {
	return unsubscribePage.Execute(w, p)
}
