package metrics

import (
	"context"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/queries"
)

// Periods of GET /api/metrics.
const (
	Monthly = "monthly"
	Daily   = "daily"
)

// MaxRangeDays is the longest daily range, both ends included (ADDENDUM 11).
const MaxRangeDays = 93

// Layouts of the query parameters and of the answers' dates.
const (
	DateLayout  = "2006-01-02"
	MonthLayout = "2006-01"
)

// Counters are counts summed over a period, and when they last changed;
// a zero UpdatedAt means nothing was counted in the period.
type Counters struct {
	Counts
	UpdatedAt time.Time
}

func (c *Counters) add(o Counters) {
	c.Counts.add(o.Counts)
	if o.UpdatedAt.After(c.UpdatedAt) {
		c.UpdatedAt = o.UpdatedAt
	}
}

// Day is one UTC day's counters of a tenant.
type Day struct {
	Date time.Time
	Counters
}

// Store reads the counters.
type Store struct {
	DB *store.DB
	// Now is the clock that decides the current month and day; nil means
	// time.Now.
	Now func() time.Time
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Query is GET /api/metrics's query parameters as received.
type Query struct {
	Period, YearMonth, Date, StartDate, EndDate string
}

// Report is the tenant's metrics in one of the three shapes of ADDENDUM 11:
// a month (Period Monthly), a day (Period Daily) or a daily range (Range).
type Report struct {
	Period string
	// Month is the first day of the month of a monthly or daily report.
	Month time.Time
	// Date is the day of a daily report.
	Date time.Time
	// Counters are the monthly or daily report's counts.
	Counters Counters
	// Range is set for a daily range: its days, Start to End, each present
	// (zeros on days with nothing counted).
	Range      bool
	Start, End time.Time
	Days       []Day
}

// request is a validated Query.
type request struct {
	period      string
	month, date time.Time
	rangeOf     bool
	start, end  time.Time
}

// parse validates q. The period is monthly unless period=daily or a daily
// parameter (date, startDate, endDate) says otherwise; a parameter that
// belongs to the other period, a date beside a range, or half a range is
// VALIDATION_ERROR naming it rather than ignored, since an ignored
// parameter would answer a question the client did not ask
// (docs/decisions.md "Metrics"). Defaults: the current UTC month, today.
func (q Query) parse(now time.Time) (request, error) {
	var f apperr.Fields
	r := request{period: q.Period}
	daily := q.Date != "" || q.StartDate != "" || q.EndDate != ""
	switch q.Period {
	case "":
		r.period = Monthly
		if daily {
			r.period = Daily
		}
	case Monthly, Daily:
	default:
		f.Add("period", "must be one of daily, monthly")
	}
	if r.period == Monthly && q.Period == Monthly {
		for name, v := range map[string]string{"date": q.Date, "startDate": q.StartDate, "endDate": q.EndDate} {
			f.Check(v == "", name, "is only used with period=daily")
		}
	}
	if r.period == Daily {
		f.Check(q.YearMonth == "", "yearMonth", "is only used with period=monthly (a daily answer names the month of its date)")
	}
	r.month = parseMonth(q.YearMonth, now, &f)
	r.date = parseDay(q.Date, "date", now, &f)
	if q.StartDate != "" || q.EndDate != "" {
		r.rangeOf = true
		f.Check(q.Date == "", "date", "cannot be combined with startDate and endDate")
		f.Check(q.StartDate != "", "startDate", "is required with endDate")
		f.Check(q.EndDate != "", "endDate", "is required with startDate")
		r.start = parseDay(q.StartDate, "startDate", now, &f)
		r.end = parseDay(q.EndDate, "endDate", now, &f)
		if q.StartDate != "" && q.EndDate != "" && !r.start.IsZero() && !r.end.IsZero() {
			if r.start.After(r.end) {
				f.Add("startDate", "must not be after endDate")
			} else if days(r.start, r.end) > MaxRangeDays {
				f.Add("endDate", "must be at most 93 days from startDate, both included")
			}
		}
	}
	if r.period == Daily && !r.rangeOf {
		r.month = firstOfMonth(r.date)
	}
	return r, f.Err()
}

// days counts the days from start to end, both included.
func days(start, end time.Time) int { return int(end.Sub(start).Hours()/24) + 1 }

func firstOfMonth(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func lastOfMonth(month time.Time) time.Time { return month.AddDate(0, 1, -1) }

// parseMonth reads a YYYY-MM parameter; "" is the current month.
func parseMonth(v string, now time.Time, f *apperr.Fields) time.Time {
	if v == "" {
		return firstOfMonth(now)
	}
	t, err := time.Parse(MonthLayout, v)
	if err != nil || t.Year() < 1 {
		f.Add("yearMonth", "must be a month as YYYY-MM")
		return time.Time{}
	}
	return t
}

// parseDay reads a YYYY-MM-DD parameter; "" is today.
func parseDay(v, name string, now time.Time, f *apperr.Fields) time.Time {
	if v == "" {
		return time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	}
	t, err := time.Parse(DateLayout, v)
	if err != nil || t.Year() < 1 {
		f.Add(name, "must be a date as YYYY-MM-DD")
		return time.Time{}
	}
	return t
}

// YearMonth validates a yearMonth parameter ("" is the current UTC month)
// and returns the month's first day.
func (s *Store) YearMonth(v string) (time.Time, error) {
	var f apperr.Fields
	m := parseMonth(v, s.now(), &f)
	return m, f.Err()
}

// Tenant answers GET /api/metrics: the tenant's counters for a month, a day
// or each day of a range, as q asks (parse).
func (s *Store) Tenant(ctx context.Context, tenantID string, q Query) (Report, error) {
	r, err := q.parse(s.now())
	if err != nil {
		return Report{}, err
	}
	switch {
	case r.rangeOf:
		ds, err := s.days(ctx, tenantID, r.start, r.end)
		return Report{Range: true, Start: r.start, End: r.end, Days: ds}, err
	case r.period == Daily:
		ds, err := s.days(ctx, tenantID, r.date, r.date)
		if err != nil {
			return Report{}, err
		}
		return Report{Period: Daily, Month: r.month, Date: r.date, Counters: ds[0].Counters}, nil
	}
	ds, err := s.days(ctx, tenantID, r.month, lastOfMonth(r.month))
	if err != nil {
		return Report{}, err
	}
	var sum Counters
	for _, d := range ds {
		sum.add(d.Counters)
	}
	return Report{Period: Monthly, Month: r.month, Counters: sum}, nil
}

// days reads the tenant's counters of each day from first to last, with
// zeros on days without counts.
func (s *Store) days(ctx context.Context, tenantID string, first, last time.Time) ([]Day, error) {
	rows, err := s.DB.MetricsTenantDays(ctx, queries.MetricsTenantDaysParams{TenantID: tenantID,
		FirstDay: first, LastDay: last})
	if err != nil {
		return nil, err
	}
	out := make([]Day, 0, days(first, last))
	i := 0
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		day := Day{Date: d}
		// Rows come ordered by day; pgx reads a date as midnight UTC.
		if i < len(rows) && rows[i].Period.Equal(d) {
			r := rows[i]
			day.Counters = Counters{Counts: Counts{Scheduled: r.Scheduled, Sent: r.Sent, Cancelled: r.Cancelled,
				Delivered: r.Delivered, BouncedHard: r.BouncedHard, BouncedSoft: r.BouncedSoft,
				Complained: r.Complained, Opened: r.Opened, Clicked: r.Clicked,
				MachineOpened: r.MachineOpened, MachineClicked: r.MachineClicked}, UpdatedAt: r.UpdatedAt}
			i++
		}
		out = append(out, day)
	}
	return out, nil
}

// MonthlySent is the tenant's sent count in the current UTC month, and
// that month as YYYY-MM: the tenant's monthlySendCount and
// monthlySendCountPeriod.
func (s *Store) MonthlySent(ctx context.Context, tenantID string) (int64, string, error) {
	month := firstOfMonth(s.now())
	n, err := s.DB.MetricsTenantSent(ctx, queries.MetricsTenantSentParams{TenantID: tenantID,
		FirstDay: month, LastDay: lastOfMonth(month)})
	return n, month.Format(MonthLayout), err
}

// Scoped is one sequence's or template's counters for a month.
type Scoped struct {
	ID string
	Counters
	createdAt time.Time // the list's position
}

// ScopedPage is a page of GET /api/metrics/sequences or /templates.
type ScopedPage struct {
	Month time.Time
	Items []Scoped
	// Next is the next page's position; nil on the last page.
	Next *page.Cursor
}

// The 404s of the sequence and template routes. They are the codes of
// internal/sequences and internal/templates, built here so that counting,
// which contacts and delivery import, does not import those packages.
func sequenceNotFound() *apperr.Error { return apperr.NotFound("SEQUENCE_NOT_FOUND", "sequence") }
func templateNotFound() *apperr.Error { return apperr.NotFound("TEMPLATE_NOT_FOUND", "template") }

// ScopedOne is one sequence's or template's (scope) counters for the month
// yearMonth ("" is the current UTC month); SEQUENCE_NOT_FOUND or
// TEMPLATE_NOT_FOUND when the tenant has no such object (a deleted one's
// counts stay in the tenant's). A template's are its sends of every kind
// (transactional and sequence).
func (s *Store) ScopedOne(ctx context.Context, tenantID string, scope Scope, id, yearMonth string) (Scoped, time.Time, error) {
	month, err := s.YearMonth(yearMonth)
	if err != nil {
		return Scoped{}, month, err
	}
	r, err := s.DB.MetricsScopedGet(ctx, queries.MetricsScopedGetParams{Scope: string(scope), TenantID: tenantID, ID: id, Month: month})
	if err != nil {
		notFound := sequenceNotFound()
		if scope == ScopeTemplate {
			notFound = templateNotFound()
		}
		return Scoped{}, month, apperr.Specific(err, apperr.KindNotFound, notFound)
	}
	return scoped(r.ID, time.Time{}, queries.MetricsScopedListRow{Scheduled: r.Scheduled, Sent: r.Sent,
		Cancelled: r.Cancelled, Delivered: r.Delivered, BouncedHard: r.BouncedHard, BouncedSoft: r.BouncedSoft,
		Complained: r.Complained, Opened: r.Opened, Clicked: r.Clicked,
		MachineOpened: r.MachineOpened, MachineClicked: r.MachineClicked, UpdatedAt: r.UpdatedAt}), month, nil
}

// ScopedList is a page of the tenant's sequences or templates (scope),
// newest first as GET /api/sequences and /api/templates list them, each
// with its counters for the month yearMonth (zeros for one without
// counts).
func (s *Store) ScopedList(ctx context.Context, tenantID string, scope Scope, yearMonth string, p page.Params) (ScopedPage, error) {
	month, err := s.YearMonth(yearMonth)
	if err != nil {
		return ScopedPage{}, err
	}
	items, next, err := page.List(p, func(q page.Query) ([]Scoped, error) {
		rows, err := s.DB.MetricsScopedList(ctx, queries.MetricsScopedListParams{Scope: string(scope), TenantID: tenantID,
			BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit, Month: month})
		out := make([]Scoped, len(rows))
		for i, r := range rows {
			out[i] = scoped(r.ID, r.CreatedAt, r)
		}
		return out, err
	}, position)
	return ScopedPage{Month: month, Items: items, Next: next}, err
}

func position(s Scoped) page.Cursor { return page.Cursor{Time: s.createdAt, ID: s.ID} }

// scoped builds a Scoped from the counters of a scoped read's row. The
// queries write 0001-01-01 for "never updated", which is Go's zero time.
func scoped(id string, createdAt time.Time, r queries.MetricsScopedListRow) Scoped {
	return Scoped{ID: id, createdAt: createdAt, Counters: Counters{Counts: Counts{Scheduled: r.Scheduled,
		Sent: r.Sent, Cancelled: r.Cancelled, Delivered: r.Delivered, BouncedHard: r.BouncedHard,
		BouncedSoft: r.BouncedSoft, Complained: r.Complained, Opened: r.Opened, Clicked: r.Clicked,
		MachineOpened: r.MachineOpened, MachineClicked: r.MachineClicked},
		UpdatedAt: r.UpdatedAt}}
}
