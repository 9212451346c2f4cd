package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"tidings/internal/localtime"
	"tidings/internal/store"
	"tidings/internal/tenants"
	"tidings/queries"
)

// The frequency cap (ADDENDUM 17) is checked where a sequence or broadcast
// message's record is written, in the transaction that writes it, under a
// per-contact lock (FrequencyLock) held to its commit: the count sees
// every record a concurrent worker committed for the contact, and no two
// workers can both take the last place. Transactional sends neither count
// nor are capped.

// CappedError is a sequence step or broadcast message over its tenant's
// frequency cap: nothing was written or sent. Until is when the contact's
// period ends (a step waits until then).
type CappedError struct{ Until time.Time }

func (e *CappedError) Error() string {
	return fmt.Sprintf("over the frequency cap until %s", e.Until.UTC().Format(time.RFC3339))
}

// IsCapped reports whether err is a CappedError, and returns it.
func IsCapped(err error) (*CappedError, bool) {
	var c *CappedError
	ok := errors.As(err, &c)
	return c, ok
}

// capped is one message the cap must judge.
type capped struct {
	k       int // its index among the caller's
	tenant  queries.Tenant
	contact queries.Contact
}

// applyCap locks the contacts of the messages whose tenant has a cap (in
// key order), counts each contact's sequence and broadcast records of its
// current period, and returns the messages over the cap with the end of
// their period; the others may be written in the same transaction.
func applyCap(ctx context.Context, q *store.Tx, now time.Time, msgs []capped) (map[int]time.Time, error) {
	slices.SortFunc(msgs, func(a, b capped) int {
		if a.tenant.ID != b.tenant.ID {
			return compare(a.tenant.ID, b.tenant.ID)
		}
		if a.contact.ID != b.contact.ID {
			return compare(a.contact.ID, b.contact.ID)
		}
		return a.k - b.k
	})
	over := map[int]time.Time{}
	counted := map[[2]string]int{}
	for _, m := range msgs {
		c := tenants.CapOf(m.tenant)
		key := [2]string{m.tenant.ID, m.contact.ID}
		start, end := localtime.Period(now, localtime.Zone(contactTZ(m.contact), m.tenant.Timezone), c.Period == "week")
		n, seen := counted[key]
		if !seen {
			if err := q.FrequencyLock(ctx, queries.FrequencyLockParams{TenantID: m.tenant.ID, ContactID: m.contact.ID}); err != nil {
				return nil, err
			}
			cnt, err := q.FrequencyCount(ctx, queries.FrequencyCountParams{TenantID: m.tenant.ID, ContactID: m.contact.ID,
				FromTime: start, ToTime: end})
			if err != nil {
				return nil, err
			}
			n = int(cnt)
		}
		if n >= c.Max {
			over[m.k] = end
		} else {
			n++ // this message takes a place
		}
		counted[key] = n
	}
	return over, nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// contactTZ is the contact's timezone property (any type; localtime.Zone
// judges it).
func contactTZ(c queries.Contact) any {
	var props map[string]any
	if err := json.Unmarshal(c.Properties, &props); err != nil {
		return nil
	}
	return props["timezone"]
}
