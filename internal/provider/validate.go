package provider

import (
	"fmt"
	"net/mail"
	"strings"
	"unicode/utf8"

	"tidings/internal/ids"
)

// allowedHeaders maps the lower-cased names of the extra headers a caller
// may set to their canonical spelling. An allowlist, because a denylist of
// dangerous headers (Bcc, Content-Type, Sender...) fails open.
var allowedHeaders = map[string]string{
	"list-unsubscribe":      HeaderListUnsubscribe,
	"list-unsubscribe-post": HeaderListUnsubscribePost,
}

// maxSubjectBytes keeps a subject well inside SMTP's 998-character line
// limit even after RFC 2047 encoding has folded it.
const maxSubjectBytes = 500

// validate checks msg and returns it with header names canonicalised. Every
// error wraps ErrInvalidMessage and names the offending field, never its
// value (which could be anything a template produced).
func validate(msg Message) (Message, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidMessage, fmt.Sprintf(format, args...))
	}
	// SendID and TenantID become file names, Message-ID local parts and
	// JSON custom_args.
	if !ids.Valid(msg.SendID) {
		return msg, invalid("send id must match %s", ids.Pattern)
	}
	if !ids.Valid(msg.TenantID) {
		return msg, invalid("tenant id must match %s", ids.Pattern)
	}
	if err := bareAddress(msg.From.Address); err != nil {
		return msg, invalid("from address: %v", err)
	}
	if err := headerText(msg.From.Name, 200); err != nil {
		return msg, invalid("from name: %v", err)
	}
	if err := bareAddress(msg.To); err != nil {
		return msg, invalid("to address: %v", err)
	}
	if strings.TrimSpace(msg.Subject) == "" {
		return msg, invalid("subject is required")
	}
	if err := headerText(msg.Subject, maxSubjectBytes); err != nil {
		return msg, invalid("subject: %v", err)
	}
	// The text part may be empty (an HTML-only design derives no text);
	// the message is multipart/alternative all the same.
	if msg.HTML == "" {
		return msg, invalid("an HTML part is required (multipart/alternative)")
	}
	if !utf8.ValidString(msg.Text) || !utf8.ValidString(msg.HTML) {
		return msg, invalid("body is not valid UTF-8")
	}

	headers := make([]Header, 0, len(msg.Headers))
	seen := map[string]string{}
	for _, h := range msg.Headers {
		name, ok := allowedHeaders[strings.ToLower(h.Name)]
		if !ok {
			return msg, invalid("header %q may not be set (allowed: %s, %s)", h.Name, HeaderListUnsubscribe, HeaderListUnsubscribePost)
		}
		if _, dup := seen[name]; dup {
			return msg, invalid("header %s given twice", name)
		}
		// Header values here are URIs in angle brackets or a fixed token:
		// printable ASCII is all they need, and all that is safe unencoded.
		for i := 0; i < len(h.Value); i++ {
			if c := h.Value[i]; c < 0x20 || c > 0x7e {
				return msg, invalid("header %s: value must be printable ASCII without line breaks", name)
			}
		}
		if strings.TrimSpace(h.Value) == "" || len(h.Value) > 900 {
			return msg, invalid("header %s: value must be 1-900 characters", name)
		}
		seen[name] = h.Value
		headers = append(headers, Header{Name: name, Value: h.Value})
	}
	if post, ok := seen[HeaderListUnsubscribePost]; ok {
		if post != ListUnsubscribeOneClick {
			return msg, invalid("header %s must be %q (RFC 8058)", HeaderListUnsubscribePost, ListUnsubscribeOneClick)
		}
		if _, ok := seen[HeaderListUnsubscribe]; !ok {
			return msg, invalid("header %s requires %s", HeaderListUnsubscribePost, HeaderListUnsubscribe)
		}
	}
	msg.Headers = headers
	return msg, nil
}

// bareAddress accepts an addr-spec only: "a@b.example", not "A <a@b.example>"
// nor a list, so a display name cannot sneak in through an address field.
func bareAddress(s string) error {
	if s == "" {
		return fmt.Errorf("is required")
	}
	if strings.ContainsAny(s, "\r\n\x00") {
		return fmt.Errorf("contains a line break or NUL")
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return fmt.Errorf("does not parse (RFC 5322)")
	}
	if a.Name != "" || a.Address != s {
		return fmt.Errorf("must be a bare address without a display name")
	}
	return nil
}

// headerText checks free text that ends up in a header (subject, display
// name): valid UTF-8, no control characters other than tab (CR, LF and NUL
// are what header injection needs; the others have no business in a
// subject), at most max bytes. Non-ASCII is fine: the MIME writer encodes it (RFC 2047).
func headerText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("longer than %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("is not valid UTF-8")
	}
	for _, r := range s {
		if r == '\r' || r == '\n' || r == 0 {
			return fmt.Errorf("contains a line break or NUL")
		}
		if (r < 0x20 && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
			return fmt.Errorf("contains a control character")
		}
	}
	return nil
}

// Validate is validate for providers in their own packages (ses): every
// provider checks every message the same way before it leaves.
func Validate(msg Message) (Message, error) { return validate(msg) }
