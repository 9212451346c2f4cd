package api

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/templates"
	"tidings/queries"
)

type templateJSON struct {
	TemplateID        string   `json:"templateId"`
	Name              string   `json:"name"`
	Subject           string   `json:"subject"`
	Content           *string  `json:"content,omitempty"`
	CurrentVersion    int32    `json:"currentVersion"`
	Enabled           bool     `json:"enabled"`
	DisableReason     *string  `json:"disableReason,omitempty"`
	RequiredVariables []string `json:"requiredVariables"`
	Topic             *string  `json:"topic"`
	CreatedAt         string   `json:"createdAt"`
	UpdatedAt         string   `json:"updatedAt"`
}

func templateView(t queries.Template, withContent bool) templateJSON {
	v := templateJSON{TemplateID: t.ID, Name: t.Name, Subject: t.Subject, CurrentVersion: t.CurrentVersion,
		Enabled: t.Enabled, DisableReason: t.DisableReason, RequiredVariables: t.RequiredVariables, Topic: t.Topic,
		CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt)}
	if withContent {
		v.Content = &t.Content
	}
	return v
}

type templatePutReq struct {
	Name          Opt[string] `json:"name"`
	Subject       Opt[string] `json:"subject"`
	Content       Opt[string] `json:"content"`
	Enabled       Opt[bool]   `json:"enabled"`
	DisableReason Opt[string] `json:"disableReason"`
	Topic         Opt[string] `json:"topic"`
}

func (r templatePutReq) validate() (templates.Put, error) {
	var f apperr.Fields
	var p templates.Put
	str := func(o Opt[string], name string) *string {
		if !o.Set {
			return nil
		}
		if o.Null {
			f.Add(name, "must be a string")
			return nil
		}
		v := o.V
		return &v
	}
	p.Name, p.Subject, p.Content, p.DisableReason = str(r.Name, "name"), str(r.Subject, "subject"),
		str(r.Content, "content"), str(r.DisableReason, "disableReason")
	// topic: a topic id, or null for none.
	p.Topic, p.SetTopic = r.Topic.Ptr(), r.Topic.Set
	if v, ok := r.Enabled.Value(); ok {
		p.Enabled = &v
	} else if r.Enabled.Set {
		f.Add("enabled", "must be a boolean")
	}
	return p, f.Err()
}

func (s *Server) templatePut(c *fiber.Ctx) error {
	id, err := callerIDParam(c, "templateId")
	if err != nil {
		return err
	}
	var req templatePutReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	p, err := req.validate()
	if err != nil {
		return err
	}
	t, created, err := s.templates.Put(c.UserContext(), tenantID(c), id, p)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.Status(status).JSON(templateView(t, false))
}

func (s *Server) templateGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	t, err := s.templates.Get(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(templateView(t, true))
}

func (s *Server) templateList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.templates.List(c.UserContext(), tenantID(c), p)
	if err != nil {
		return err
	}
	items := make([]templateJSON, len(rows))
	for i, r := range rows {
		items[i] = templateView(queries.Template{TenantID: r.TenantID, ID: r.ID, Name: r.Name, Subject: r.Subject,
			RequiredVariables: r.RequiredVariables, CurrentVersion: r.CurrentVersion, Enabled: r.Enabled,
			DisableReason: r.DisableReason, Topic: r.Topic, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}, false)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) templateDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.templates.Delete(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

func (s *Server) templateVersions(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	rows, err := s.templates.Versions(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	items := make([]templateVersionJSON, len(rows))
	for i, v := range rows {
		items[i] = templateVersionJSON{Version: v.Version, Subject: v.Subject, UpdatedAt: formatTime(v.CreatedAt)}
	}
	return c.JSON(whole(items))
}

type templateVersionJSON struct {
	Version   int32  `json:"version"`
	Subject   string `json:"subject"`
	UpdatedAt string `json:"updatedAt"`
}

type previewJSON struct {
	Subject         string   `json:"subject"`
	HTML            string   `json:"html"`
	Text            string   `json:"text"`
	TemplateVersion int32    `json:"templateVersion"`
	Warnings        []string `json:"warnings"`
}

type previewReq struct {
	Variables Opt[map[string]any] `json:"variables"`
}

func (s *Server) templatePreview(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req previewReq
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	m, version, warnings, err := s.renderer.Preview(c.UserContext(), tenantID(c), id, req.Variables.V)
	if err != nil {
		return err
	}
	return c.JSON(previewJSON{Subject: m.Subject, HTML: m.HTML, Text: m.Text, TemplateVersion: version,
		Warnings: warnings})
}
