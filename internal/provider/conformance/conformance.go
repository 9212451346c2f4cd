// Package conformance is the test every provider passes (ADDENDUM 22).
package conformance

import (
	"context"
	"errors"
	"testing"

	"tidings/internal/provider"
)

// Subject is one provider under the shared conformance test: Accepting
// builds it against a server (or directory) that takes messages;
// Unreachable builds it against one where nothing can be written.
type Subject struct {
	Name        string
	Accepting   func(t *testing.T) provider.Provider
	Unreachable func(t *testing.T) provider.Provider
}

// Conformance checks what the pool relies on of every provider (ADDENDUM
// 12, 22): its name; an accepted message has an id; a message with an
// injected header never leaves (ErrInvalidMessage, not a provider error,
// so the pool does not try the next); a provider that cannot be reached is
// Down, temporary, and not in doubt (the pool moves the message on).
func Run(t *testing.T, s Subject) {
	msg := provider.Message{SendID: "snd_conformance", TenantID: "ten_conformance",
		From: provider.Address{Name: "Acme", Address: "hi@acme.test"}, To: "c@example.com",
		Subject: "Conformance", HTML: "<p>Hi</p>", Text: "Hi"}
	t.Run(s.Name+"/accepts", func(t *testing.T) {
		p := s.Accepting(t)
		if p.Name() != s.Name {
			t.Fatalf("Name() = %q, want %q", p.Name(), s.Name)
		}
		id, err := p.Send(context.Background(), msg)
		if err != nil || id == "" {
			t.Fatalf("accepted message: id %q, err %v", id, err)
		}
	})
	t.Run(s.Name+"/invalid", func(t *testing.T) {
		bad := msg
		bad.Subject = "Hi\r\nBcc: victim@example.com"
		_, err := s.Accepting(t).Send(context.Background(), bad)
		var pe *provider.Error
		if !errors.Is(err, provider.ErrInvalidMessage) || errors.As(err, &pe) {
			t.Fatalf("header injection: %v, want ErrInvalidMessage and no provider error", err)
		}
	})
	t.Run(s.Name+"/unreachable", func(t *testing.T) {
		_, err := s.Unreachable(t).Send(context.Background(), msg)
		var pe *provider.Error
		if !errors.As(err, &pe) || !pe.Down || pe.InDoubt || !pe.Temporary() || pe.Provider != s.Name {
			t.Fatalf("unreachable: %#v, want a temporary *Error, Down, not in doubt, of %s", err, s.Name)
		}
	})
}
