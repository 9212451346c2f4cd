package api

import (
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/domains"
	"tidings/internal/page"
	"tidings/queries"
)

// domainJSON is the Domain resource (API.md section 2). DNSRecords is left
// out of list items.
type domainJSON struct {
	Domain         string              `json:"domain"`
	Status         string              `json:"status"`
	SendingEnabled bool                `json:"sendingEnabled"`
	HealthStatus   string              `json:"healthStatus"`
	DKIMTokens     []string            `json:"dkimTokens"`
	DNSRecords     []domains.DNSRecord `json:"dnsRecords,omitempty"`
	VerifiedAt     *string             `json:"verifiedAt"`
	CreatedAt      string              `json:"createdAt"`
	LastCheckedAt  *string             `json:"lastCheckedAt"`
}

// domainView renders d; withRecords adds the DNS records to publish.
func (s *Server) domainView(d queries.Domain, withRecords bool) domainJSON {
	v := domainJSON{Domain: d.Domain, Status: d.Status, SendingEnabled: d.SendingEnabled,
		HealthStatus: d.HealthStatus, DKIMTokens: d.DkimTokens, VerifiedAt: formatTimePtr(d.VerifiedAt),
		CreatedAt: formatTime(d.CreatedAt), LastCheckedAt: formatTimePtr(d.LastCheckedAt)}
	if v.DKIMTokens == nil {
		v.DKIMTokens = []string{}
	}
	if withRecords {
		v.DNSRecords = s.domains.Records(d)
	}
	return v
}

// domainCheckedJSON is the answer of POST /verify: the domain, its records
// and what the check found.
type domainCheckedJSON struct {
	domainJSON
	Message string `json:"message"`
}

type domainCreateReq struct {
	Domain string `json:"domain" required:"true" min:"1" max:"253" doc:"A domain name (mail.example.com), not an IP address."`
}

type domainUpdateReq struct {
	SendingEnabled Opt[bool] `json:"sendingEnabled" required:"true"`
}

func (r domainUpdateReq) validate() (bool, error) {
	if !r.SendingEnabled.Set {
		return false, apperr.AtLeastOne("sendingEnabled")
	}
	v, ok := r.SendingEnabled.Value()
	if !ok {
		return false, apperr.Invalid("sendingEnabled", "must be a boolean")
	}
	return v, nil
}

func (s *Server) domainCreate(c *fiber.Ctx) error {
	var req domainCreateReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	d, err := s.domains.Create(c.UserContext(), tenantID(c), req.Domain)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(s.domainView(d, true))
}

func (s *Server) domainList(c *fiber.Ctx) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.domains.List(c.UserContext(), tenantID(c), p)
	if err != nil {
		return err
	}
	items := make([]domainJSON, len(rows))
	for i, d := range rows {
		items[i] = s.domainView(d, false)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) domainGet(c *fiber.Ctx) error {
	name, err := pathParam(c, "domain")
	if err != nil {
		return err
	}
	d, err := s.domains.Get(c.UserContext(), tenantID(c), name)
	if err != nil {
		return err
	}
	return c.JSON(s.domainView(d, true))
}

func (s *Server) domainUpdate(c *fiber.Ctx) error {
	name, err := pathParam(c, "domain")
	if err != nil {
		return err
	}
	var req domainUpdateReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	enabled, err := req.validate()
	if err != nil {
		return err
	}
	d, err := s.domains.SetSendingEnabled(c.UserContext(), tenantID(c), name, enabled)
	if err != nil {
		return err
	}
	return c.JSON(s.domainView(d, true))
}

func (s *Server) domainDelete(c *fiber.Ctx) error {
	name, err := pathParam(c, "domain")
	if err != nil {
		return err
	}
	if err := s.domains.Delete(c.UserContext(), tenantID(c), name); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

func (s *Server) domainVerify(c *fiber.Ctx) error {
	name, err := pathParam(c, "domain")
	if err != nil {
		return err
	}
	checked, err := s.domains.Check(c.UserContext(), tenantID(c), name)
	if err != nil {
		return err
	}
	return c.JSON(domainCheckedJSON{domainJSON: s.domainView(checked.Domain, true), Message: checked.Message})
}
