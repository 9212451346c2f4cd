package api

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/page"
	"tidings/queries"
)

type suppressionJSON struct {
	Email     string  `json:"email"`
	Reason    string  `json:"reason"`
	CreatedAt string  `json:"createdAt"`
	SendID    *string `json:"sendId"`
	Note      string  `json:"note"`
}

func suppressionView(s queries.Suppression) suppressionJSON {
	return suppressionJSON{Email: s.Email, Reason: s.Reason, CreatedAt: formatTime(s.CreatedAt), SendID: s.SendID, Note: s.Note}
}

type suppressionReq struct {
	Email Opt[string] `json:"email" required:"true" format:"email"`
	Note  Opt[string] `json:"note" max:"1000"`
}

func (s *Server) suppressionList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.suppressions.List(c.UserContext(), tenantID(c), c.Query("reason"), p)
	if err != nil {
		return err
	}
	items := make([]suppressionJSON, len(rows))
	for i, r := range rows {
		items[i] = suppressionView(r)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

// suppressionAdd suppresses an email by hand: 201 with the entry, or 200
// with the existing one when the email was on the list already.
func (s *Server) suppressionAdd(c *fiber.Ctx) error {
	var req suppressionReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	sup, created, err := s.suppressions.Add(c.UserContext(), tenantID(c), req.Email.V, req.Note.Ptr())
	if err != nil {
		return err
	}
	return c.Status(upsertStatus(created)).JSON(suppressionView(sup))
}

func (s *Server) suppressionRemove(c *fiber.Ctx) error {
	email, err := pathParam(c, "email")
	if err != nil {
		return err
	}
	if err := s.suppressions.Remove(c.UserContext(), tenantID(c), email); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}
