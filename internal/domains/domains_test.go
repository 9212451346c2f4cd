package domains_test

import (
	"errors"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/domains"
	"tidings/internal/page"
)

var tokenRE = regexp.MustCompile(`^[a-z2-7]{26}$`)

func TestCreateReturnsPendingDomainAndItsRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, tenantA, " Mail.Example.COM. ")
	if d.Domain != "mail.example.com" || d.Status != "pending" || d.SendingEnabled || d.HealthStatus != "unknown" ||
		d.VerifiedAt != nil || d.LastCheckedAt != nil || !d.CreatedAt.Equal(t0) {
		t.Fatalf("created %+v", d)
	}
	tokens := append([]string{d.VerificationToken}, d.DkimTokens...)
	if len(tokens) != 4 || len(slices.Compact(slices.Sorted(slices.Values(tokens)))) != 4 {
		t.Fatalf("want four distinct tokens, got %v", tokens)
	}
	for _, tok := range tokens {
		if !tokenRE.MatchString(tok) {
			t.Fatalf("token %q is not lower-case base32 of 128 bits", tok)
		}
	}
	want := []domains.DNSRecord{
		{Type: "TXT", Name: "_tidings.mail.example.com", Value: "tidings-verification=" + d.VerificationToken, Purpose: "Domain verification"},
	}
	for _, tok := range d.DkimTokens {
		want = append(want, domains.DNSRecord{Type: "CNAME", Name: tok + "._domainkey.mail.example.com",
			Value: tok + "." + suffix, Purpose: "DKIM"})
	}
	if got := b.doms.Records(d); !slices.Equal(got, want) {
		t.Fatalf("records\n got %+v\nwant %+v", got, want)
	}
	if g, err := b.doms.Get(b.ctx, tenantA, "MAIL.example.com."); err != nil || g.VerificationToken != d.VerificationToken {
		t.Fatalf("get by another spelling: %v %+v", err, g)
	}
}

func TestCreateRejectsInvalidAndDuplicateNames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.doms.Create(b.ctx, tenantA, "not a domain")
	wantField(t, err, "domain", "not a valid domain name")
	_, err = b.doms.Create(b.ctx, tenantA, "10.0.0.1")
	wantField(t, err, "domain", "not an IP address")
	b.create(t, tenantA, "example.com")
	_, err = b.doms.Create(b.ctx, tenantA, "EXAMPLE.com.")
	wantField(t, err, "domain", "already been added")
	// Another tenant may add the same name, with its own tokens.
	other := b.create(t, tenantB, "example.com")
	mine, _ := b.doms.Get(b.ctx, tenantA, "example.com")
	if other.VerificationToken == mine.VerificationToken {
		t.Fatal("two tenants share a verification token")
	}
}

