package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/tenants"
	"tidings/queries"
)

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
	Timezone               string   `json:"timezone"`
	EventRetentionDays     int32    `json:"eventRetentionDays"`
	// PausedReason (complaint_rate, bounce_rate, manual) and PausedAt are
	// set while sending is paused.
	PausedReason *string `json:"pausedReason"`
	PausedAt     *string `json:"pausedAt"`
	// FrequencyCap is {max, period}, or null for none.
	FrequencyCap *frequencyCapJSON `json:"frequencyCap"`
	// Deliverability is the guard's window of outcomes (GET and PATCH).
	Deliverability *deliverabilityJSON `json:"deliverability,omitempty"`
	// Providers are the pool's circuits as this process sees them, one
	// per provider and stream (GET and PATCH).
	Providers []providerStateJSON `json:"providers,omitempty"`
	CreatedAt string              `json:"createdAt"`
	UpdatedAt string              `json:"updatedAt"`
}

func tenantView(t queries.Tenant) tenantJSON {
	sends, period := tenants.MonthlySends(t, time.Now())
	return tenantJSON{
		TenantID: t.ID, IdentityProviderOrgID: t.ID, Name: t.Name, Plan: t.Plan,
		SendingStatus: t.SendingStatus, SandboxWhitelist: t.SandboxWhitelist,
		ContactCount: t.ContactCount, MonthlySendCount: sends, MonthlySendCountPeriod: period,
		BillingStatus: t.BillingStatus, BillingCustomerID: t.BillingCustomerID,
		BillingSubscriptionID: t.BillingSubscriptionID, PlanPeriodEnd: formatTimePtr(t.PlanPeriodEnd),
		DefaultFromAddress: t.DefaultFromAddress, PreferredRegion: t.PreferredRegion, Timezone: t.Timezone,
		EventRetentionDays: t.EventRetentionDays, PausedReason: t.PausedReason, PausedAt: formatTimePtr(t.PausedAt),
		FrequencyCap: capView(tenants.CapOf(t)),
		CreatedAt:    formatTime(t.CreatedAt), UpdatedAt: formatTime(t.UpdatedAt),
	}
}

type frequencyCapJSON struct {
	Max    int    `json:"max" min:"1" max:"1000"`
	Period string `json:"period" enum:"day,week"`
}

func capView(c *tenants.Cap) *frequencyCapJSON {
	if c == nil {
		return nil
	}
	return &frequencyCapJSON{Max: c.Max, Period: c.Period}
}

// deliverabilityJSON is the deliverability guard's view of the tenant:
// its last outcomes since the last resume, and the rates that pause it
// past complaintRateLimit or bounceRateLimit.
type deliverabilityJSON struct {
	Outcomes           int     `json:"outcomes"`
	ComplaintRate      float64 `json:"complaintRate"`
	BounceRate         float64 `json:"bounceRate"`
	ComplaintRateLimit float64 `json:"complaintRateLimit"`
	BounceRateLimit    float64 `json:"bounceRateLimit"`
}

// providerStateJSON is one circuit of the provider pool (ADDENDUM 22).
type providerStateJSON struct {
	Name string `json:"name"`
	// Stream is transactional or marketing.
	Stream string `json:"stream" doc:"transactional or marketing"`
	// State is ok, open (skipped while another provider of the stream is
	// not open) or half_open (the next message tries it).
	State string `json:"state" doc:"ok, open or half_open"`
}

// providerStates are the sender's circuits; the state is this process's
// (docs/decisions.md "Providers").
func (s *Server) providerStates() []providerStateJSON {
	if s.sender == nil || s.sender.Pool == nil {
		return nil
	}
	states := s.sender.Pool.States()
	out := make([]providerStateJSON, len(states))
	for i, st := range states {
		out[i] = providerStateJSON{Name: st.Name, Stream: string(st.Stream), State: st.State}
	}
	return out
}

// tenantFullView is tenantView with the guard's rates and the providers.
func (s *Server) tenantFullView(c *fiber.Ctx, t queries.Tenant) (tenantJSON, error) {
	v := tenantView(t)
	r, err := s.tenants.Rates(c.UserContext(), t.ID)
	if err != nil {
		return v, err
	}
	v.Deliverability = &deliverabilityJSON{Outcomes: r.Outcomes, ComplaintRate: r.ComplaintRate, BounceRate: r.BounceRate,
		ComplaintRateLimit: tenants.MaxComplaintRate, BounceRateLimit: tenants.MaxBounceRate}
	v.Providers = s.providerStates()
	return v, nil
}

type tenantCreateReq struct {
	Name *string `json:"name" required:"true" min:"1" max:"128" doc:"The organisation's name, 1-128 characters."`
}

// tenantCreate provisions the session's organisation: 201 the first time,
// 200 with the existing tenant afterwards.
func (s *Server) tenantCreate(c *fiber.Ctx) error {
	var req tenantCreateReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var name string // absent: refused as empty
	if req.Name != nil {
		name = *req.Name
	}
	t, created, err := s.tenants.Provision(c.UserContext(), tenantID(c), name)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return c.Status(status).JSON(tenantView(t))
}

