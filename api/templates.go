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
	Layout            *string  `json:"layout"`
	StrictVariables   bool     `json:"strictVariables"`
	CreatedAt         string   `json:"createdAt"`
	UpdatedAt         string   `json:"updatedAt"`
}

func templateView(t queries.Template, withContent bool) templateJSON {
	v := templateJSON{TemplateID: t.ID, Name: t.Name, Subject: t.Subject, CurrentVersion: t.CurrentVersion,
		Enabled: t.Enabled, DisableReason: t.DisableReason, RequiredVariables: t.RequiredVariables, Topic: t.Topic,
		Layout: t.Layout, StrictVariables: t.StrictVariables, CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt)}
	if withContent {
		v.Content = &t.Content
	}
	return v
}

type templatePutReq struct {
	Name          Opt[string] `json:"name" min:"1" max:"256"`
	Subject       Opt[string] `json:"subject" min:"1" max:"998" doc:"May hold Liquid variables."`
	Content       Opt[string] `json:"content" min:"1" doc:"MJML, or HTML (wrapped in MJML), with Liquid; at most 512 KiB."`
	Enabled       Opt[bool]   `json:"enabled" doc:"Update only: a disabled template sends nothing."`
	DisableReason Opt[string] `json:"disableReason" max:"1000" doc:"Update only: why it was disabled."`
	Topic         Opt[string] `json:"topic" pattern:"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$" nullable:"true" doc:"The topic a contact must not have left for this template to reach them."`
	// Layout names a partial holding {{ content }}; null clears it.
	Layout          Opt[string] `json:"layout" pattern:"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$" nullable:"true" doc:"A partial holding {{ content }}; null clears it."`
	StrictVariables Opt[bool]   `json:"strictVariables" doc:"true refuses a send whose variables lack one the template reads."`
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
	p.Layout, p.SetLayout = r.Layout.Ptr(), r.Layout.Set
	if v, ok := r.StrictVariables.Value(); ok {
		p.StrictVariables = &v
	} else if r.StrictVariables.Set {
		f.Add("strictVariables", "must be a boolean")
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
	return c.Status(upsertStatus(created)).JSON(templateView(t, false))
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
			DisableReason: r.DisableReason, Topic: r.Topic, Layout: r.Layout, StrictVariables: r.StrictVariables, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}, false)
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
	Subject         string `json:"subject"`
	HTML            string `json:"html"`
	Text            string `json:"text"`
	TemplateVersion int32  `json:"templateVersion"`
	// Locale is the tag of the locale version rendered; null for the
	// template's own.
	Locale   *string  `json:"locale"`
	Warnings []string `json:"warnings"`
}

type previewReq struct {
	Variables Opt[map[string]any] `json:"variables"`
	// Locale renders the locale version a contact of this locale gets.
	Locale Opt[string] `json:"locale" doc:"A BCP 47 tag: render the version a contact of this locale gets."`
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
	m, err := s.renderer.Preview(c.UserContext(), tenantID(c), id, req.Variables.V, req.Locale.V)
	if err != nil {
		return err
	}
	return c.JSON(previewJSON{Subject: m.Subject, HTML: m.HTML, Text: m.Text, TemplateVersion: m.Version,
		Locale: m.Locale, Warnings: m.Warnings})
}

// Partials (ADDENDUM 24).

type partialJSON struct {
	PartialID string `json:"partialId"`
	Content   string `json:"content"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
}

func partialView(p queries.Partial) partialJSON {
	return partialJSON{PartialID: p.ID, Content: p.Content, CreatedAt: formatTime(p.CreatedAt), UpdatedAt: formatTime(p.UpdatedAt)}
}

type partialPutReq struct {
	Content Opt[string] `json:"content" required:"true" min:"1" doc:"MJML fragment or HTML with Liquid; at most 512 KiB."`
}

func (s *Server) partialPut(c *fiber.Ctx) error {
	id, err := callerIDParam(c, "partialId")
	if err != nil {
		return err
	}
	var req partialPutReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	content, ok := req.Content.Value()
	if !ok {
		return apperr.Invalid("content", "is required")
	}
	p, created, err := s.templates.PutPartial(c.UserContext(), tenantID(c), id, content)
	if err != nil {
		return err
	}
	return c.Status(upsertStatus(created)).JSON(partialView(p))
}

func (s *Server) partialGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	p, err := s.templates.GetPartial(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(partialView(p))
}

func (s *Server) partialList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.templates.ListPartials(c.UserContext(), tenantID(c), p)
	if err != nil {
		return err
	}
	items := make([]partialJSON, len(rows))
	for i, r := range rows {
		items[i] = partialView(r)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) partialDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.templates.DeletePartial(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// Locale versions of a template (ADDENDUM 24).

type localeJSON struct {
	Locale    string  `json:"locale"`
	Subject   string  `json:"subject"`
	Content   *string `json:"content,omitempty"`
	UpdatedAt string  `json:"updatedAt"`
}

func localeView(l queries.TemplateLocale, withContent bool) localeJSON {
	v := localeJSON{Locale: l.Locale, Subject: l.Subject, UpdatedAt: formatTime(l.UpdatedAt)}
	if withContent {
		v.Content = &l.Content
	}
	return v
}

type localePutReq struct {
	Subject Opt[string] `json:"subject" required:"true" min:"1" max:"998"`
	Content Opt[string] `json:"content" required:"true" min:"1"`
}

func (s *Server) localePut(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	tag, err := pathParam(c, "locale")
	if err != nil {
		return err
	}
	var req localePutReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var f apperr.Fields
	subject, ok := req.Subject.Value()
	f.Check(ok, "subject", "is required")
	content, ok := req.Content.Value()
	f.Check(ok, "content", "is required")
	if err := f.Err(); err != nil {
		return err
	}
	l, created, err := s.templates.PutLocale(c.UserContext(), tenantID(c), id, tag, subject, content)
	if err != nil {
		return err
	}
	return c.Status(upsertStatus(created)).JSON(localeView(l, true))
}

func (s *Server) localeList(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	rows, err := s.templates.Locales(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	items := make([]localeJSON, len(rows))
	for i, l := range rows {
		items[i] = localeView(l, false)
	}
	return c.JSON(whole(items))
}

func (s *Server) localeGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	tag, err := pathParam(c, "locale")
	if err != nil {
		return err
	}
	l, err := s.templates.GetLocale(c.UserContext(), tenantID(c), id, tag)
	if err != nil {
		return err
	}
	return c.JSON(localeView(l, true))
}

func (s *Server) localeDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	tag, err := pathParam(c, "locale")
	if err != nil {
		return err
	}
	if err := s.templates.DeleteLocale(c.UserContext(), tenantID(c), id, tag); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}
