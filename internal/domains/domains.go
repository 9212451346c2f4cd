// Package domains keeps a tenant's sending domains: name validation, the
// DNS records to publish (a verification TXT and three DKIM CNAMEs), checks
// against DNS_RESOLVER with the status and health they lead to, the
// periodic sweep, and the rules sending applies to a from address.
package domains

import (
	"context"
	"net/mail"
	"strings"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/queries"
)

// NotFound is the domain 404.
func NotFound() error { return apperr.NotFound("DOMAIN_NOT_FOUND", "domain") }

// NotVerified is the 422 for enabling, or sending from, a domain that is not
// verified.
func NotVerified() error {
	return apperr.Unprocessable("DOMAIN_NOT_VERIFIED", "sending domain not verified")
}

// SendingDisabled is the 403 for sending from a verified domain whose
// sendingEnabled is false (ADDENDUM section 8).
func SendingDisabled() error {
	return apperr.Forbidden("sending is not enabled for this domain")
}

// RecheckVerified is how often the sweep re-checks verified and failed
// domains; pending and verifying ones follow Store.CheckInterval.
const RecheckVerified = 24 * time.Hour

// Store keeps domains.
type Store struct {
	DB *store.DB
	// DNS answers checks; a *Checker in production.
	DNS Resolver
	// DKIMSuffix is DKIM_CNAME_SUFFIX, the target suffix of the DKIM CNAMEs.
	DKIMSuffix string
	// CheckInterval is DOMAIN_CHECK_INTERVAL; zero means 10 minutes.
	CheckInterval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// nextCheck is when the sweep looks again at a domain in status.
func (s *Store) nextCheck(status string, now time.Time) time.Time {
	if status == StatusVerified || status == StatusFailed {
		return now.Add(RecheckVerified)
	}
	if s.CheckInterval > 0 {
		return now.Add(s.CheckInterval)
	}
	return now.Add(10 * time.Minute)
}

// Records are the DNS records the tenant publishes for d: the verification
// TXT first, then one DKIM CNAME per token.
func (s *Store) Records(d queries.Domain) []DNSRecord {
	out := []DNSRecord{{Type: TypeTXT, Name: "_tidings." + d.Domain,
		Value: "tidings-verification=" + d.VerificationToken, Purpose: PurposeVerification}}
	for _, t := range d.DkimTokens {
		out = append(out, DNSRecord{Type: TypeCNAME, Name: t + "._domainkey." + d.Domain,
			Value: t + "." + s.DKIMSuffix, Purpose: PurposeDKIM})
	}
	return out
}

// key is the stored form of a domain named in a path; a name that cannot be
// stored cannot have been added.
func key(domain string) (string, error) {
	name, msg := Normalize(domain)
	if msg != "" {
		return "", NotFound()
	}
	return name, nil
}

// Create adds a domain in status pending with fresh tokens. An invalid name
// or one the tenant already added is a VALIDATION_ERROR on "domain".
func (s *Store) Create(ctx context.Context, tenantID, domain string) (queries.Domain, error) {
	name, msg := Normalize(domain)
	if msg != "" {
		return queries.Domain{}, apperr.Invalid("domain", msg)
	}
	now := s.now()
	var d queries.Domain
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		q.AuditResource(name)
		var err error
		d, err = q.DomainInsert(ctx, queries.DomainInsertParams{TenantID: tenantID, Domain: name,
			VerificationToken: newToken(), DkimTokens: []string{newToken(), newToken(), newToken()},
			NextCheckAt: s.nextCheck(StatusPending, now), CreatedAt: now})
		return err
	})
	if store.IsUniqueViolation(err, "domains_pkey") {
		return d, apperr.Invalid("domain", "has already been added")
	}
	return d, err
}

// Get returns a domain.
func (s *Store) Get(ctx context.Context, tenantID, domain string) (queries.Domain, error) {
	name, err := key(domain)
	if err != nil {
		return queries.Domain{}, err
	}
	d, err := s.DB.DomainGet(ctx, queries.DomainGetParams{TenantID: tenantID, Domain: name})
	if store.IsNoRows(err) {
		return d, NotFound()
	}
	return d, err
}

