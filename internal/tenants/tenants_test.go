package tenants_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/tenants"
	"tidings/internal/testenv"
	"tidings/queries"
)

type bundle struct {
	ctx   context.Context
	store *tenants.Store
}

// setup provisions tenant "org_a" in a fresh database.
func setup(t *testing.T, providerConnected bool) *bundle {
	t.Helper()
	db := testenv.DB(t)
	b := &bundle{ctx: context.Background(), store: &tenants.Store{DB: db, ProviderConnected: providerConnected}}
	if _, _, err := b.store.Provision(b.ctx, "org_a", "A"); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bundle) verifiedDomain(t *testing.T, tenant string) {
	t.Helper()
	if _, err := b.store.DB.Pool.Exec(b.ctx, `INSERT INTO domains (tenant_id, domain, status, verification_token, dkim_tokens)
		VALUES ($1, 'acme.com', 'verified', 't', '{a,b,c}')`, tenant); err != nil {
		t.Fatal(err)
	}
}

func ptr(s string) *string { return &s }

// wantField checks for a VALIDATION_ERROR naming field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Kind != apperr.KindInvalid {
		t.Fatalf("want a validation error on %s, got %v", field, err)
	}
	if fields, _ := e.Details["fields"].(map[string]any); fields[field] == nil {
		t.Fatalf("want details.fields.%s, got %v", field, e.Details)
	}
}

func TestProvision(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	t1, created, err := b.store.Provision(b.ctx, "org_new", "  New  ")
	if err != nil || !created || t1.Name != "New" || t1.SendingStatus != tenants.Sandbox || t1.Plan != "free" {
		t.Fatalf("first: %+v created=%v %v", t1, created, err)
	}
	t2, created, err := b.store.Provision(b.ctx, "org_new", "Other")
	if err != nil || created || t2.Name != "New" || !t2.CreatedAt.Equal(t1.CreatedAt) {
		t.Fatalf("repeat must change nothing: %+v created=%v %v", t2, created, err)
	}
	for _, name := range []string{"", "   ", strings.Repeat("é", 129)} {
		_, _, err := b.store.Provision(b.ctx, "org_bad", name)
		wantField(t, err, "name")
	}
	if ok, err := b.store.Exists(b.ctx, "org_bad"); ok || err != nil {
		t.Fatalf("refused tenant exists: %v %v", ok, err)
	}
	if _, err := b.store.Get(b.ctx, "org_missing"); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("got %v", err)
	}
}

// Sending may be enabled only with a connected provider and a verified
// domain; sandbox and paused are always allowed.
func TestSendingStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc      string
		provider  bool
		verified  bool
		status    string
		wantField string // "" for success
	}{
		{desc: "no provider", verified: true, status: tenants.Enabled, wantField: "sendingStatus"},
		{desc: "no verified domain", provider: true, status: tenants.Enabled, wantField: "sendingStatus"},
		{desc: "provider and verified domain", provider: true, verified: true, status: tenants.Enabled},
		{desc: "pause without provider", status: tenants.Paused},
		{desc: "back to sandbox", status: tenants.Sandbox},
		{desc: "unknown status", provider: true, verified: true, status: "turbo", wantField: "sendingStatus"},
		{desc: "null status", status: "", wantField: "sendingStatus"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.provider)
			if tt.verified {
				b.verifiedDomain(t, "org_a")
			}
			got, err := b.store.Update(b.ctx, "org_a", tenants.Settings{SendingStatus: ptr(tt.status)})
			if tt.wantField != "" {
				wantField(t, err, tt.wantField)
				if cur, _ := b.store.Get(b.ctx, "org_a"); cur.SendingStatus != tenants.Sandbox {
					t.Fatalf("refused update changed the status to %s", cur.SendingStatus)
				}
				return
			}
			if err != nil || got.SendingStatus != tt.status {
				t.Fatalf("got %s, %v", got.SendingStatus, err)
			}
		})
	}
	t.Run("another tenant's verified domain does not count", func(t *testing.T) {
		t.Parallel()
		b := setup(t, true)
		if _, _, err := b.store.Provision(b.ctx, "org_b", "B"); err != nil {
			t.Fatal(err)
		}
		b.verifiedDomain(t, "org_b")
		_, err := b.store.Update(b.ctx, "org_a", tenants.Settings{SendingStatus: ptr(tenants.Enabled)})
		wantField(t, err, "sendingStatus")
	})
}

