package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/delivery"
	"tidings/internal/ids"
	"tidings/internal/page"
	"tidings/internal/sequences"
	"tidings/queries"
)

// sequenceJSON is the Sequence resource. PUT answers without content and
// steps (the YAML is not echoed) and with warnings when there are some;
// GET and PATCH answer with content and steps; list items carry neither.
type sequenceJSON struct {
	SequenceID   string          `json:"sequenceId"`
	Name         string          `json:"name"`
	Version      int32           `json:"version"`
	Enabled      bool            `json:"enabled"`
	TriggerEvent string          `json:"triggerEvent"`
	Content      *string         `json:"content,omitempty"`
	Steps        json.RawMessage `json:"steps,omitempty"`
	Warnings     []string        `json:"warnings,omitempty"`
	CreatedAt    string          `json:"createdAt"`
	UpdatedAt    string          `json:"updatedAt"`
}

func sequenceView(q queries.Sequence) sequenceJSON {
	return sequenceJSON{SequenceID: q.ID, Name: q.Name, Version: q.Version, Enabled: q.Enabled,
		TriggerEvent: q.TriggerEvent, CreatedAt: formatTime(q.CreatedAt), UpdatedAt: formatTime(q.UpdatedAt)}
}

// sequenceFull is the GET shape: the YAML as stored and the parsed steps.
func sequenceFull(q queries.Sequence) sequenceJSON {
	v := sequenceView(q)
	v.Content, v.Steps = &q.Content, sequences.Steps(q)
	return v
}

// sequencePutReq is the JSON wrapper of a PUT.
type sequencePutReq struct {
	Content Opt[string] `json:"content" required:"true" min:"1" doc:"The YAML definition: name, trigger.event and steps."`
	Name    Opt[string] `json:"name" doc:"Overrides the YAML's name."`
	Enabled Opt[bool]   `json:"enabled" doc:"Takes effect on create only; PATCH enables or disables afterwards."`
}

// sequencePutBody reads a PUT body: the JSON wrapper when the content type is
// JSON, raw YAML otherwise (text/yaml, any other type, or none).
func sequencePutBody(c *fiber.Ctx) (sequences.Put, error) {
	if !strings.Contains(strings.ToLower(c.Get(fiber.HeaderContentType)), "json") {
		// fasthttp reuses the body buffer after the handler: copy it.
		return sequences.Put{Content: append([]byte(nil), c.Body()...)}, nil
	}
	var req sequencePutReq
	if err := decodeJSON(c, &req); err != nil {
		// YAML sent as JSON is the commonest slip: say what to send.
		if body := bytes.TrimSpace(c.Body()); len(body) > 0 && body[0] != '{' {
			return sequences.Put{}, apperr.Invalid("body", "is not valid JSON; to send the sequence as YAML, "+
				"use Content-Type: text/yaml (or the JSON wrapper {\"content\": \"<yaml>\"})")
		}
		return sequences.Put{}, err
	}
	var f apperr.Fields
	var p sequences.Put
	switch v, ok := req.Content.Value(); {
	case ok:
		p.Content = []byte(v)
	case req.Content.Null:
		f.Add("content", "must be a string")
	default:
		f.Add("content", "is required")
	}
	if v, ok := req.Name.Value(); ok {
		p.Name = &v
	} else if req.Name.Set {
		f.Add("name", "must be a string")
	}
	if v, ok := req.Enabled.Value(); ok {
		p.Enabled = &v
	} else if req.Enabled.Set {
		f.Add("enabled", "must be a boolean")
	}
	return p, f.Err()
}

// callerIDParam reads the caller-chosen id of the path (the PUT of a
// template or sequence, ADDENDUM 3); field names it in the error.
func callerIDParam(c *fiber.Ctx, field string) (string, error) {
	id, err := pathParam(c, "id")
	if err != nil {
		return "", err
	}
	if !ids.Valid(id) {
		return "", apperr.Invalid(field, "must match "+ids.Pattern)
	}
	return id, nil
}

func (s *Server) sequencePut(c *fiber.Ctx) error {
	id, err := callerIDParam(c, "sequenceId")
	if err != nil {
		return err
	}
	p, err := sequencePutBody(c)
	if err != nil {
		return err
	}
	out, err := s.sequences.Put(c.UserContext(), tenantID(c), id, p)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	v := sequenceView(out.Sequence)
	v.Warnings = out.Warnings
	return c.Status(status).JSON(v)
}

type sequencePatchReq struct {
	Name         Opt[string] `json:"name" min:"1" pattern:"\\S"`
	Enabled      Opt[bool]   `json:"enabled"`
	TriggerEvent Opt[string] `json:"triggerEvent" min:"1" pattern:"\\S" doc:"A custom event's name (not email.*, the system events)."`
}

func (s *Server) sequencePatch(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req sequencePatchReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var f apperr.Fields
	f.Check(!req.Name.Null, "name", "must be a string")
	f.Check(!req.Enabled.Null, "enabled", "must be a boolean")
	f.Check(!req.TriggerEvent.Null, "triggerEvent", "must be a string")
	if err := f.Err(); err != nil {
		return err
	}
	seq, err := s.sequences.Patch(c.UserContext(), tenantID(c), id,
		sequences.Patch{Name: req.Name.Ptr(), Enabled: req.Enabled.Ptr(), TriggerEvent: req.TriggerEvent.Ptr()})
	if err != nil {
		return err
	}
	return c.JSON(sequenceFull(seq))
}

func (s *Server) sequenceGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	seq, err := s.sequences.Get(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(sequenceFull(seq))
}

func (s *Server) sequenceList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.sequences.List(c.UserContext(), tenantID(c), p)
	if err != nil {
		return err
	}
	items := make([]sequenceJSON, len(rows))
	for i, r := range rows {
		items[i] = sequenceView(queries.Sequence{ID: r.ID, Name: r.Name, Version: r.Version, Enabled: r.Enabled,
			TriggerEvent: r.TriggerEvent, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt})
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) sequenceDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.sequences.Delete(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// sequenceSends is GET /api/sequences/{id}/sends: the send records of the
// sequence's steps, newest first (404 for an unknown sequence).
func (s *Server) sequenceSends(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	if err := s.sequences.Exists(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	rows, next, err := s.sends.List(c.UserContext(), tenantID(c), delivery.Filter{SequenceID: id}, p)
	if err != nil {
		return err
	}
	items := make([]sendJSON, len(rows))
	for i, r := range rows {
		items[i] = sendView(r)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}
