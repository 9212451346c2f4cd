package domains

import (
	"context"
	"errors"
	"fmt"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/store"
	"tidings/queries"
)

// ErrLookupFailed is a check that learnt nothing: no lookup of the four got
// an answer (resolver unreachable or failing). Nothing about the domain is
// changed; it is not the domain's fault. Check returns it inside
// lookupFailed's DNS_UNAVAILABLE.
var ErrLookupFailed = errors.New("DNS lookups failed")

// lookupFailed is the error of a check that learnt nothing: the resolver
// is at fault, not the request, and nothing was stored, so the client may
// simply try again (KindUnavailable: 503, docs/decisions.md). The lookup's
// failure stays the cause, for errors.Is and the log.
func lookupFailed(domain string, err error) error {
	return apperr.Unavailable("DNS_UNAVAILABLE",
		"the DNS resolver gave no answer, so the domain was not checked; try again later",
		fmt.Errorf("%w for %s: %v", ErrLookupFailed, domain, err))
}

// Checked is a domain after a check, with the check's message.
type Checked struct {
	Domain  queries.Domain
	Message string
}

// Check looks the domain's records up and stores the outcome (Evaluate):
// status, health, missing records, lastCheckedAt, verifiedAt the first time
// it verifies, and the time of the next periodic check. POST /verify and
// the sweep both come here.
func (s *Store) Check(ctx context.Context, tenantID, domain string) (Checked, error) {
	d, err := s.Get(ctx, tenantID, domain)
	if err != nil {
		return Checked{}, err
	}
	// DNS is asked outside the transaction: no row lock is held while a
	// slow server times out.
	found := s.DNS.Lookup(ctx, s.Records(d))
	if err := allFailed(found); err != nil {
		return Checked{}, lookupFailed(d.Domain, err)
	}
	now := s.now()
	var out Checked
	err = s.DB.Tx(ctx, func(q *queries.Queries) error {
		// The lock makes concurrent checks (sweep and /verify) apply one
		// after the other, each to the status the other left.
		cur, err := q.DomainGetForUpdate(ctx, queries.DomainGetForUpdateParams{TenantID: tenantID, Domain: d.Domain})
		if store.IsNoRows(err) {
			return NotFound()
		}
		if err != nil {
			return err
		}
		o := Evaluate(found, cur.CreatedAt, now, cur.Status)
		out.Message = o.Message
		out.Domain, err = q.DomainChecked(ctx, queries.DomainCheckedParams{TenantID: tenantID, Domain: d.Domain,
			Status: o.Status, HealthStatus: o.Health, MissingRecords: o.Missing, CheckedAt: now,
			NextCheckAt: s.nextCheck(o.Status, now)})
		return err
	})
	return out, err
}

// allFailed returns the first lookup error when every lookup failed.
func allFailed(found []Found) error {
	for _, f := range found {
		if f.Err == nil {
			return nil
		}
	}
	if len(found) == 0 {
		return nil
	}
	return found[0].Err
}

// DueForCheck returns up to limit domains, across tenants, whose periodic
// check is due, the most overdue first.
func (s *Store) DueForCheck(ctx context.Context, limit int) ([]queries.DomainDueRow, error) {
	return s.DB.DomainDue(ctx, queries.DomainDueParams{Now: s.now(), Lim: int32(limit)})
}

// sweepReserve is the time a sweep keeps before its context's deadline: it
// takes no further domain once less is left, so a run ends cleanly and the
// rest stay due for the next one.
const sweepReserve = 2 * DefaultTimeout

// Sweep checks up to limit due domains one after the other and returns how
// many it checked. A check that learns nothing (ErrLookupFailed) postpones
// that domain by its usual interval and ends the run: the resolver is
// likely down for all, and the others stay due for the next run.
func (s *Store) Sweep(ctx context.Context, limit int) (int, error) {
	due, err := s.DueForCheck(ctx, limit)
	if err != nil {
		return 0, err
	}
	checked := 0
	for _, d := range due {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < sweepReserve {
			return checked, nil
		}
		_, err := s.Check(ctx, d.TenantID, d.Domain)
		switch {
		case err == nil:
			checked++
		case apperr.IsCode(err, "DOMAIN_NOT_FOUND"): // deleted meanwhile
		case errors.Is(err, ErrLookupFailed):
			cur, gerr := s.Get(ctx, d.TenantID, d.Domain)
			if gerr == nil {
				_, gerr = s.DB.DomainPostpone(ctx, queries.DomainPostponeParams{TenantID: d.TenantID,
					Domain: d.Domain, NextCheckAt: s.nextCheck(cur.Status, s.now())})
			}
			// The worker's log wants the lookups' failure, not the API's
			// message.
			return checked, errors.Join(errors.Unwrap(err), gerr)
		default:
			return checked, err
		}
	}
	return checked, nil
}
