package provider

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"
)

// testMessage returns a valid message; edits adjust it for one case.
func testMessage(edits ...func(*Message)) Message {
	m := Message{
		SendID:   "snd_01jabcdefghjkmnpqrstvwxyz0",
		TenantID: "ten_01jabcdefghjkmnpqrstvwxyz0",
		From:     Address{Name: "Acme Support", Address: "support@acme.example"},
		To:       "ada@example.com",
		Subject:  "Your receipt",
		HTML:     `<p>Hello <a href="https://t.example/t/c/abc">Ada</a></p>`,
		Text:     "Hello Ada\nhttps://t.example/t/c/abc",
		Headers: []Header{
			{Name: HeaderListUnsubscribe, Value: "<https://t.example/t/u/tok>"},
			{Name: HeaderListUnsubscribePost, Value: ListUnsubscribeOneClick},
		},
	}
	for _, e := range edits {
		e(&m)
	}
	return m
}

// parsedMail is an RFC 5322 message taken apart the way a mail client
// would: the standard library's net/mail and mime/multipart, not go-mail.
type parsedMail struct {
	Header    mail.Header
	MediaType string
	Subject   string // RFC 2047 decoded
	From      *mail.Address
	Parts     []parsedPart
}

type parsedPart struct {
	ContentType string
	Body        string // transfer-decoded
}

func parseMail(t *testing.T, raw []byte) parsedMail {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("net/mail cannot read the message: %v\n%s", err, raw)
	}
	var p parsedMail
	p.Header = m.Header
	dec := new(mime.WordDecoder)
	if p.Subject, err = dec.DecodeHeader(m.Header.Get("Subject")); err != nil {
		t.Fatalf("subject: %v", err)
	}
	froms, err := m.Header.AddressList("From")
	if err != nil || len(froms) != 1 {
		t.Fatalf("From %q: %v", m.Header.Get("From"), err)
	}
	p.From = froms[0]
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil {
		t.Fatalf("Content-Type %q: %v", m.Header.Get("Content-Type"), err)
	}
	p.MediaType = mt
	if !strings.HasPrefix(mt, "multipart/") {
		t.Fatalf("Content-Type %q, want multipart", mt)
	}
	r := multipart.NewReader(m.Body, params["boundary"])
	for {
		part, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("multipart: %v", err)
		}
		b, err := io.ReadAll(part)
		if err != nil {
			t.Fatalf("part body: %v", err)
		}
		ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		p.Parts = append(p.Parts, parsedPart{ContentType: ct, Body: string(b)})
	}
	return p
}

// checkAlternative asserts the shape every message must have: one
// multipart/alternative with the text part, then the HTML part, and a
// Message-ID in angle brackets equal to the id Send returned.
func checkAlternative(t *testing.T, p parsedMail, msg Message, messageID string) {
	t.Helper()
	if p.MediaType != "multipart/alternative" {
		t.Errorf("media type %q, want multipart/alternative", p.MediaType)
	}
	if len(p.Parts) != 2 || p.Parts[0].ContentType != "text/plain" || p.Parts[1].ContentType != "text/html" {
		t.Fatalf("parts %+v, want text/plain then text/html", p.Parts)
	}
	norm := func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
	if got := norm(p.Parts[0].Body); got != msg.Text {
		t.Errorf("text part %q, want %q", got, msg.Text)
	}
	if got := norm(p.Parts[1].Body); got != msg.HTML {
		t.Errorf("html part %q, want %q", got, msg.HTML)
	}
	if got := p.Header.Get("Message-Id"); got != "<"+messageID+">" || messageID == "" {
		t.Errorf("Message-ID %q, Send returned %q", got, messageID)
	}
	if p.Subject != msg.Subject {
		t.Errorf("subject %q, want %q", p.Subject, msg.Subject)
	}
	if p.From.Name != msg.From.Name || p.From.Address != msg.From.Address {
		t.Errorf("from %+v, want %+v", p.From, msg.From)
	}
	if got := p.Header.Get("To"); !strings.Contains(got, msg.To) {
		t.Errorf("To %q, want %s", got, msg.To)
	}
	for _, h := range msg.Headers {
		if got := p.Header.Get(h.Name); got != h.Value {
			t.Errorf("%s %q, want %q", h.Name, got, h.Value)
		}
	}
	if p.Header.Get("Date") == "" {
		t.Error("no Date header")
	}
}