// The whole life of a domain, the clock moved by hand: pending → verifying
// → failed after 72 hours → verified, then degraded and healthy again.
func TestCheckLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, tenantA, "example.com")
	recs := b.doms.Records(d)

	c := b.check(t, t0.Add(time.Hour), tenantA, "example.com")
	if c.Domain.Status != "verifying" || c.Domain.HealthStatus != "degraded" || c.Domain.VerifiedAt != nil ||
		c.Domain.LastCheckedAt == nil || !c.Domain.LastCheckedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("after first check: %+v", c.Domain)
	}
	for _, r := range recs {
		if !strings.Contains(c.Message, r.Type+" "+r.Name) {
			t.Fatalf("message %q does not name %s", c.Message, r.Name)
		}
	}

	// TXT and one DKIM record published: the message names only the other two.
	b.publish(t, d, "txt", 1)
	c = b.check(t, t0.Add(2*time.Hour), tenantA, "example.com")
	if c.Domain.Status != "verifying" || !slices.Equal(c.Domain.MissingRecords, []string{recs[1].Name, recs[3].Name}) {
		t.Fatalf("after partial publish: %+v", c.Domain)
	}
	if strings.Contains(c.Message, recs[0].Name) || strings.Contains(c.Message, recs[2].Name) ||
		!strings.Contains(c.Message, recs[1].Name) || !strings.Contains(c.Message, recs[3].Name) {
		t.Fatalf("message %q", c.Message)
	}

	c = b.check(t, t0.Add(72*time.Hour), tenantA, "example.com")
	if c.Domain.Status != "failed" || !strings.Contains(c.Message, "Verification failed") {
		t.Fatalf("after 72 hours: %+v %q", c.Domain, c.Message)
	}
	if !c.Domain.NextCheckAt.Equal(t0.Add(72*time.Hour + domains.RecheckVerified)) {
		t.Fatalf("failed domain next checked at %v", c.Domain.NextCheckAt)
	}

	b.publish(t, d, 0, 2)
	verifiedAt := t0.Add(80 * time.Hour)
	c = b.check(t, verifiedAt, tenantA, "example.com")
	if c.Domain.Status != "verified" || c.Domain.HealthStatus != "healthy" || len(c.Domain.MissingRecords) != 0 ||
		c.Domain.VerifiedAt == nil || !c.Domain.VerifiedAt.Equal(verifiedAt) || !strings.Contains(c.Message, "verified") {
		t.Fatalf("after publishing all: %+v %q", c.Domain, c.Message)
	}

	// A record disappears: still verified (sending goes on), degraded.
	b.dns.Remove(recs[2].Name)
	c = b.check(t, t0.Add(100*time.Hour), tenantA, "example.com")
	if c.Domain.Status != "verified" || c.Domain.HealthStatus != "degraded" ||
		!slices.Equal(c.Domain.MissingRecords, []string{recs[2].Name}) || !c.Domain.VerifiedAt.Equal(verifiedAt) {
		t.Fatalf("after losing a record: %+v", c.Domain)
	}
	b.publish(t, d, 1)
	c = b.check(t, t0.Add(101*time.Hour), tenantA, "example.com")
	if c.Domain.Status != "verified" || c.Domain.HealthStatus != "healthy" || !c.Domain.VerifiedAt.Equal(verifiedAt) {
		t.Fatalf("after restoring it: %+v", c.Domain)
	}
	if g, _ := b.doms.Get(b.ctx, tenantA, "example.com"); g.Status != "verified" || !g.LastCheckedAt.Equal(t0.Add(101*time.Hour)) {
		t.Fatalf("stored: %+v", g)
	}
}

// Names compare case-insensitively with or without the trailing dot, TXT
// strings are concatenated, other TXT records at the name are ignored, and
// a TXT name may be delegated by CNAME.
func TestCheckerMatching(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, tenantA, "example.com")
	recs := b.doms.Records(d)
	v := recs[0].Value
	b.dns.Add(t,
		`_TIDINGS.Example.COM. 300 IN TXT "v=spf1 -all"`,
		`_TIDINGS.Example.COM. 300 IN TXT "`+v[:10]+`" "`+v[10:]+`"`,
		strings.ToUpper(recs[1].Name)+". 300 IN CNAME "+strings.ToUpper(recs[1].Value)+".",
		zoneLine(recs[2]),
		zoneLine(recs[3]),
	)
	if c := b.check(t, t0.Add(time.Minute), tenantA, "example.com"); c.Domain.Status != "verified" {
		t.Fatalf("%+v %q", c.Domain, c.Message)
	}

	// Delegated verification name, and a DKIM CNAME pointing elsewhere.
	d2 := b.create(t, tenantA, "delegated.example")
	recs2 := b.doms.Records(d2)
	b.dns.Add(t,
		recs2[0].Name+". 300 IN CNAME verify.elsewhere.example.",
		`verify.elsewhere.example. 300 IN TXT "`+recs2[0].Value+`"`,
		zoneLine(recs2[1]), zoneLine(recs2[2]),
		recs2[3].Name+". 300 IN CNAME wrong.target.example.",
	)
	c := b.check(t, t0.Add(time.Minute), tenantA, "delegated.example")
	if !slices.Equal(c.Domain.MissingRecords, []string{recs2[3].Name}) {
		t.Fatalf("missing %v, want only the mis-pointed CNAME (%q)", c.Domain.MissingRecords, c.Message)
	}
}

// A truncated UDP answer is asked again over TCP.
func TestCheckerFallsBackToTCPOnTruncation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, tenantA, "example.com")
	b.publishAll(t, d)
	b.dns.SetTruncate(true)
	if c := b.check(t, t0.Add(time.Minute), tenantA, "example.com"); c.Domain.Status != "verified" {
		t.Fatalf("%+v %q", c.Domain, c.Message)
	}
	if n := b.dns.TCPQueries(); n != 4 {
		t.Fatalf("%d queries over TCP, want 4", n)
	}
}

