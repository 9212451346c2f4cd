package api

import (
	"context"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/auth"
	"tidings/internal/ids"
	"tidings/internal/keycache"
	"tidings/internal/store"
	"tidings/queries"
)

const maxActiveKeys = 10

type apiKeyCreatedJSON struct {
	KeyID     string `json:"keyId"`
	Name      string `json:"name"`
	KeyPrefix string `json:"keyPrefix"`
	RawKey    string `json:"rawKey"`
	CreatedAt string `json:"createdAt"`
}

type apiKeyJSON struct {
	KeyID     string `json:"keyId"`
	TenantID  string `json:"tenantId"`
	Name      string `json:"name"`
	KeyPrefix string `json:"keyPrefix"`
	Status    string `json:"status"`
	CreatedAt string `json:"createdAt"`
}

type apiKeyCreateReq struct {
	Name *string `json:"name"`
}

func (s *Server) apiKeyCreate(c *fiber.Ctx) error {
	if err := sessionOnly(c); err != nil {
		return err
	}
	var req apiKeyCreateReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return apperr.Invalid("name", "is required")
	}
	name := strings.TrimSpace(*req.Name)
	if n := utf8.RuneCountInString(name); n < 1 || n > 64 {
		return apperr.Invalid("name", "must be 1-64 characters")
	}
	ctx, tid := c.UserContext(), tenantID(c)
	key := auth.GenerateKey()
	var row queries.ApiKey
	err := s.db.Tx(ctx, func(q *queries.Queries) error {
		// The tenant row lock serialises key creation per tenant, so two
		// concurrent requests cannot both take the tenth slot.
		if _, err := q.TenantGetForUpdate(ctx, tid); err != nil {
			return store.NotFound(err, "NOT_FOUND", "tenant")
		}
		n, err := q.APIKeyCountActive(ctx, tid)
		if err != nil {
			return err
		}
		if n >= maxActiveKeys {
			e := apperr.InvalidRequest("a tenant may hold at most %d active API keys; revoke one first", maxActiveKeys)
			e.Details = map[string]any{"fields": map[string]any{"name": []string{"no more than 10 active API keys per tenant"}}}
			return e
		}
		row, err = q.APIKeyInsert(ctx, queries.APIKeyInsertParams{
			TenantID: tid, ID: ids.New(ids.APIKey), Name: name, KeyPrefix: key.Prefix, KeyHash: key.Hash})
		return err
	})
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(apiKeyCreatedJSON{
		KeyID: row.ID, Name: row.Name, KeyPrefix: row.KeyPrefix, RawKey: key.Raw, CreatedAt: formatTime(row.CreatedAt)})
}

func (s *Server) apiKeyList(c *fiber.Ctx) error {
	return s.listAPIKeys(c, tenantID(c))
}

// listAPIKeys is the work of GET /api/api-keys once the tenant is known;
// NewBare serves it without middleware as the benchmark baseline.
func (s *Server) listAPIKeys(c *fiber.Ctx, tenant string) error {
	rows, err := s.db.APIKeyList(c.UserContext(), tenant)
	if err != nil {
		return err
	}
	items := make([]apiKeyJSON, len(rows))
	for i, k := range rows {
		status := "active"
		if k.RevokedAt != nil {
			status = "revoked"
		}
		items[i] = apiKeyJSON{KeyID: k.ID, TenantID: k.TenantID, Name: k.Name, KeyPrefix: k.KeyPrefix,
			Status: status, CreatedAt: formatTime(k.CreatedAt)}
	}
	return c.JSON(fiber.Map{"items": items})
}

func (s *Server) apiKeyRevoke(c *fiber.Ctx) error {
	if err := sessionOnly(c); err != nil {
		return err
	}
	id, err := pathParam(c, "keyId")
	if err != nil {
		return err
	}
	row, err := s.db.APIKeyRevoke(c.UserContext(), queries.APIKeyRevokeParams{TenantID: tenantID(c), ID: id})
	if err != nil {
		return store.NotFound(err, "NOT_FOUND", "API key")
	}
	// The revocation is committed whatever happens next: a failed publish
	// only leaves the other instances to drop the key when their entry
	// expires (the cache TTL), so it is logged rather than failed.
	if err := s.keys.Evict(c.UserContext(), row.KeyHash); err != nil {
		s.log.Error("API key revoked but the eviction was not published", "key_id", row.ID, "err", err)
	}
	return c.SendStatus(http.StatusNoContent)
}

// KeyLoader reads API keys by hash from the database for the key cache.
func KeyLoader(db *store.DB) keycache.Loader {
	return func(ctx context.Context, hash []byte) (keycache.Key, error) {
		row, err := db.APIKeyByHash(ctx, hash)
		if err != nil {
			return keycache.Key{}, err
		}
		return keycache.Key{TenantID: row.TenantID, ID: row.ID, Revoked: row.RevokedAt != nil}, nil
	}
}
