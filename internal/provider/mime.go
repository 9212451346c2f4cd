package provider

import (
	"net/mail"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
	"golang.org/x/net/idna"
)

// buildMIME turns a validated message into a go-mail message: the one
// RFC 5322 builder shared by the smtp and outbox providers, so what the
// developer sees in the outbox is what an SMTP relay receives.
//
// go-mail writes multipart/alternative (text first, HTML last, as RFC 2046
// wants the preferred part last), quoted-printable bodies in UTF-8, and
// RFC 2047 encoded words for a non-ASCII subject or display name.
func buildMIME(msg Message, messageID string, date time.Time) *gomail.Msg {
	m := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	m.FromMailAddress(&mail.Address{Name: msg.From.Name, Address: msg.From.Address})
	m.ToMailAddress(&mail.Address{Address: msg.To})
	m.Subject(msg.Subject)
	m.SetMessageIDWithValue(messageID)
	m.SetDateWithValue(date)
	for _, h := range msg.Headers {
		// Validated as printable ASCII, so no encoding is wanted; the
		// preformatted setter keeps the value byte for byte.
		m.SetGenHeaderPreformatted(gomail.Header(h.Name), h.Value)
	}
	m.SetBodyString(gomail.TypeTextPlain, msg.Text)
	m.AddAlternativeString(gomail.TypeTextHTML, msg.HTML)
	return m
}

// messageIDFor derives the Message-ID (without angle brackets) from the
// send id and the sender's domain: unique because send ids are, and the
// same on a retry of the same send, so receivers can drop a duplicate that
// an at-least-once retry produced.
func messageIDFor(msg Message) string {
	domain := msg.From.Address[strings.LastIndexByte(msg.From.Address, '@')+1:]
	if ascii, err := idna.Lookup.ToASCII(domain); err == nil && ascii != "" {
		domain = ascii
	} else {
		domain = "tidings.invalid"
	}
	return msg.SendID + "@" + strings.ToLower(domain)
}