func (s *Server) tenantGet(c *fiber.Ctx) error {
	t, err := s.tenants.Get(c.UserContext(), tenantID(c))
	if err != nil {
		return err
	}
	v, err := s.tenantFullView(c, t)
	if err != nil {
		return err
	}
	return c.JSON(v)
}

type tenantUpdateReq struct {
	Name               Opt[string] `json:"name" min:"1" max:"128"`
	DefaultFromAddress Opt[string] `json:"defaultFromAddress" format:"email" doc:"The from address of sends that name none; on a verified domain."`
	PreferredRegion    Opt[string] `json:"preferredRegion" min:"1" max:"64" nullable:"true"`
	SendingStatus      Opt[string] `json:"sendingStatus" enum:"sandbox,enabled,paused" doc:"enabled needs a connected provider and a verified domain."`
	Timezone           Opt[string] `json:"timezone" doc:"An IANA time zone name (Europe/Amsterdam, UTC)."`
	EventRetentionDays Opt[int]    `json:"eventRetentionDays" min:"1" max:"3650" doc:"Days events are kept before the archive takes them."`
	// FrequencyCap is {max, period} or null (no cap).
	FrequencyCap Opt[frequencyCapJSON] `json:"frequencyCap" nullable:"true"`
}

// validate passes what was sent to the domain, which judges it (a PATCH's
// rules are the tenant's: tenants.Store.Update): a null name or status
// reaches it as "", which its rules refuse, while a null optional setting
// clears it. Nothing here can fail; the method has the request types' one
// name.
func (r tenantUpdateReq) validate() (tenants.Settings, error) {
	return tenants.Settings{Name: r.Name.Sent(), SendingStatus: r.SendingStatus.Sent(), Timezone: r.Timezone.Sent(),
		DefaultFromAddress: r.DefaultFromAddress.Ptr(), SetDefaultFrom: r.DefaultFromAddress.Set,
		PreferredRegion: r.PreferredRegion.Ptr(), SetRegion: r.PreferredRegion.Set,
		EventRetentionDays: r.EventRetentionDays.Sent(), SetFrequencyCap: r.FrequencyCap.Set,
		FrequencyCap: capOf(r.FrequencyCap)}, nil
}

func (s *Server) tenantUpdate(c *fiber.Ctx) error {
	var req tenantUpdateReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate()
	if err != nil {
		return err
	}
	in.BySession = principal(c).Session
	t, err := s.tenants.Update(c.UserContext(), tenantID(c), in)
	if err != nil {
		return err
	}
	v, err := s.tenantFullView(c, t)
	if err != nil {
		return err
	}
	return c.JSON(v)
}

type emailsJSON struct {
	Emails []string `json:"emails"`
}

func (s *Server) whitelistGet(c *fiber.Ctx) error {
	list, err := s.tenants.Whitelist(c.UserContext(), tenantID(c))
	if err != nil {
		return err
	}
	return c.JSON(emailsJSON{Emails: list})
}

type whitelistReq struct {
	Email *string `json:"email" required:"true" format:"email"`
}

func (s *Server) whitelistAdd(c *fiber.Ctx) error {
	var req whitelistReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Email == nil {
		return apperr.Invalid("email", "is required")
	}
	list, err := s.tenants.AddToWhitelist(c.UserContext(), tenantID(c), *req.Email)
	if err != nil {
		return err
	}
	return c.JSON(emailsJSON{Emails: list})
}

func (s *Server) whitelistRemove(c *fiber.Ctx) error {
	email, err := pathParam(c, "email")
	if err != nil {
		return err
	}
	list, err := s.tenants.RemoveFromWhitelist(c.UserContext(), tenantID(c), email)
	if err != nil {
		return err
	}
	return c.JSON(emailsJSON{Emails: list})
}

// capOf is the cap a PATCH sent: nil for null (no cap).
func capOf(o Opt[frequencyCapJSON]) *tenants.Cap {
	v, ok := o.Value()
	if !ok {
		return nil
	}
	return &tenants.Cap{Max: v.Max, Period: v.Period}
}

// UnmarshalJSON reads a cap strictly: a field other than max and period
// is refused (ADDENDUM 3), and both are required.
func (c *frequencyCapJSON) UnmarshalJSON(b []byte) error {
	type plain struct {
		Max    *int    `json:"max"`
		Period *string `json:"period"`
	}
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return apperr.Invalid("frequencyCap", "must be {\"max\": 1-1000, \"period\": \"day\" or \"week\"}, or null")
	}
	if p.Max == nil || p.Period == nil {
		return apperr.Invalid("frequencyCap", "needs both max and period")
	}
	c.Max, c.Period = *p.Max, *p.Period
	return nil
}