// A check that gets no answer at all changes nothing; one that gets some
// answers counts the failed lookups as missing.
func TestCheckWithFailingResolver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, tenantA, "example.com")
	b.dns.SetServFail(true)
	b.clock.set(t0.Add(time.Hour))
	_, err := b.doms.Check(b.ctx, tenantA, "example.com")
	e, ok := apperr.As(err)
	if !ok || e.Kind != apperr.KindUnavailable || e.Code != "DNS_UNAVAILABLE" ||
		!errors.Is(err, domains.ErrLookupFailed) || !strings.Contains(e.Err.Error(), "SERVFAIL") {
		t.Fatalf("want DNS_UNAVAILABLE (unavailable) caused by ErrLookupFailed naming SERVFAIL, got %v", err)
	}
	if g, _ := b.doms.Get(b.ctx, tenantA, "example.com"); g.Status != "pending" || g.LastCheckedAt != nil || g.HealthStatus != "unknown" {
		t.Fatalf("inconclusive check changed the domain: %+v", g)
	}

	// A server that never answers: the timeout bounds the check.
	silent := &domains.Store{DB: b.db, DKIMSuffix: suffix, Now: b.clock.Now,
		DNS: &domains.Checker{Server: deadServer(t), Timeout: 200 * time.Millisecond}}
	start := time.Now()
	if _, err := silent.Check(b.ctx, tenantA, "example.com"); !errors.Is(err, domains.ErrLookupFailed) {
		t.Fatalf("want ErrLookupFailed, got %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("check against a silent server took %v", took)
	}

	// Only the DKIM lookups fail.
	b.dns.SetServFail(false)
	b.publish(t, d, "txt")
	c := b.check(t, t0.Add(2*time.Hour), tenantA, "example.com")
	if c.Domain.Status != "verifying" || len(c.Domain.MissingRecords) != 3 {
		t.Fatalf("%+v", c.Domain)
	}
}

// deadServer is a UDP address that receives and never answers.
func deadServer(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

func TestSetSendingEnabled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, tenantA, "example.com")
	_, err := b.doms.SetSendingEnabled(b.ctx, tenantA, "example.com", true)
	wantErr(t, err, 422, "DOMAIN_NOT_VERIFIED")
	_, err = b.doms.SetSendingEnabled(b.ctx, tenantA, "unknown.example", true)
	wantErr(t, err, 404, "DOMAIN_NOT_FOUND")
	_, err = b.doms.SetSendingEnabled(b.ctx, tenantA, "unknown.example", false)
	wantErr(t, err, 404, "DOMAIN_NOT_FOUND")
	if g, err := b.doms.SetSendingEnabled(b.ctx, tenantA, "example.com", false); err != nil || g.SendingEnabled {
		t.Fatalf("disabling an unverified domain: %v %+v", err, g)
	}
	b.publishAll(t, d)
	b.check(t, t0.Add(time.Minute), tenantA, "example.com")
	g, err := b.doms.SetSendingEnabled(b.ctx, tenantA, "Example.com", true)
	if err != nil || !g.SendingEnabled || g.Status != "verified" {
		t.Fatalf("enabling a verified domain: %v %+v", err, g)
	}
	if g, err = b.doms.SetSendingEnabled(b.ctx, tenantA, "example.com", false); err != nil || g.SendingEnabled {
		t.Fatalf("disabling: %v %+v", err, g)
	}
}

// ADDENDUM section 8, in order: not added, not verified, not enabled.
func TestCheckFrom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	wantErr(t, b.doms.CheckFrom(b.ctx, tenantA, "news@example.com"), 404, "DOMAIN_NOT_FOUND")
	d := b.create(t, tenantA, "example.com")
	wantErr(t, b.doms.CheckFrom(b.ctx, tenantA, "news@example.com"), 422, "DOMAIN_NOT_VERIFIED")
	b.publishAll(t, d)
	b.check(t, t0.Add(time.Minute), tenantA, "example.com")
	wantErr(t, b.doms.CheckFrom(b.ctx, tenantA, "news@example.com"), 403, "FORBIDDEN")
	if _, err := b.doms.SetSendingEnabled(b.ctx, tenantA, "example.com", true); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{"news@example.com", "News <NEWS@Example.COM>"} {
		if err := b.doms.CheckFrom(b.ctx, tenantA, from); err != nil {
			t.Fatalf("%s: %v", from, err)
		}
	}
	// Exact domain only, and only the tenant's own.
	wantErr(t, b.doms.CheckFrom(b.ctx, tenantA, "a@sub.example.com"), 404, "DOMAIN_NOT_FOUND")
	wantErr(t, b.doms.CheckFrom(b.ctx, tenantB, "news@example.com"), 404, "DOMAIN_NOT_FOUND")
	wantField(t, b.doms.CheckFrom(b.ctx, tenantA, "not an address"), "from", "email address")
}

