package provider

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		edit func(*Message)
		want string // substring of the error; "" means valid
	}{
		{desc: "valid", edit: func(*Message) {}},
		{desc: "non-ASCII subject and name", edit: func(m *Message) { m.Subject = "Grüße"; m.From.Name = "Müller, Jörg \"JM\"" }},
		{desc: "tab in subject", edit: func(m *Message) { m.Subject = "a\tb" }},
		{desc: "no extra headers", edit: func(m *Message) { m.Headers = nil }},
		{desc: "header name case is canonicalised", edit: func(m *Message) { m.Headers = []Header{{Name: "list-unsubscribe", Value: "<mailto:u@x.example>"}} }},
		{desc: "subject CRLF injection", edit: func(m *Message) { m.Subject = "Grüße\r\nBcc: x@evil.com" }, want: "subject: contains a line break"},
		{desc: "subject bare LF", edit: func(m *Message) { m.Subject = "Hi\nBcc: x@evil.com" }, want: "subject: contains a line break"},
		{desc: "subject bare CR", edit: func(m *Message) { m.Subject = "Hi\rBcc: x@evil.com" }, want: "subject: contains a line break"},
		{desc: "subject NUL", edit: func(m *Message) { m.Subject = "Hi\x00" }, want: "subject: contains a line break or NUL"},
		{desc: "subject other control", edit: func(m *Message) { m.Subject = "Hi\x1b[31m" }, want: "subject: contains a control character"},
		{desc: "subject unicode line separator", edit: func(m *Message) { m.Subject = "Hi\u2028Bcc: x" }, want: "subject: contains a control character"},
		{desc: "subject invalid UTF-8", edit: func(m *Message) { m.Subject = "Hi \xff" }, want: "subject: is not valid UTF-8"},
		{desc: "subject empty", edit: func(m *Message) { m.Subject = "  " }, want: "subject is required"},
		{desc: "subject too long", edit: func(m *Message) { m.Subject = strings.Repeat("x", 501) }, want: "subject: longer than"},
		{desc: "from name injection", edit: func(m *Message) { m.From.Name = "Acme\r\nBcc: x@evil.com" }, want: "from name: contains a line break"},
		{desc: "from address with name", edit: func(m *Message) { m.From.Address = "Evil <support@acme.example>" }, want: "from address: must be a bare address"},
		{desc: "from address injection", edit: func(m *Message) { m.From.Address = "a@acme.example\r\nBcc: x@evil.com" }, want: "from address: contains a line break"},
		{desc: "from address missing", edit: func(m *Message) { m.From.Address = "" }, want: "from address: is required"},
		{desc: "to address list", edit: func(m *Message) { m.To = "a@example.com, b@example.com" }, want: "to address: "},
		{desc: "to address garbage", edit: func(m *Message) { m.To = "not an address" }, want: "to address: does not parse"},
		{desc: "to address LF", edit: func(m *Message) { m.To = "a@example.com\nBcc: x@evil.com" }, want: "to address: contains a line break"},
		{desc: "no html part", edit: func(m *Message) { m.HTML = "" }, want: "multipart/alternative"},
		{desc: "header not allowed", edit: func(m *Message) { m.Headers = []Header{{Name: "Bcc", Value: "x@evil.com"}} }, want: `header "Bcc" may not be set`},
		{desc: "content-type header not allowed", edit: func(m *Message) { m.Headers = []Header{{Name: "Content-Type", Value: "text/plain"}} }, want: "may not be set"},
		{desc: "header value CRLF", edit: func(m *Message) { m.Headers[0].Value = "<https://x.example>\r\nBcc: x@evil.com" }, want: "printable ASCII without line breaks"},
		{desc: "header value non-ASCII", edit: func(m *Message) { m.Headers[0].Value = "<https://ü.example>" }, want: "printable ASCII"},
		{desc: "header twice", edit: func(m *Message) {
			m.Headers = append(m.Headers, Header{Name: "LIST-UNSUBSCRIBE", Value: "<https://x.example>"})
		}, want: "given twice"},
		{desc: "header empty value", edit: func(m *Message) { m.Headers[0].Value = " " }, want: "1-900 characters"},
		{desc: "unsubscribe-post wrong value", edit: func(m *Message) { m.Headers[1].Value = "yes" }, want: "RFC 8058"},
		{desc: "unsubscribe-post alone", edit: func(m *Message) { m.Headers = m.Headers[1:] }, want: "requires List-Unsubscribe"},
		{desc: "send id missing", edit: func(m *Message) { m.SendID = "" }, want: "send id"},
		{desc: "send id path", edit: func(m *Message) { m.SendID = "../etc/passwd" }, want: "send id"},
		{desc: "tenant id with newline", edit: func(m *Message) { m.TenantID = "ten_1\n" }, want: "tenant id"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			got, err := validate(testMessage(tt.edit))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				for _, h := range got.Headers {
					if _, ok := allowedHeaders[strings.ToLower(h.Name)]; !ok || allowedHeaders[strings.ToLower(h.Name)] != h.Name {
						t.Errorf("header name %q not canonical", h.Name)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("validate accepted the message, want error containing %q", tt.want)
			}
			if !errors.Is(err, ErrInvalidMessage) {
				t.Errorf("error %v does not wrap ErrInvalidMessage", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "evil.com") {
				t.Errorf("error %q repeats the offending value", err)
			}
			if IsTemporary(err) {
				t.Error("a validation error must not be temporary")
			}
		})
	}
}
