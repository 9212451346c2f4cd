package api

import (
	"encoding/json"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/domains"
	"tidings/internal/page"
	"tidings/internal/strictjson"
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
	Warmup         domains.Warmup      `json:"warmup"`
}

// domainView renders d with its warm-up; withRecords adds the DNS records
// to publish.
func (s *Server) domainView(c *fiber.Ctx, d queries.Domain, withRecords bool) (domainJSON, error) {
	v := s.domainJSON(d, withRecords)
	var err error
	v.Warmup, err = s.domains.WarmupOf(c.UserContext(), d)
	return v, err
}

// domainJSON renders d but its warm-up.
func (s *Server) domainJSON(d queries.Domain, withRecords bool) domainJSON {
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

// renderDomain answers status with d.
func (s *Server) renderDomain(c *fiber.Ctx, status int, d queries.Domain) error {
	v, err := s.domainView(c, d, true)
	if err != nil {
		return err
	}
	return c.Status(status).JSON(v)
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
	SendingEnabled Opt[bool] `json:"sendingEnabled"`
	// Warmup is decoded strictly in validate (an unknown key in it is
	// refused, as at the top level).
	Warmup Opt[json.RawMessage] `json:"warmup" doc:"Warm-up: {enabled?: boolean, schedule?: [daily limits] (non-empty, non-decreasing positive integers; null restores the default)}."`
}

type domainWarmupUpdateReq struct {
	Enabled  Opt[bool]  `json:"enabled"`
	Schedule Opt[[]int] `json:"schedule"`
}

// validate returns the change: sendingEnabled and/or warm-up (at least
// one; `warmup.schedule: null` puts the default schedule back).
func (r domainUpdateReq) validate() (*bool, *domains.WarmupPatch, error) {
	if !r.SendingEnabled.Set && !r.Warmup.Set {
		return nil, nil, apperr.AtLeastOne("sendingEnabled", "warmup")
	}
	var f apperr.Fields
	var sending *bool
	if r.SendingEnabled.Set {
		if v, ok := r.SendingEnabled.Value(); ok {
			sending = &v
		} else {
			f.Add("sendingEnabled", "must be a boolean")
		}
	}
	var w *domains.WarmupPatch
	if r.Warmup.Set {
		raw, ok := r.Warmup.Value()
		var wr domainWarmupUpdateReq
		switch {
		case !ok || len(raw) == 0 || raw[0] != '{':
			f.Add("warmup", "must be an object")
		case strictjson.Decode(raw, &wr) != nil:
			// The fields inside warmup, named as they are there.
			mergeFields(&f, strictjson.Decode(raw, &wr))
		case !wr.Enabled.Set && !wr.Schedule.Set:
			f.Add("warmup", "must name enabled and/or schedule")
		default:
			w = &domains.WarmupPatch{}
			if wr.Enabled.Set {
				if v, ok := wr.Enabled.Value(); ok {
					w.Enabled = &v
				} else {
					f.Add("warmup.enabled", "must be a boolean")
				}
			}
			if wr.Schedule.Set {
				if v, ok := wr.Schedule.Value(); ok {
					if err := domains.CheckSchedule(v); err != nil {
						mergeFields(&f, err)
					}
					w.Schedule = v
				} else {
					w.ResetSchedule = true
				}
			}
		}
	}
	return sending, w, f.Err()
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
	return s.renderDomain(c, http.StatusCreated, d)
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
	// The page's warm-ups in one query, not one per domain.
	warmups, err := s.domains.WarmupsOf(c.UserContext(), tenantID(c), rows)
	if err != nil {
		return err
	}
	items := make([]domainJSON, len(rows))
	for i, d := range rows {
		items[i] = s.domainJSON(d, false)
		items[i].Warmup = warmups[i]
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
	return s.renderDomain(c, http.StatusOK, d)
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
	sending, warmup, err := req.validate()
	if err != nil {
		return err
	}
	d, err := s.domains.Update(c.UserContext(), tenantID(c), name, sending, warmup)
	if err != nil {
		return err
	}
	return s.renderDomain(c, http.StatusOK, d)
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
	v, err := s.domainView(c, checked.Domain, true)
	if err != nil {
		return err
	}
	return c.JSON(domainCheckedJSON{domainJSON: v, Message: checked.Message})
}
