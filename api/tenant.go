package api

import (
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/store"
	"tidings/queries"
)

const maxWhitelist = 50

type tenantJSON struct {
	TenantID               string   `json:"tenantId"`
	IdentityProviderOrgID  string   `json:"identityProviderOrgId"`
	Name                   string   `json:"name"`
	Plan                   string   `json:"plan"`
	SendingStatus          string   `json:"sendingStatus"`
	SandboxWhitelist       []string `json:"sandboxWhitelist"`
	ContactCount           int64    `json:"contactCount"`
	MonthlySendCount       int64    `json:"monthlySendCount"`
	MonthlySendCountPeriod string   `json:"monthlySendCountPeriod"`
	BillingStatus          string   `json:"billingStatus"`
	BillingCustomerID      *string  `json:"billingCustomerId"`
	BillingSubscriptionID  *string  `json:"billingSubscriptionId"`
	PlanPeriodEnd          *string  `json:"planPeriodEnd"`
	DefaultFromAddress     *string  `json:"defaultFromAddress,omitempty"`
	PreferredRegion        *string  `json:"preferredRegion,omitempty"`
	CreatedAt              string   `json:"createdAt"`
	UpdatedAt              string   `json:"updatedAt"`
}

func tenantView(t queries.Tenant) tenantJSON {
	// The counter belongs to the month it was counted in; a new month reads
	// as zero until the first send of that month resets it.
	period := time.Now().UTC().Format("2006-01")
	sends := t.MonthlySendCount
	if t.MonthlySendCountPeriod != period {
		sends = 0
	}
	return tenantJSON{
		TenantID: t.ID, IdentityProviderOrgID: t.ID, Name: t.Name, Plan: t.Plan,
		SendingStatus: t.SendingStatus, SandboxWhitelist: t.SandboxWhitelist,
		ContactCount: t.ContactCount, MonthlySendCount: sends, MonthlySendCountPeriod: period,
		BillingStatus: t.BillingStatus, BillingCustomerID: t.BillingCustomerID,
		BillingSubscriptionID: t.BillingSubscriptionID, PlanPeriodEnd: formatTimePtr(t.PlanPeriodEnd),
		DefaultFromAddress: t.DefaultFromAddress, PreferredRegion: t.PreferredRegion,
		CreatedAt: formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt),
	}
}

type tenantCreateReq struct {
	Name *string `json:"name"`
}

// validTenantName checks a name its callers have trimmed.
func validTenantName(n string) bool {
	l := utf8.RuneCountInString(n)
	return l >= 1 && l <= 128
}

// tenantCreate provisions the session's organisation: 201 the first time,
// 200 with the existing tenant afterwards.
func (s *Server) tenantCreate(c *fiber.Ctx) error {
	if err := sessionOnly(c); err != nil {
		return err
	}
	var req tenantCreateReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Name == nil || !validTenantName(strings.TrimSpace(*req.Name)) {
		return apperr.Invalid("name", "is required, 1-128 characters")
	}
	ctx, id := c.UserContext(), tenantID(c)
	t, err := s.db.TenantInsert(ctx, queries.TenantInsertParams{ID: id, Name: strings.TrimSpace(*req.Name)})
	if store.IsNoRows(err) {
		existing, err := s.db.TenantGet(ctx, id)
		if err != nil {
			return err
		}
		return c.Status(http.StatusOK).JSON(tenantView(existing))
	}
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(tenantView(t))
}

func (s *Server) tenantGet(c *fiber.Ctx) error {
	t, err := s.db.TenantGet(c.UserContext(), tenantID(c))
	if err != nil {
		return store.NotFound(err, "NOT_FOUND", "tenant")
	}
	return c.JSON(tenantView(t))
}

type tenantUpdateReq struct {
	Name               Opt[string] `json:"name"`
	DefaultFromAddress Opt[string] `json:"defaultFromAddress"`
	PreferredRegion    Opt[string] `json:"preferredRegion"`
	SendingStatus      Opt[string] `json:"sendingStatus"`
}

