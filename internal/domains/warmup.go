package domains

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tidings/internal/apperr"
	"tidings/internal/localtime"
	"tidings/internal/store"
	"tidings/queries"
)

// Warm-up (docs/decisions.md "Throttles and warm-up"): a new sending
// domain starts gently. Day 1 is the tenant's day of the first sequence or
// broadcast message after warm-up was turned on; day n may send the
// schedule's n-th limit of those messages, and past the schedule there is
// no limit. Transactional messages are neither held nor counted.

// DefaultWarmup is the schedule of a domain that names none.
var DefaultWarmup = []int{50, 100, 500, 1000, 5000, 10000, 20000, 50000, 100000}

// MaxWarmupDays bounds a schedule's length (a year of days).
const MaxWarmupDays = 366

// CheckSchedule accepts a non-empty, non-decreasing list of positive
// daily limits.
func CheckSchedule(s []int) error {
	if len(s) == 0 || len(s) > MaxWarmupDays {
		return apperr.Invalid("warmup.schedule", fmt.Sprintf("must list 1 to %d daily limits", MaxWarmupDays))
	}
	for i, n := range s {
		if n <= 0 || n > 1<<30 {
			return apperr.Invalid("warmup.schedule", fmt.Sprintf("item %d must be a positive integer", i))
		}
		if i > 0 && n < s[i-1] {
			return apperr.Invalid("warmup.schedule", fmt.Sprintf("must not decrease: item %d (%d) is below item %d (%d)", i, n, i-1, s[i-1]))
		}
	}
	return nil
}

// WarmupDay is the day number of today (a date at UTC midnight) for a
// warm-up started on startedOn; 0 before it started.
func WarmupDay(startedOn *time.Time, today time.Time) int {
	if startedOn == nil {
		return 0
	}
	d := int(today.Sub(*startedOn).Hours()/24) + 1
	return max(d, 1)
}

// WarmupLimit is day's limit under schedule (day 0, not started, is day
// 1's); ok is false past the schedule: no limit.
func WarmupLimit(schedule []int, day int) (limit int, ok bool) {
	day = max(day, 1)
	if day > len(schedule) {
		return 0, false
	}
	return schedule[day-1], true
}

// ScheduleOf is d's schedule, the default when it names none.
func ScheduleOf(d queries.Domain) []int { return schedule32(d.WarmupSchedule) }

func schedule32(s []int32) []int {
	if s == nil {
		return DefaultWarmup
	}
	out := make([]int, len(s))
	for i, n := range s {
		out[i] = int(n)
	}
	return out
}

// Today is the date of now in loc, as a UTC midnight (what a Postgres date
// column reads back as).
func Today(now time.Time, loc *time.Location) time.Time {
	y, m, d := now.In(loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// NextMidnight is the start of the day after now's in loc.
func NextMidnight(now time.Time, loc *time.Location) time.Time {
	y, m, d := now.In(loc).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// Warmup is a domain's warm-up as the API shows it.
type Warmup struct {
	Enabled  bool  `json:"enabled"`
	Schedule []int `json:"schedule"`
	// Day is null before the first message after warm-up was turned on.
	Day *int `json:"day"`
	// DailyLimit is today's limit (day 1's before the first message), null
	// past the schedule or when warm-up is off.
	DailyLimit *int `json:"dailyLimit"`
	SentToday  int  `json:"sentToday"`
}

// WarmupOf reads d's warm-up as of now in its tenant's zone. A domain
// with warm-up off counts nothing: no query.
func (s *Store) WarmupOf(ctx context.Context, d queries.Domain) (Warmup, error) {
	w, err := s.WarmupsOf(ctx, d.TenantID, []queries.Domain{d})
	if err != nil {
		return Warmup{}, err
	}
	return w[0], nil
}

// WarmupsOf reads the warm-ups of one tenant's domains (a page of the
// list) in one query whatever their number, none when no domain warms up:
// the tenant's zone and the counts of the days around now, of which its
// today is one.
func (s *Store) WarmupsOf(ctx context.Context, tenantID string, ds []queries.Domain) ([]Warmup, error) {
	out := make([]Warmup, len(ds))
	var names []string
	for i, d := range ds {
		out[i] = Warmup{Enabled: d.WarmupEnabled, Schedule: ScheduleOf(d)}
		if d.WarmupEnabled {
			names = append(names, d.Domain)
		}
	}
	if len(names) == 0 {
		return out, nil
	}
	now := s.now()
	// Every zone's date is within a day of UTC's.
	utc := Today(now, time.UTC)
	rows, err := s.DB.WarmupSentAround(ctx, queries.WarmupSentAroundParams{TenantID: tenantID, Domains: names,
		FromDay: utc.AddDate(0, 0, -1), ToDay: utc.AddDate(0, 0, 1)})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, NotFound() // the tenant is gone
	}
	today := Today(now, localtime.Zone(nil, rows[0].Timezone))
	sent := map[string]int{}
	for _, r := range rows {
		if r.Domain != nil && r.Day != nil && r.Sent != nil && r.Day.Equal(today) {
			sent[*r.Domain] = int(*r.Sent)
		}
	}
	for i, d := range ds {
		if !d.WarmupEnabled {
			continue
		}
		w := &out[i]
		day := WarmupDay(d.WarmupStartedOn, today)
		if day > 0 {
			w.Day = &day
		}
		if limit, ok := WarmupLimit(w.Schedule, day); ok {
			w.DailyLimit = &limit
		}
		w.SentToday = sent[d.Domain]
	}
	return out, nil
}

// WarmupPatch is a change of warm-up: nil fields stay; ResetSchedule puts
// the default schedule back.
type WarmupPatch struct {
	Enabled       *bool
	Schedule      []int
	ResetSchedule bool
}

// Update applies PATCH /api/domains/{domain}: sendingEnabled and warm-up,
// either or both, in one transaction.
func (s *Store) Update(ctx context.Context, tenantID, domain string, sending *bool, w *WarmupPatch) (queries.Domain, error) {
	name, err := key(domain)
	if err != nil {
		return queries.Domain{}, err
	}
	if w != nil && w.Schedule != nil {
		if err := CheckSchedule(w.Schedule); err != nil {
			return queries.Domain{}, err
		}
	}
	var out queries.Domain
	err = s.DB.InTx(ctx, func(q *store.Tx) error { // with the request's audit entry
		var err error
		if sending != nil {
			if out, err = s.setSendingEnabled(ctx, q.Queries, tenantID, name, *sending); err != nil {
				return err
			}
		}
		if w == nil {
			return nil
		}
		p := queries.DomainWarmupSetParams{TenantID: tenantID, Domain: name, Enabled: w.Enabled, ResetSchedule: w.ResetSchedule}
		for _, n := range w.Schedule {
			p.Schedule = append(p.Schedule, int32(n))
		}
		out, err = q.DomainWarmupSet(ctx, p)
		if errors.Is(err, pgx.ErrNoRows) {
			return NotFound()
		}
		return err
	})
	return out, err
}
