package api

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apikeys"
	"tidings/internal/apperr"
	"tidings/queries"
)

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
	Name *string `json:"name" required:"true" min:"1" max:"64" doc:"A label, 1-64 characters."`
}

func (s *Server) apiKeyCreate(c *fiber.Ctx) error {
	var req apiKeyCreateReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return apperr.Invalid("name", "is required")
	}
	k, err := s.apiKeys.Create(c.UserContext(), tenantID(c), *req.Name)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(apiKeyCreatedJSON{
		KeyID: k.ID, Name: k.Name, KeyPrefix: k.KeyPrefix, RawKey: k.Raw, CreatedAt: formatTime(k.CreatedAt)})
}

func (s *Server) apiKeyList(c *fiber.Ctx) error {
	rows, err := s.apiKeys.List(c.UserContext(), tenantID(c))
	if err != nil {
		return err
	}
	return RenderAPIKeys(c, rows)
}

// RenderAPIKeys answers the list of GET /api/api-keys. It is exported for
// the HTTP benchmark's baseline (bench/bare), which must answer byte for
// byte what this route answers.
func RenderAPIKeys(c *fiber.Ctx, rows []queries.ApiKey) error {
	items := make([]apiKeyJSON, len(rows))
	for i, k := range rows {
		status := "revoked"
		if apikeys.Active(k) {
			status = "active"
		}
		items[i] = apiKeyJSON{KeyID: k.ID, TenantID: k.TenantID, Name: k.Name, KeyPrefix: k.KeyPrefix,
			Status: status, CreatedAt: formatTime(k.CreatedAt)}
	}
	return c.JSON(whole(items))
}

func (s *Server) apiKeyRevoke(c *fiber.Ctx) error {
	id, err := pathParam(c, "keyId")
	if err != nil {
		return err
	}
	if err := s.apiKeys.Revoke(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}