func (r *tenantUpdateReq) validate() error {
	var f apperr.Fields
	if !r.Name.Set && !r.DefaultFromAddress.Set && !r.PreferredRegion.Set && !r.SendingStatus.Set {
		return apperr.InvalidRequest("at least one of name, defaultFromAddress, preferredRegion, sendingStatus is required")
	}
	if r.Name.Set {
		r.Name.V = strings.TrimSpace(r.Name.V)
		f.Check(!r.Name.Null && validTenantName(r.Name.V), "name", "must be 1-128 characters")
	}
	if v, ok := r.DefaultFromAddress.Value(); ok {
		norm, valid := contacts.NormalizeEmail(v)
		f.Check(valid, "defaultFromAddress", "must be a valid email address")
		r.DefaultFromAddress.V = norm
	}
	if v, ok := r.PreferredRegion.Value(); ok {
		f.Check(strings.TrimSpace(v) != "" && len(v) <= 64, "preferredRegion", "must be 1-64 characters")
	}
	if r.SendingStatus.Set {
		f.Check(!r.SendingStatus.Null && slices.Contains([]string{"sandbox", "enabled", "paused"}, r.SendingStatus.V),
			"sendingStatus", "must be one of sandbox, enabled, paused")
	}
	return f.Err()
}

func (s *Server) tenantUpdate(c *fiber.Ctx) error {
	var req tenantUpdateReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	ctx, id := c.UserContext(), tenantID(c)
	if req.SendingStatus.V == "enabled" {
		if !s.cfg.ProviderConnected() {
			return apperr.Invalid("sendingStatus", "enabled requires a connected email provider (sendgrid or smtp)")
		}
		n, err := s.db.DomainCountVerified(ctx, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return apperr.Invalid("sendingStatus", "enabled requires at least one verified domain")
		}
	}
	p := queries.TenantUpdateParams{ID: id, SetDefaultFrom: req.DefaultFromAddress.Set, SetRegion: req.PreferredRegion.Set}
	p.Name, p.DefaultFromAddress, p.PreferredRegion, p.SendingStatus =
		req.Name.Ptr(), req.DefaultFromAddress.Ptr(), req.PreferredRegion.Ptr(), req.SendingStatus.Ptr()
	t, err := s.db.TenantUpdate(ctx, p)
	if err != nil {
		return store.NotFound(err, "NOT_FOUND", "tenant")
	}
	return c.JSON(tenantView(t))
}

type emailsJSON struct {
	Emails []string `json:"emails"`
}

func (s *Server) whitelistGet(c *fiber.Ctx) error {
	t, err := s.db.TenantGet(c.UserContext(), tenantID(c))
	if err != nil {
		return store.NotFound(err, "NOT_FOUND", "tenant")
	}
	return c.JSON(emailsJSON{Emails: t.SandboxWhitelist})
}

type whitelistReq struct {
	Email *string `json:"email"`
}

func (s *Server) whitelistAdd(c *fiber.Ctx) error {
	var req whitelistReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Email == nil {
		return apperr.Invalid("email", "is required")
	}
	email, ok := contacts.NormalizeEmail(*req.Email)
	if !ok {
		return apperr.Invalid("email", "must be a valid email address")
	}
	return s.editWhitelist(c, func(list []string) ([]string, error) {
		if slices.Contains(list, email) {
			return list, nil
		}
		if len(list) >= maxWhitelist {
			return nil, apperr.Invalid("email", "the sandbox whitelist is full (50 entries)")
		}
		return append(list, email), nil
	})
}

func (s *Server) whitelistRemove(c *fiber.Ctx) error {
	raw, err := pathParam(c, "email")
	if err != nil {
		return err
	}
	email, _ := contacts.NormalizeEmail(raw)
	return s.editWhitelist(c, func(list []string) ([]string, error) {
		return slices.DeleteFunc(list, func(e string) bool { return e == email }), nil
	})
}

// editWhitelist applies edit under the tenant row lock, so concurrent adds
// cannot exceed the limit or lose each other's entries.
func (s *Server) editWhitelist(c *fiber.Ctx, edit func([]string) ([]string, error)) error {
	var out []string
	err := s.db.Tx(c.UserContext(), func(q *queries.Queries) error {
		t, err := q.TenantGetForUpdate(c.UserContext(), tenantID(c))
		if err != nil {
			return store.NotFound(err, "NOT_FOUND", "tenant")
		}
		next, err := edit(slices.Clone(t.SandboxWhitelist))
		if err != nil {
			return err
		}
		if slices.Equal(next, t.SandboxWhitelist) {
			out = next
			return nil
		}
		out, err = q.TenantSetWhitelist(c.UserContext(), queries.TenantSetWhitelistParams{ID: t.ID, Emails: next})
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(emailsJSON{Emails: out})
}
