package tenants

import (
	"context"
	"slices"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/store"
	"tidings/queries"
)

// Whitelist returns the addresses that may receive email while the tenant
// is in sandbox.
func (s *Store) Whitelist(ctx context.Context, id string) ([]string, error) {
	t, err := s.Get(ctx, id)
	return t.SandboxWhitelist, err
}

// AddToWhitelist adds an address, trimmed and lower-cased; one already
// there changes nothing. The list holds at most MaxWhitelist addresses.
func (s *Store) AddToWhitelist(ctx context.Context, id, email string) ([]string, error) {
	email, ok := contacts.NormalizeEmail(email)
	if !ok {
		return nil, apperr.Invalid("email", "must be a valid email address")
	}
	return s.editWhitelist(ctx, id, email, func(list []string) ([]string, error) {
		if slices.Contains(list, email) {
			return list, nil
		}
		if len(list) >= MaxWhitelist {
			return nil, apperr.Invalid("email", "cannot be added: the sandbox whitelist is full (50 entries)")
		}
		return append(list, email), nil
	})
}

// RemoveFromWhitelist removes an address, compared as stored (trimmed,
// lower-cased); removing one that is not there changes nothing.
func (s *Store) RemoveFromWhitelist(ctx context.Context, id, email string) ([]string, error) {
	email, _ = contacts.NormalizeEmail(email)
	return s.editWhitelist(ctx, id, email, func(list []string) ([]string, error) {
		return slices.DeleteFunc(list, func(e string) bool { return e == email }), nil
	})
}

// editWhitelist applies edit under the tenant row lock, so concurrent adds
// cannot exceed the limit or lose each other's entries. email is the entry
// edited, the resource of the request's audit entry.
func (s *Store) editWhitelist(ctx context.Context, id, email string, edit func([]string) ([]string, error)) ([]string, error) {
	var out []string
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		q.AuditResource(email)
		t, err := q.TenantGetForUpdate(ctx, id)
		if err != nil {
			return notFound(err)
		}
		next, err := edit(slices.Clone(t.SandboxWhitelist))
		if err != nil {
			return err
		}
		if slices.Equal(next, t.SandboxWhitelist) {
			out = next
			return nil
		}
		out, err = q.TenantSetWhitelist(ctx, queries.TenantSetWhitelistParams{ID: t.ID, Emails: next})
		return err
	})
	return out, err
}
