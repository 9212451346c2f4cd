package provider

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"tidings/internal/config"
)

func newTestOutbox(t *testing.T, now func() time.Time) (Provider, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "outbox") // New creates it
	opts := []Option{}
	if now != nil {
		opts = append(opts, WithClock(now))
	}
	p, err := New(&config.Config{EmailProvider: "outbox", OutboxDir: dir}, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p, dir
}

func TestOutboxWritesParsableMultipartAlternative(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc string
		edit func(*Message)
	}{
		{desc: "ASCII", edit: func(*Message) {}},
		{desc: "non-ASCII subject, name and bodies", edit: func(m *Message) {
			m.Subject = "Grüße aus Köln"
			m.From.Name = "Jörg Müller, Acme"
			m.Text = "Grüße\nLine two with a very long line " + strings.Repeat("wörds ", 40)
			m.HTML = "<p>Grüße</p>\n<p>" + strings.Repeat("lång ", 40) + "</p>"
		}},
		{desc: "no extra headers", edit: func(m *Message) { m.Headers = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			p, dir := newTestOutbox(t, nil)
			msg := testMessage(tt.edit)
			id, err := p.Send(context.Background(), msg)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			if len(files) != 1 {
				t.Fatalf("files %v, want one .eml", files)
			}
			raw, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			parsed := parseMail(t, raw)
			checkAlternative(t, parsed, msg, id)
			if id != msg.SendID+"@acme.example" {
				t.Errorf("message id %q", id)
			}
			if parsed.Header.Get("User-Agent") != "" || parsed.Header.Get("X-Mailer") != "" {
				t.Error("the library advertises itself")
			}
		})
	}
}

func TestOutboxEncodesNonASCIISubject(t *testing.T) {
	t.Parallel()
	p, dir := newTestOutbox(t, nil)
	if _, err := p.Send(context.Background(), testMessage(func(m *Message) { m.Subject = "Grüße"; m.From.Name = "Jörg" })); err != nil {
		t.Fatalf("Send: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.eml"))
	raw, _ := os.ReadFile(files[0])
	head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	for _, line := range strings.Split(head, "\r\n") {
		for i := 0; i < len(line); i++ {
			if line[i] > 0x7e {
				t.Fatalf("raw 8-bit byte in header line %q", line)
			}
		}
	}
	if !regexp.MustCompile(`(?m)^Subject: =\?UTF-8\?[qQbB]\?`).MatchString(head) {
		t.Errorf("subject not RFC 2047 encoded:\n%s", head)
	}
}

func TestOutboxFileNamesSortByTime(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 23, 20, 30, 12, 123e6, time.FixedZone("CET", 3600))
	var tick time.Duration
	p, dir := newTestOutbox(t, func() time.Time { tick += 1500 * time.Millisecond; return base.Add(tick) })
	var ids []string
	for i := range 3 {
		m := testMessage(func(m *Message) { m.SendID = "snd_" + string(rune('c'-i)) })
		if _, err := p.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.SendID)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	want := []string{
		"20261123T193013.623Z-" + ids[0] + ".eml",
		"20261123T193015.123Z-" + ids[1] + ".eml",
		"20261123T193016.623Z-" + ids[2] + ".eml",
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("files %v, want %v (UTC, sorted by time, no temporaries left)", names, want)
	}
}

func TestOutboxRejectsInjectionAndWritesNothing(t *testing.T) {
	t.Parallel()
	p, dir := newTestOutbox(t, nil)
	_, err := p.Send(context.Background(), testMessage(func(m *Message) { m.Subject = "Grüße\r\nBcc: x@evil.com" }))
	if !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("Send: %v, want ErrInvalidMessage", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("outbox holds %d files after a rejected message", len(entries))
	}
}

func TestOutboxUnwritableIsTemporary(t *testing.T) {
	t.Parallel()
	p, dir := newTestOutbox(t, nil)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_, err := p.Send(context.Background(), testMessage())
	var pe *Error
	if !errors.As(err, &pe) || !pe.Temporary() || pe.Provider != "outbox" {
		t.Fatalf("Send into a missing directory: %v, want a temporary *Error", err)
	}
}
