// Package tenants keeps the organisations that own everything else:
// provisioning, settings with the sending-status rule, and the sandbox
// whitelist with its limit. The HTTP handlers and the worker apply these
// rules through it alone.
package tenants

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/localtime"
	"tidings/internal/metrics"
	"tidings/internal/store"
	"tidings/queries"
)

// MaxWhitelist is how many addresses the sandbox whitelist holds.
const MaxWhitelist = 50

// Sending statuses (ADDENDUM section 2).
const (
	Sandbox = "sandbox"
	Enabled = "enabled"
	Paused  = "paused"
)

// Store keeps tenants.
type Store struct {
	DB *store.DB
	// ProviderConnected says whether a real delivery provider is configured
	// (config.Config.ProviderConnected); without one no tenant leaves
	// sandbox.
	ProviderConnected bool
}

// NotFound is the tenant 404: the organisation has not been provisioned.
func NotFound() *apperr.Error { return apperr.NotFound("NOT_FOUND", "tenant") }

func notFound(err error) error { return apperr.Specific(err, apperr.KindNotFound, NotFound()) }

// validName checks a trimmed tenant name.
func validName(n string) bool {
	l := utf8.RuneCountInString(n)
	return l >= 1 && l <= 128
}

// Provision creates the tenant of organisation id the first time (created
// true) and returns the existing one, unchanged, on a repeat.
func (s *Store) Provision(ctx context.Context, id, name string) (t queries.Tenant, created bool, err error) {
	name = strings.TrimSpace(name)
	if !validName(name) {
		return t, false, apperr.Invalid("name", "is required, 1-128 characters")
	}
	// In a transaction, which also writes the request's audit entry (a
	// repeat, which changes nothing, included).
	err = s.DB.InTx(ctx, func(q *store.Tx) error {
		t, err = q.TenantInsert(ctx, queries.TenantInsertParams{ID: id, Name: name})
		if store.IsNoRows(err) { // ON CONFLICT DO NOTHING: provisioned before
			t, err = q.TenantGet(ctx, id)
			return err
		}
		created = err == nil
		return err
	})
	if err != nil || created {
		return t, created, err
	}
	t, err = s.monthlySends(ctx, t)
	return t, false, err
}

// Get returns the tenant.
func (s *Store) Get(ctx context.Context, id string) (queries.Tenant, error) {
	t, err := s.DB.TenantGet(ctx, id)
	if err != nil {
		return t, notFound(err)
	}
	return s.monthlySends(ctx, t)
}

// monthlySends sets the tenant's monthlySendCount from the metrics: the
// sent count of the current UTC month (MonthlySends then shows it). The
// tenants row's own counter is not kept: one row per tenant moved by every
// send would be the hot row the metrics avoid (docs/decisions.md "Metrics").
func (s *Store) monthlySends(ctx context.Context, t queries.Tenant) (queries.Tenant, error) {
	n, period, err := (&metrics.Store{DB: s.DB}).MonthlySent(ctx, t.ID)
	t.MonthlySendCount, t.MonthlySendCountPeriod = n, period
	return t, err
}

// Exists reports whether organisation id has been provisioned.
func (s *Store) Exists(ctx context.Context, id string) (bool, error) {
	return s.DB.TenantExists(ctx, id)
}

// MonthlySends is the send counter as shown: it belongs to the month it was
// counted in, so a new month reads zero until its first send resets it.
// period is the current month, "2006-01".
func MonthlySends(t queries.Tenant, now time.Time) (count int64, period string) {
	period = now.UTC().Format("2006-01")
	if t.MonthlySendCountPeriod != period {
		return 0, period
	}
	return t.MonthlySendCount, period
}

// Settings is a PATCH of the tenant; nil fields stay as they are.
type Settings struct {
	Name *string
	// DefaultFromAddress and PreferredRegion are optional settings: with
	// their Set flag and a nil value they are cleared.
	DefaultFromAddress *string
	SetDefaultFrom     bool
	PreferredRegion    *string
	SetRegion          bool
	SendingStatus      *string
	// Timezone is an IANA zone name (localtime.Valid).
	Timezone *string
	// EventRetentionDays is how long events stay in the table before the
	// archive takes them (MinRetentionDays to MaxRetentionDays).
	EventRetentionDays *int
	// BySession says the change comes with a dashboard session: only a
	// session may resume a tenant the deliverability guard paused.
	BySession bool
	// FrequencyCap, with SetFrequencyCap, sets the cap (nil: none).
	FrequencyCap    *Cap
	SetFrequencyCap bool
}

// Cap is a frequency cap: at most Max sequence and broadcast messages per
// contact per Period ("day" or "week", calendar, in the contact's zone).
type Cap struct {
	Max    int
	Period string
}

// CapOf reads a tenant's cap; nil when it has none.
func CapOf(t queries.Tenant) *Cap {
	if t.FrequencyCapMax == nil || t.FrequencyCapPeriod == nil {
		return nil
	}
	return &Cap{Max: int(*t.FrequencyCapMax), Period: *t.FrequencyCapPeriod}
}

// The range of eventRetentionDays (ADDENDUM 15).
const (
	MinRetentionDays = 1
	MaxRetentionDays = 3650
)

