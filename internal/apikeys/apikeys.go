// Package apikeys keeps a tenant's API keys: creation under the
// ten-active-keys limit, listing, revocation (which evicts the key from
// every instance's cache), and the loader the key cache reads through.
package apikeys

import (
	"context"
	"log/slog"
	"strings"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/auth"
	"tidings/internal/ids"
	"tidings/internal/keycache"
	"tidings/internal/store"
	"tidings/internal/tenants"
	"tidings/queries"
)

// MaxActive is how many active keys a tenant may hold.
const MaxActive = 10

// Evicter drops a key from the caches of every API instance, when it is
// revoked and when it is created (an instance may remember its hash as
// unknown); *keycache.Cache implements it.
type Evicter interface {
	// Evict drops the key, known or unknown (a revocation).
	Evict(ctx context.Context, hash []byte) error
	// ForgetUnknown drops only an "unknown" answer for it (a creation): a
	// late message must not drop the new key's entry after a revocation.
	ForgetUnknown(ctx context.Context, hash []byte) error
}

// Store keeps API keys.
type Store struct {
	DB *store.DB
	// Cache is told of every creation and revocation.
	Cache Evicter
	Log   *slog.Logger
}

// Created is a new key with the raw key, which is shown once and never
// stored.
type Created struct {
	queries.ApiKey
	Raw string
}

// Create issues a key named name (trimmed, 1-64 characters). A tenant
// holds at most MaxActive active keys, also under concurrent requests.
func (s *Store) Create(ctx context.Context, tenantID, name string) (Created, error) {
	name = strings.TrimSpace(name)
	if n := utf8.RuneCountInString(name); n < 1 || n > 64 {
		return Created{}, apperr.Invalid("name", "must be 1-64 characters")
	}
	key := auth.GenerateKey()
	out := Created{Raw: key.Raw}
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		// The tenant row lock serialises key creation per tenant, so two
		// concurrent requests cannot both take the last slot.
		if _, err := q.TenantGetForUpdate(ctx, tenantID); err != nil {
			return apperr.Specific(err, apperr.KindNotFound, tenants.NotFound())
		}
		n, err := q.APIKeyCountActive(ctx, tenantID)
		if err != nil {
			return err
		}
		if n >= MaxActive {
			return apperr.Invalid("name", "cannot be added: a tenant may hold at most 10 active API keys; revoke one first")
		}
		out.ApiKey, err = q.APIKeyInsert(ctx, queries.APIKeyInsertParams{
			TenantID: tenantID, ID: ids.New(ids.APIKey), Name: name, KeyPrefix: key.Prefix, KeyHash: key.Hash})
		q.AuditResource(out.ID)
		return err
	})
	if err != nil {
		return out, err
	}
	// A cache that remembers this hash as unknown forgets it. The key is
	// committed whatever happens: a failed publish is logged (an unknown
	// entry lasts seconds at most). No cache (a benchmark's bare store):
	// nothing to tell.
	if s.Cache == nil {
		return out, nil
	}
	if err := s.Cache.ForgetUnknown(ctx, key.Hash); err != nil {
		s.Log.Error("API key created but the eviction was not published", "key_id", out.ID, "err", err)
	}
	return out, nil
}

// List returns the tenant's keys, active and revoked, newest first.
func (s *Store) List(ctx context.Context, tenantID string) ([]queries.ApiKey, error) {
	return s.DB.APIKeyList(ctx, tenantID)
}

// Active reports whether a listed key is still active.
func Active(k queries.ApiKey) bool { return k.RevokedAt == nil }

// Revoke revokes key id; revoking twice is harmless. Every instance's cache
// is told before Revoke returns.
func (s *Store) Revoke(ctx context.Context, tenantID, id string) error {
	var row queries.ApiKey
	err := s.DB.InTx(ctx, func(q *store.Tx) error { // with the request's audit entry
		var err error
		row, err = q.APIKeyRevoke(ctx, queries.APIKeyRevokeParams{TenantID: tenantID, ID: id})
		return err
	})
	if err != nil {
		return apperr.Specific(err, apperr.KindNotFound, apperr.NotFound("NOT_FOUND", "API key"))
	}
	// The revocation is committed whatever happens next: a failed publish
	// only leaves the other instances to drop the key when their entry
	// expires (the cache TTL), so it is logged rather than failed.
	if err := s.Cache.Evict(ctx, row.KeyHash); err != nil {
		s.Log.Error("API key revoked but the eviction was not published", "key_id", row.ID, "err", err)
	}
	return nil
}

// Loader reads API keys by hash from the database for the key cache. An
// unknown key is an error of kind apperr.KindNotFound.
func Loader(db *store.DB) keycache.Loader {
	return func(ctx context.Context, hash []byte) (keycache.Key, error) {
		row, err := db.APIKeyByHash(ctx, hash)
		if err != nil {
			return keycache.Key{}, err
		}
		return keycache.Key{TenantID: row.TenantID, ID: row.ID, Revoked: row.RevokedAt != nil}, nil
	}
}
