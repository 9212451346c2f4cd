package api

import (
	"github.com/gofiber/fiber/v2"

	"tidings/internal/metrics"
	"tidings/internal/page"
)

// Metrics (API.md "Metrics", ADDENDUM section 11): reads of the counters
// that internal/metrics keeps.

// countersJSON is API.md's "Metrics counters". bounced is hard plus soft;
// replied stays 0 until inbound mail is handled; updatedAt is null while
// nothing has been counted in the period.
type countersJSON struct {
	Scheduled   int64 `json:"scheduled"`
	Sent        int64 `json:"sent"`
	Cancelled   int64 `json:"cancelled"`
	Delivered   int64 `json:"delivered"`
	Bounced     int64 `json:"bounced"`
	BouncedHard int64 `json:"bouncedHard"`
	BouncedSoft int64 `json:"bouncedSoft"`
	Complained  int64 `json:"complained"`
	Opened      int64 `json:"opened"`
	Clicked     int64 `json:"clicked"`
	Replied     int64 `json:"replied"`
	// MachineOpened and MachineClicked are the opens and clicks of mail
	// scanners and prefetchers, which opened and clicked leave out.
	MachineOpened  int64   `json:"machineOpened"`
	MachineClicked int64   `json:"machineClicked"`
	UpdatedAt      *string `json:"updatedAt"`
}

func countersView(m metrics.Counters) countersJSON {
	v := countersJSON{Scheduled: m.Scheduled, Sent: m.Sent, Cancelled: m.Cancelled, Delivered: m.Delivered,
		Bounced: m.Bounced(), BouncedHard: m.BouncedHard, BouncedSoft: m.BouncedSoft, Complained: m.Complained,
		Opened: m.Opened, Clicked: m.Clicked, MachineOpened: m.MachineOpened, MachineClicked: m.MachineClicked}
	if !m.UpdatedAt.IsZero() {
		v.UpdatedAt = formatTimePtr(&m.UpdatedAt)
	}
	return v
}

// dayJSON is one day of a range: its date and the counters beside it.
type dayJSON struct {
	Date string `json:"date"`
	countersJSON
}

// metricsGet is GET /api/metrics: a month, a day or a daily range
// (metrics.Query says which parameters choose what).
func (s *Server) metricsGet(c *fiber.Ctx) error {
	r, err := s.metrics.Tenant(c.UserContext(), tenantID(c), metrics.Query{Period: c.Query("period"),
		YearMonth: c.Query("yearMonth"), Date: c.Query("date"), StartDate: c.Query("startDate"),
		EndDate: c.Query("endDate")})
	if err != nil {
		return err
	}
	switch {
	case r.Range:
		days := make([]dayJSON, len(r.Days))
		for i, d := range r.Days {
			days[i] = dayJSON{Date: d.Date.Format(metrics.DateLayout), countersJSON: countersView(d.Counters)}
		}
		return c.JSON(metricsReportJSON{StartDate: r.Start.Format(metrics.DateLayout),
			EndDate: r.End.Format(metrics.DateLayout), Metrics: days})
	case r.Period == metrics.Daily:
		return c.JSON(metricsReportJSON{Period: r.Period, Date: r.Date.Format(metrics.DateLayout),
			YearMonth: r.Month.Format(metrics.MonthLayout), Metrics: countersView(r.Counters)})
	}
	return c.JSON(metricsReportJSON{Period: r.Period, YearMonth: r.Month.Format(metrics.MonthLayout),
		Metrics: countersView(r.Counters)})
}

// metricsReportJSON is GET /api/metrics's answer: a month (period,
// yearMonth), a day (period, date, yearMonth) or a range of days
// (startDate, endDate, and metrics a list of days).
type metricsReportJSON struct {
	Period    string `json:"period,omitempty"`
	YearMonth string `json:"yearMonth,omitempty"`
	Date      string `json:"date,omitempty"`
	StartDate string `json:"startDate,omitempty"`
	EndDate   string `json:"endDate,omitempty"`
	Metrics   any    `json:"metrics" doc:"The counters; for a range, a list of days, each its date and counters."`
}

// scopedJSON is a sequence's or template's counters: one of sequenceId
// and templateId is there, by the route.
type scopedJSON struct {
	SequenceID string       `json:"sequenceId,omitempty"`
	TemplateID string       `json:"templateId,omitempty"`
	YearMonth  string       `json:"yearMonth,omitempty"`
	Metrics    countersJSON `json:"metrics"`
}

func scopedView(scope metrics.Scope, id string, c metrics.Counters) scopedJSON {
	v := scopedJSON{Metrics: countersView(c)}
	if scope == metrics.ScopeSequence {
		v.SequenceID = id
	} else {
		v.TemplateID = id
	}
	return v
}

// scopedPageJSON is a page of scopedJSON, of one month.
type scopedPageJSON struct {
	Items      []scopedJSON `json:"items"`
	YearMonth  string       `json:"yearMonth"`
	NextCursor *string      `json:"nextCursor"`
}

// metricsScoped is GET /api/metrics/sequences/{id} and
// /api/metrics/templates/{id} (scope), ?yearMonth=: the object's counters
// for the month.
func (s *Server) metricsScoped(scope metrics.Scope) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := pathParam(c, "id")
		if err != nil {
			return err
		}
		m, month, err := s.metrics.ScopedOne(c.UserContext(), tenantID(c), scope, id, c.Query("yearMonth"))
		if err != nil {
			return err
		}
		v := scopedView(scope, m.ID, m.Counters)
		v.YearMonth = month.Format(metrics.MonthLayout)
		return c.JSON(v)
	}
}

// metricsScopedList is GET /api/metrics/sequences and
// /api/metrics/templates (scope): the tenant's sequences or templates as
// GET /api/sequences and /api/templates page them, each with its month's
// counters.
func (s *Server) metricsScopedList(scope metrics.Scope) fiber.Handler {
	return func(c *fiber.Ctx) error {
		p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
		if err != nil {
			return err
		}
		pg, err := s.metrics.ScopedList(c.UserContext(), tenantID(c), scope, c.Query("yearMonth"), p)
		if err != nil {
			return err
		}
		items := make([]scopedJSON, len(pg.Items))
		for i, it := range pg.Items {
			items[i] = scopedView(scope, it.ID, it.Counters)
		}
		return c.JSON(scopedPageJSON{Items: items, YearMonth: pg.Month.Format(metrics.MonthLayout),
			NextCursor: s.pages.Next(pg.Next)})
	}
}