// validate checks and normalises the settings.
func (u *Settings) validate() error {
	if u.Name == nil && !u.SetDefaultFrom && !u.SetRegion && u.SendingStatus == nil && u.Timezone == nil &&
		u.EventRetentionDays == nil && !u.SetFrequencyCap {
		return apperr.AtLeastOne("name", "defaultFromAddress", "preferredRegion", "sendingStatus", "timezone",
			"eventRetentionDays", "frequencyCap")
	}
	var f apperr.Fields
	if u.Name != nil {
		n := strings.TrimSpace(*u.Name)
		f.Check(validName(n), "name", "must be 1-128 characters")
		u.Name = &n
	}
	if u.DefaultFromAddress != nil {
		norm, ok := contacts.NormalizeEmail(*u.DefaultFromAddress)
		f.Check(ok, "defaultFromAddress", "must be a valid email address")
		u.DefaultFromAddress = &norm
	}
	if r := u.PreferredRegion; r != nil {
		f.Check(strings.TrimSpace(*r) != "" && len(*r) <= 64, "preferredRegion", "must be 1-64 characters")
	}
	if st := u.SendingStatus; st != nil {
		f.Check(slices.Contains([]string{Sandbox, Enabled, Paused}, *st), "sendingStatus", "must be one of sandbox, enabled, paused")
	}
	if tz := u.Timezone; tz != nil {
		f.Check(localtime.Valid(*tz), "timezone", "must be an IANA time zone name, e.g. Europe/Amsterdam or UTC")
	}
	if c := u.FrequencyCap; c != nil {
		f.Check(c.Max >= 1 && c.Max <= 1000, "frequencyCap.max", "must be a whole number from 1 to 1000")
		f.Check(c.Period == "day" || c.Period == "week", "frequencyCap.period", "must be one of day, week")
	}
	if d := u.EventRetentionDays; d != nil {
		f.Check(*d >= MinRetentionDays && *d <= MaxRetentionDays, "eventRetentionDays",
			fmt.Sprintf("must be a whole number of days from %d to %d", MinRetentionDays, MaxRetentionDays))
	}
	return f.Err()
}

// Update applies settings. Sending may be enabled only with a connected
// delivery provider and at least one verified domain; the other statuses
// are always allowed.
func (s *Store) Update(ctx context.Context, id string, u Settings) (queries.Tenant, error) {
	if err := u.validate(); err != nil {
		return queries.Tenant{}, err
	}
	if u.SendingStatus != nil && *u.SendingStatus != Paused && !u.BySession {
		cur, err := s.DB.TenantGet(ctx, id)
		if err != nil {
			return cur, notFound(err)
		}
		if cur.SendingStatus == Paused && cur.PausedReason != nil && *cur.PausedReason != PausedManual {
			return cur, apperr.Forbidden("the deliverability guard paused sending (" + *cur.PausedReason +
				"): only a dashboard session may resume it")
		}
	}
	if u.SendingStatus != nil && *u.SendingStatus == Enabled {
		if err := s.canEnableSending(ctx, id); err != nil {
			return queries.Tenant{}, err
		}
	}
	var t queries.Tenant
	err := s.DB.InTx(ctx, func(q *store.Tx) error { // with the request's audit entry
		var err error
		t, err = q.TenantUpdate(ctx, queries.TenantUpdateParams{ID: id, Name: u.Name,
			SetDefaultFrom: u.SetDefaultFrom, DefaultFromAddress: u.DefaultFromAddress,
			SetRegion: u.SetRegion, PreferredRegion: u.PreferredRegion, SendingStatus: u.SendingStatus, Timezone: u.Timezone,
			EventRetentionDays: retentionDays(u.EventRetentionDays), SetFrequencyCap: u.SetFrequencyCap,
			FrequencyCapMax: capMax(u.FrequencyCap), FrequencyCapPeriod: capPeriod(u.FrequencyCap)})
		return err
	})
	if err != nil {
		return t, notFound(err)
	}
	return s.monthlySends(ctx, t)
}

func (s *Store) canEnableSending(ctx context.Context, id string) error {
	if !s.ProviderConnected {
		return apperr.Invalid("sendingStatus", "enabled requires a connected email provider (sendgrid or smtp)")
	}
	n, err := s.DB.DomainCountVerified(ctx, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return apperr.Invalid("sendingStatus", "enabled requires at least one verified domain")
	}
	return nil
}

// MayReceive applies the tenant's own sending gates to one recipient, the
// same for a transactional send and a sequence step (ADDENDUM sections 2
// and 6): nothing goes out while sending is paused, and in sandbox only to
// whitelisted addresses. email is in its stored (normalised) form.
func MayReceive(t queries.Tenant, email string) error {
	if t.SendingStatus == Paused {
		return apperr.Forbidden("sending is paused for this tenant")
	}
	return Whitelisted(t, email)
}

// Whitelisted is the sandbox's rule alone: in sandbox only whitelisted
// addresses receive mail. A sequence step checks it as a gate; a paused
// tenant is not a gate for steps (ADDENDUM 6): they wait, held, until
// sending resumes.
func Whitelisted(t queries.Tenant, email string) error {
	if t.SendingStatus == Sandbox && !slices.Contains(t.SandboxWhitelist, email) {
		return apperr.Forbidden("the tenant is in sandbox mode and " + email + " is not on the sandbox whitelist")
	}
	return nil
}

func retentionDays(d *int) *int32 {
	if d == nil {
		return nil
	}
	v := int32(*d)
	return &v
}

func capMax(c *Cap) *int32 {
	if c == nil {
		return nil
	}
	v := int32(c.Max)
	return &v
}

func capPeriod(c *Cap) *string {
	if c == nil {
		return nil
	}
	return &c.Period
}