// List returns a page of the tenant's domains, newest first, and the cursor
// of the next page (nil on the last).
func (s *Store) List(ctx context.Context, tenantID string, p page.Params) ([]queries.Domain, *page.Cursor, error) {
	arg := queries.DomainListParams{TenantID: tenantID, Lim: int32(p.Limit + 1)}
	arg.BeforeTime, arg.BeforeDomain = page.Before(p.After, page.Far)
	rows, err := s.DB.DomainList(ctx, arg)
	if err != nil {
		return nil, nil, err
	}
	rows, next := page.Trim(rows, p.Limit, func(d queries.Domain) page.Cursor {
		return page.Cursor{Time: d.CreatedAt, ID: d.Domain}
	})
	return rows, next, nil
}

// SetSendingEnabled applies PATCH sendingEnabled. Enabling a domain that is
// not verified is DOMAIN_NOT_VERIFIED; disabling is always allowed.
func (s *Store) SetSendingEnabled(ctx context.Context, tenantID, domain string, enabled bool) (queries.Domain, error) {
	return s.Update(ctx, tenantID, domain, &enabled, nil)
}

func (s *Store) setSendingEnabled(ctx context.Context, q *queries.Queries, tenantID, name string, enabled bool) (queries.Domain, error) {
	d, err := q.DomainSetSendingEnabled(ctx, queries.DomainSetSendingEnabledParams{
		SendingEnabled: enabled, TenantID: tenantID, Domain: name})
	if !store.IsNoRows(err) {
		return d, err
	}
	// No row: the domain is missing, or enabling met an unverified one.
	if _, err := q.DomainGet(ctx, queries.DomainGetParams{TenantID: tenantID, Domain: name}); err != nil {
		if store.IsNoRows(err) {
			return d, NotFound()
		}
		return d, err
	}
	return d, NotVerified()
}

// Delete removes a domain; sends from it then fail with DOMAIN_NOT_FOUND.
func (s *Store) Delete(ctx context.Context, tenantID, domain string) error {
	name, err := key(domain)
	if err != nil {
		return err
	}
	return s.DB.Tx(ctx, func(q *queries.Queries) error { // with the request's audit entry
		n, err := q.DomainDelete(ctx, queries.DomainDeleteParams{TenantID: tenantID, Domain: name})
		if err == nil && n == 0 {
			return NotFound()
		}
		return err
	})
}

// CheckFrom applies ADDENDUM section 8 to a from address ("a@b" or
// "Name <a@b>"): its domain not added is DOMAIN_NOT_FOUND, added but not
// verified DOMAIN_NOT_VERIFIED, verified with sendingEnabled false
// FORBIDDEN. The domain must match exactly: a verified example.com does not
// cover news.example.com. An unparsable address is a VALIDATION_ERROR on
// "from".
func (s *Store) CheckFrom(ctx context.Context, tenantID, fromAddress string) error {
	_, err := s.FromDomain(ctx, tenantID, fromAddress)
	return err
}

// FromDomain is CheckFrom that also returns the domain sent from.
func (s *Store) FromDomain(ctx context.Context, tenantID, fromAddress string) (queries.Domain, error) {
	addr, err := mail.ParseAddress(fromAddress)
	if err != nil {
		return queries.Domain{}, apperr.Invalid("from", "must be an email address")
	}
	d, err := s.Get(ctx, tenantID, addr.Address[strings.LastIndexByte(addr.Address, '@')+1:])
	switch {
	case err != nil:
		return d, err
	case d.Status != StatusVerified:
		return d, NotVerified()
	case !d.SendingEnabled:
		return d, SendingDisabled()
	}
	return d, nil
}

// HasVerified reports whether the tenant has at least one verified domain,
// which leaving sandbox requires (API.md section 3).
func (s *Store) HasVerified(ctx context.Context, tenantID string) (bool, error) {
	n, err := s.DB.DomainCountVerified(ctx, tenantID)
	return n > 0, err
}
