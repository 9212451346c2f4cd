package events

import (
	"context"
	"encoding/json"
	"time"

	"tidings/internal/ids"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/queries"
)

// Feed reads what the Recorder wrote: event lists and contact timelines,
// newest first.
type Feed struct {
	DB *store.DB
}

// Filter narrows an event list; empty fields do not filter.
type Filter struct {
	ContactID string
	Name      string
}

// List returns a page of the tenant's events. Each filter combination is
// its own query, so every page is one index range under any cached plan.
func (f *Feed) List(ctx context.Context, tenantID string, by Filter, p page.Params) ([]queries.Event, *page.Cursor, error) {
	return page.List(p, func(q page.Query) ([]queries.Event, error) {
		switch {
		case by.ContactID == "" && by.Name == "":
			return f.DB.EventList(ctx, queries.EventListParams{TenantID: tenantID,
				BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
		case by.ContactID == "":
			return f.DB.EventListByName(ctx, queries.EventListByNameParams{TenantID: tenantID, Name: by.Name,
				BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
		case by.Name == "":
			return f.DB.EventListByContact(ctx, queries.EventListByContactParams{TenantID: tenantID, ContactID: by.ContactID,
				BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
		}
		return f.DB.EventListByContactAndName(ctx, queries.EventListByContactAndNameParams{TenantID: tenantID,
			ContactID: by.ContactID, Name: by.Name, BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
	}, func(e queries.Event) page.Cursor { return page.Cursor{Time: e.OccurredAt, ID: e.ID} })
}

// Timeline returns a page of a contact's timeline from from (inclusive) to
// p.Until (inclusive; zero for no limit).
func (f *Feed) Timeline(ctx context.Context, tenantID, contactID string, from time.Time, p page.Params) ([]queries.TimelineRow, *page.Cursor, error) {
	return page.List(p, func(q page.Query) ([]queries.TimelineRow, error) {
		return f.DB.Timeline(ctx, queries.TimelineParams{TenantID: tenantID, ContactID: contactID, FromTime: from,
			BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
	}, func(r queries.TimelineRow) page.Cursor { return page.Cursor{Time: r.OccurredAt, ID: r.ID} })
}

// WriteTimelineEntry adds an entry that is not an event to a contact's
// timeline (suppression_removed, topics_changed...), inside the caller's
// transaction, at the current time.
func WriteTimelineEntry(ctx context.Context, q *store.Tx, tenantID, contactID, typ string, data map[string]any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return q.TimelineEntryInsert(ctx, queries.TimelineEntryInsertParams{TenantID: tenantID, ID: ids.New("tle_"),
		ContactID: contactID, Type: typ, OccurredAt: time.Now(), Data: b})
}
