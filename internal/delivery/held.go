package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"tidings/internal/domains"
	"tidings/internal/localtime"
	"tidings/internal/store"
	"tidings/internal/throttle"
	"tidings/queries"
)

// Holds (docs/decisions.md "Throttles and warm-up"): a sequence or
// broadcast message whose destination group's bucket is empty
// (DESTINATION_LIMITS), or whose sending domain has sent its warm-up day's
// limit, gets no record and is not sent: it waits, untried, until the time
// the hold names (a step's scheduledFor moves there; a broadcast recipient
// stays queued, due then). Both are judged before the record is written,
// so no record ever waits for them (ADDENDUM 19). Transactional messages
// are never held.

// HeldError is a message held back: nothing was written or sent; it may go
// at Until. By names the hold (`destination:<group>`, `warmup:<domain>`).
type HeldError struct{ throttle.Hold }

func (e *HeldError) Error() string {
	return fmt.Sprintf("held by %s until %s", e.By, e.Until.UTC().Format(time.RFC3339))
}

// IsHeld reports whether err is a HeldError, and returns it.
func IsHeld(err error) (*HeldError, bool) {
	var h *HeldError
	ok := errors.As(err, &h)
	return h, ok
}

// admit holds the background messages among idx whose destination group
// cannot take them now (their results get a HeldError) and returns the
// others. A transactional batch takes the tokens there are and is never
// held.
func (s *Sender) admit(ctx context.Context, preps []*prepared, idx []int, res []StepResult, background bool) ([]int, error) {
	if s.Throttle == nil || len(idx) == 0 {
		return idx, nil
	}
	to := make([]string, len(idx))
	for k, i := range idx {
		to[k] = preps[i].msg.To
	}
	if !background {
		if err := s.Throttle.TakeFree(ctx, to); err != nil {
			s.Log.Warn("destination throttle not counted for transactional sends", "err", err)
		}
		return idx, nil
	}
	holds, err := s.Throttle.Admit(ctx, to)
	if err != nil {
		return nil, err
	}
	var out []int
	for k, i := range idx {
		if h := holds[k]; h != nil {
			res[i].Err = &HeldError{*h}
			continue
		}
		out = append(out, i)
	}
	return out, nil
}

// warmupKey is one sending domain of one tenant.
type warmupKey struct{ tenant, domain string }

// applyWarmup judges, in the transaction that writes the records, the
// messages among idx sent from a domain warming up: under the domain row's
// lock it counts today's messages (the tenant's day), lets through what is
// left of the day's limit and holds the rest until the tenant's next
// midnight. Day 1 is set with the first message counted.
func applyWarmup(ctx context.Context, q *store.Tx, now time.Time, preps []*prepared, idx []int) (map[int]*HeldError, error) {
	byKey := map[warmupKey][]int{}
	var keys []warmupKey
	for _, i := range idx {
		p := preps[i]
		if p.warmup == "" {
			continue
		}
		k := warmupKey{p.rec.TenantID, p.warmup}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	// In key order: two batches of one tenant lock its domains alike.
	slices.SortFunc(keys, func(a, b warmupKey) int {
		if c := compare(a.tenant, b.tenant); c != 0 {
			return c
		}
		return compare(a.domain, b.domain)
	})
	held := map[int]*HeldError{}
	for _, k := range keys {
		loc := preps[byKey[k][0]].loc
		today := domains.Today(now, loc)
		w, err := q.WarmupLock(ctx, queries.WarmupLockParams{TenantID: k.tenant, Domain: k.domain, Day: today})
		if store.IsNoRows(err) {
			continue // warm-up was turned off meanwhile
		}
		if err != nil {
			return nil, err
		}
		msgs := byKey[k]
		take := len(msgs)
		limit, limited := domains.WarmupLimit(schedule(w.WarmupSchedule), domains.WarmupDay(w.WarmupStartedOn, today))
		if limited {
			take = max(0, min(take, limit-int(w.Sent)))
		}
		until := domains.NextMidnight(now, loc)
		for _, i := range msgs[take:] {
			held[i] = &HeldError{throttle.Hold{Until: until, By: "warmup:" + k.domain}}
		}
		if take > 0 {
			if err := q.WarmupCount(ctx, queries.WarmupCountParams{TenantID: k.tenant, Domain: k.domain,
				Day: today, N: int32(take)}); err != nil {
				return nil, err
			}
		}
	}
	return held, nil
}

func schedule(s []int32) []int {
	return domains.ScheduleOf(queries.Domain{WarmupSchedule: s})
}

// tenantZone is the tenant's time zone (its day bounds warm-up).
func tenantZone(t queries.Tenant) *time.Location { return localtime.Zone(nil, t.Timezone) }