func TestSettings(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	_, err := b.store.Update(b.ctx, "org_a", tenants.Settings{})
	wantField(t, err, "body")

	got, err := b.store.Update(b.ctx, "org_a", tenants.Settings{Name: ptr(" Renamed "),
		DefaultFromAddress: ptr(" Hello@Acme.COM "), SetDefaultFrom: true, PreferredRegion: ptr("eu"), SetRegion: true})
	if err != nil || got.Name != "Renamed" || *got.DefaultFromAddress != "hello@acme.com" || *got.PreferredRegion != "eu" {
		t.Fatalf("%+v %v", got, err)
	}
	// A set flag with no value clears the setting; the rest stays.
	got, err = b.store.Update(b.ctx, "org_a", tenants.Settings{SetRegion: true})
	if err != nil || got.PreferredRegion != nil || got.DefaultFromAddress == nil || got.Name != "Renamed" {
		t.Fatalf("%+v %v", got, err)
	}
	for field, s := range map[string]tenants.Settings{
		"name":               {Name: ptr("  ")},
		"defaultFromAddress": {DefaultFromAddress: ptr("nope"), SetDefaultFrom: true},
		"preferredRegion":    {PreferredRegion: ptr(" "), SetRegion: true},
		"timezone":           {Timezone: ptr("Mars/Olympus")},
	} {
		_, err := b.store.Update(b.ctx, "org_a", s)
		wantField(t, err, field)
	}
	// The time zone is UTC until set; an IANA name is kept as given.
	if got.Timezone != "UTC" {
		t.Fatalf("default timezone %q", got.Timezone)
	}
	if got, err = b.store.Update(b.ctx, "org_a", tenants.Settings{Timezone: ptr("America/New_York")}); err != nil || got.Timezone != "America/New_York" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := b.store.Update(b.ctx, "org_missing", tenants.Settings{Name: ptr("x")}); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("got %v", err)
	}
}

func TestWhitelist(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	list, err := b.store.AddToWhitelist(b.ctx, "org_a", " A+b@Example.COM ")
	if err != nil || !slices.Equal(list, []string{"a+b@example.com"}) {
		t.Fatalf("%v %v", list, err)
	}
	// The same address again, however written, changes nothing.
	if list, err = b.store.AddToWhitelist(b.ctx, "org_a", "a+B@example.com"); err != nil || len(list) != 1 {
		t.Fatalf("%v %v", list, err)
	}
	_, err = b.store.AddToWhitelist(b.ctx, "org_a", "not-an-email")
	wantField(t, err, "email")
	// Removing compares normalised addresses; an absent one is a no-op.
	if list, err = b.store.RemoveFromWhitelist(b.ctx, "org_a", "nobody@example.com"); err != nil || len(list) != 1 {
		t.Fatalf("%v %v", list, err)
	}
	if list, err = b.store.RemoveFromWhitelist(b.ctx, "org_a", " A+B@example.com"); err != nil || len(list) != 0 {
		t.Fatalf("%v %v", list, err)
	}
	if _, err := b.store.AddToWhitelist(b.ctx, "org_missing", "a@example.com"); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("got %v", err)
	}
}

// Concurrent adds neither exceed the limit nor lose each other's entries.
func TestWhitelistLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	const first = tenants.MaxWhitelist - 3
	for i := range first {
		if _, err := b.store.AddToWhitelist(b.ctx, "org_a", fmt.Sprintf("u%d@example.com", i)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.store.AddToWhitelist(b.ctx, "org_a", fmt.Sprintf("late%d@example.com", i))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	refused := 0
	for err := range errs {
		if err != nil {
			wantField(t, err, "email")
			refused++
		}
	}
	list, err := b.store.Whitelist(b.ctx, "org_a")
	if err != nil || len(list) != tenants.MaxWhitelist || refused != 10-3 {
		t.Fatalf("%d entries, %d refused, %v", len(list), refused, err)
	}
}

func TestMonthlySends(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 0, 0, 1, 0, time.UTC)
	tests := []struct {
		desc   string
		period string
		want   int64
	}{
		{desc: "counted this month", period: "2026-03", want: 7},
		{desc: "counted last month", period: "2026-02", want: 0},
		{desc: "never counted", period: "", want: 0},
	}
	for _, tt := range tests {
		got, period := tenants.MonthlySends(queries.Tenant{MonthlySendCount: 7, MonthlySendCountPeriod: tt.period}, now)
		if got != tt.want || period != "2026-03" {
			t.Errorf("%s: %d %s", tt.desc, got, period)
		}
	}
}

func TestMayReceive(t *testing.T) {
	t.Parallel()
	wl := []string{"ann@example.com"}
	for _, tt := range []struct {
		desc, status, to string
		ok               bool
	}{
		{"enabled sends anywhere", tenants.Enabled, "bob@example.com", true},
		{"sandbox, whitelisted", tenants.Sandbox, "ann@example.com", true},
		{"sandbox, not whitelisted", tenants.Sandbox, "bob@example.com", false},
		{"paused, even whitelisted", tenants.Paused, "ann@example.com", false},
	} {
		err := tenants.MayReceive(queries.Tenant{SendingStatus: tt.status, SandboxWhitelist: wl}, tt.to)
		if (err == nil) != tt.ok || (err != nil && !apperr.IsCode(err, "FORBIDDEN")) {
			t.Errorf("%s: MayReceive = %v, want ok=%v (else FORBIDDEN)", tt.desc, err, tt.ok)
		}
	}
}
