package api

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/topics"
	"tidings/queries"
)

type topicJSON struct {
	TopicID     string `json:"topicId"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Default     string `json:"default"`
	CreatedAt   string `json:"createdAt"`
	UpdatedAt   string `json:"updatedAt"`
}

func topicView(t queries.Topic) topicJSON {
	return topicJSON{TopicID: t.ID, Name: t.Name, Description: t.Description, Default: t.DefaultMode,
		CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt)}
}

// topicReq is a create or a PATCH; a PATCH may not name topicId or
// default (a topic's default is fixed: see topics.Store.Update).
type topicReq struct {
	TopicID     Opt[string] `json:"topicId" pattern:"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"`
	Name        Opt[string] `json:"name" min:"1" max:"200"`
	Description Opt[string] `json:"description" max:"1000"`
	Default     Opt[string] `json:"default" enum:"opt_in,opt_out" doc:"Whether a contact who chose nothing gets the topic's mail."`
}

func (r topicReq) validate(create bool) (topics.Input, error) {
	in := topics.Input{Name: r.Name.Sent(), Description: r.Description.Sent()}
	if create {
		in.ID, in.Default = r.TopicID.Sent(), r.Default.Sent()
		return in, nil
	}
	var f apperr.Fields
	f.Check(!r.TopicID.Set, "topicId", "cannot be changed")
	f.Check(!r.Default.Set, "default", "cannot be changed")
	return in, f.Err()
}

func (s *Server) topicCreate(c *fiber.Ctx) error {
	var req topicReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate(true)
	if err != nil {
		return err
	}
	t, err := s.topics.Create(c.UserContext(), tenantID(c), in)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(topicView(t))
}

func (s *Server) topicList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.topics.List(c.UserContext(), tenantID(c), p)
	if err != nil {
		return err
	}
	items := make([]topicJSON, len(rows))
	for i, r := range rows {
		items[i] = topicView(r)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) topicGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	t, err := s.topics.Get(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(topicView(t))
}

func (s *Server) topicUpdate(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req topicReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate(false)
	if err != nil {
		return err
	}
	t, err := s.topics.Update(c.UserContext(), tenantID(c), id, in)
	if err != nil {
		return err
	}
	return c.JSON(topicView(t))
}

func (s *Server) topicDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.topics.Delete(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}