func TestHasVerified(t *testing.T) {
	t.Parallel()
	b := setup(t)
	has := func(tenant string) bool {
		ok, err := b.doms.HasVerified(b.ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	d := b.create(t, tenantA, "example.com")
	b.create(t, tenantB, "example.com")
	if has(tenantA) {
		t.Fatal("pending domain counts as verified")
	}
	b.publishAll(t, d) // the zone holds A's tokens only
	b.check(t, t0.Add(time.Minute), tenantA, "example.com")
	b.check(t, t0.Add(time.Minute), tenantB, "example.com")
	if !has(tenantA) || has(tenantB) {
		t.Fatalf("A %v, B %v; want true, false", has(tenantA), has(tenantB))
	}
}

// Another tenant can neither see, change, check nor delete the domain.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := b.create(t, tenantA, "example.com")
	b.publishAll(t, d)
	_, err := b.doms.Get(b.ctx, tenantB, "example.com")
	wantErr(t, err, 404, "DOMAIN_NOT_FOUND")
	_, err = b.doms.SetSendingEnabled(b.ctx, tenantB, "example.com", false)
	wantErr(t, err, 404, "DOMAIN_NOT_FOUND")
	_, err = b.doms.Check(b.ctx, tenantB, "example.com")
	wantErr(t, err, 404, "DOMAIN_NOT_FOUND")
	wantErr(t, b.doms.Delete(b.ctx, tenantB, "example.com"), 404, "DOMAIN_NOT_FOUND")
	items, next, err := b.doms.List(b.ctx, tenantB, page.Params{Limit: 20})
	if err != nil || len(items) != 0 || next != nil {
		t.Fatalf("B lists %v %v %v", items, next, err)
	}
	if g, err := b.doms.Get(b.ctx, tenantA, "example.com"); err != nil || g.Status != "pending" || g.LastCheckedAt != nil {
		t.Fatalf("A's domain after B's attempts: %v %+v", err, g)
	}
}

func TestListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, name := range []string{"a.example", "b.example", "c.example"} {
		b.clock.set(t0.Add(time.Duration(i) * time.Minute))
		b.create(t, tenantA, name)
	}
	b.clock.set(t0.Add(time.Minute)) // same createdAt as b: the name breaks the tie
	b.create(t, tenantA, "bb.example")
	b.create(t, tenantB, "z.example")
	var got []string
	var cursor *page.Cursor
	for pages := 0; ; pages++ {
		items, next, err := b.doms.List(b.ctx, tenantA, page.Params{After: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range items {
			got = append(got, d.Domain)
		}
		if next == nil {
			if pages != 1 {
				t.Fatalf("%d pages", pages+1)
			}
			break
		}
		cursor = next
	}
	if want := []string{"c.example", "bb.example", "b.example", "a.example"}; !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.create(t, tenantA, "example.com")
	if err := b.doms.Delete(b.ctx, tenantA, "EXAMPLE.com"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, b.doms.Delete(b.ctx, tenantA, "example.com"), 404, "DOMAIN_NOT_FOUND")
	wantErr(t, b.doms.Delete(b.ctx, tenantA, "not a domain"), 404, "DOMAIN_NOT_FOUND")
	wantErr(t, b.doms.CheckFrom(b.ctx, tenantA, "a@example.com"), 404, "DOMAIN_NOT_FOUND")
	b.create(t, tenantA, "example.com") // may be added again, with new tokens
}

// The sweep takes pending and verifying domains every CheckInterval and
// verified and failed ones daily, across tenants, most overdue first, at
// most limit per run.
func TestSweepPicksDueDomains(t *testing.T) {
	t.Parallel()
	b := setup(t)
	due := func(at time.Duration, limit int) []string {
		t.Helper()
		b.clock.set(t0.Add(at))
		rows, err := b.doms.DueForCheck(b.ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.TenantID+"/"+r.Domain)
		}
		slices.Sort(out)
		return out
	}
	sweep := func(at time.Duration, limit, want int) {
		t.Helper()
		b.clock.set(t0.Add(at))
		n, err := b.doms.Sweep(b.ctx, limit)
		if err != nil || n != want {
			t.Fatalf("sweep at %v checked %d (%v), want %d", at, n, err, want)
		}
	}
	b.create(t, tenantA, "pending.example")
	b.clock.set(t0.Add(time.Minute))
	b.create(t, tenantB, "other.example")
	v := b.create(t, tenantA, "verified.example")
	b.publishAll(t, v)
	b.check(t, t0.Add(2*time.Minute), tenantA, "verified.example")

	if got := due(9*time.Minute, 10); len(got) != 0 {
		t.Fatalf("due before the interval: %v", got)
	}
	if got, want := due(11*time.Minute, 10), []string{"ten_a/pending.example", "ten_b/other.example"}; !slices.Equal(got, want) {
		t.Fatalf("due %v, want %v", got, want)
	}
	if got := due(11*time.Minute, 1); !slices.Equal(got, []string{"ten_a/pending.example"}) {
		t.Fatalf("limit 1 took %v, want the most overdue", got)
	}
	sweep(11*time.Minute, 1, 1)
	if got := due(11*time.Minute, 10); !slices.Equal(got, []string{"ten_b/other.example"}) {
		t.Fatalf("after a sweep of one: %v", got)
	}
	sweep(11*time.Minute, 10, 1)
	for _, k := range [][2]string{{tenantA, "pending.example"}, {tenantB, "other.example"}} {
		if g, _ := b.doms.Get(b.ctx, k[0], k[1]); g.Status != "verifying" || !g.LastCheckedAt.Equal(t0.Add(11*time.Minute)) {
			t.Fatalf("%s after sweep: %+v", k[1], g)
		}
	}
	if got := due(20*time.Minute, 10); len(got) != 0 {
		t.Fatalf("due again before the interval: %v", got)
	}
	if got := due(22*time.Minute, 10); len(got) != 2 {
		t.Fatalf("verifying domains not due after the interval: %v", got)
	}
	// The verified one comes back after a day, the others every interval.
	if got, want := due(24*time.Hour+3*time.Minute, 10), []string{"ten_a/pending.example", "ten_a/verified.example", "ten_b/other.example"}; !slices.Equal(got, want) {
		t.Fatalf("due %v, want %v", got, want)
	}
	sweep(80*time.Hour, 10, 3)
	g, _ := b.doms.Get(b.ctx, tenantA, "pending.example")
	if g.Status != "failed" || !g.NextCheckAt.Equal(t0.Add(80*time.Hour+domains.RecheckVerified)) {
		t.Fatalf("pending domain after 80 hours: %+v", g)
	}
}

// A sweep whose resolver answers nothing postpones the domain it tried and
// stops.
func TestSweepStopsWhenResolverFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.create(t, tenantA, "a.example")
	b.create(t, tenantA, "b.example")
	b.dns.SetServFail(true)
	b.clock.set(t0.Add(time.Hour))
	n, err := b.doms.Sweep(b.ctx, 10)
	// The worker logs the lookups' failure, not the API's message.
	if n != 0 || !errors.Is(err, domains.ErrLookupFailed) || !strings.Contains(err.Error(), "SERVFAIL") {
		t.Fatalf("sweep: %d %v", n, err)
	}
	rows, err := b.doms.DueForCheck(b.ctx, 10)
	if err != nil || len(rows) != 1 {
		t.Fatalf("want one domain still due (the other postponed), got %v %v", rows, err)
	}
	postponed := "a.example"
	if rows[0].Domain == "a.example" {
		postponed = "b.example"
	}
	if g, _ := b.doms.Get(b.ctx, tenantA, postponed); g.Status != "pending" || !g.NextCheckAt.Equal(t0.Add(time.Hour+10*time.Minute)) {
		t.Fatalf("postponed domain: %+v", g)
	}
}
