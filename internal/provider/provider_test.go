package provider

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tidings/internal/config"
)

func TestNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		desc     string
		cfg      config.Config
		wantName string
		wantErr  string
	}{
		{desc: "outbox", cfg: config.Config{EmailProvider: "outbox", OutboxDir: filepath.Join(dir, "a", "b")}, wantName: "outbox"},
		{desc: "outbox without a directory", cfg: config.Config{EmailProvider: "outbox"}, wantErr: "OUTBOX_DIR is empty"},
		{desc: "sendgrid", cfg: config.Config{EmailProvider: "sendgrid", SendgridAPIKey: "SG.x", SendgridAPIURL: "http://127.0.0.1:1"}, wantName: "sendgrid"},
		{desc: "sendgrid default URL", cfg: config.Config{EmailProvider: "sendgrid", SendgridAPIKey: "SG.x"}, wantName: "sendgrid"},
		{desc: "sendgrid without key", cfg: config.Config{EmailProvider: "sendgrid"}, wantErr: "SENDGRID_API_KEY is required"},
		{desc: "smtp", cfg: config.Config{EmailProvider: "smtp", SMTPURL: "smtp://u:p@mail.example:2525"}, wantName: "smtp"},
		{desc: "smtps default port", cfg: config.Config{EmailProvider: "smtp", SMTPURL: "smtps://u:p@mail.example"}, wantName: "smtp"},
		{desc: "smtp opportunistic TLS", cfg: config.Config{EmailProvider: "smtp", SMTPURL: "smtp://127.0.0.1:1025?tls=opportunistic"}, wantName: "smtp"},
		{desc: "smtp without TLS", cfg: config.Config{EmailProvider: "smtp", SMTPURL: "smtp://127.0.0.1:1025?tls=none"}, wantName: "smtp"},
		{desc: "smtp bad tls", cfg: config.Config{EmailProvider: "smtp", SMTPURL: "smtp://h:25?tls=maybe"}, wantErr: "tls must be"},
		{desc: "smtp bad scheme", cfg: config.Config{EmailProvider: "smtp", SMTPURL: "http://h:25"}, wantErr: "scheme must be smtp or smtps"},
		{desc: "smtp bad port", cfg: config.Config{EmailProvider: "smtp", SMTPURL: "smtp://h:0"}, wantErr: "bad port"},
		{desc: "smtp without URL", cfg: config.Config{EmailProvider: "smtp"}, wantErr: "SMTP_URL is required"},
		{desc: "unknown", cfg: config.Config{EmailProvider: "mailgun"}, wantErr: "unknown provider"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			p, err := New(&tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New: %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if p.Name() != tt.wantName {
				t.Errorf("Name %q, want %q", p.Name(), tt.wantName)
			}
		})
	}
}

func TestErrorMessageAndClassification(t *testing.T) {
	t.Parallel()
	cause := errors.New("connection reset")
	e := &Error{Provider: "sendgrid", Status: 429, Transient: true, RetryAfter: time.Second, Message: "Too Many Requests", Err: cause}
	if got := e.Error(); got != "sendgrid: status 429 (temporary): Too Many Requests: connection reset" {
		t.Errorf("Error() = %q", got)
	}
	wrapped := errors.Join(errors.New("send"), e)
	if !IsTemporary(wrapped) || !errors.Is(wrapped, cause) {
		t.Error("wrapped *Error loses its classification or cause")
	}
	if IsTemporary(errors.New("other")) || IsTemporary(nil) {
		t.Error("a plain error counts as temporary")
	}
	if got := (&Error{Provider: "smtp"}).Error(); got != "smtp: no response" {
		t.Errorf("Error() = %q", got)
	}
}
