package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/events"
	"tidings/internal/page"
	"tidings/queries"
)

type eventJSON struct {
	EventID            string          `json:"eventId"`
	ContactID          string          `json:"contactId,omitempty"`
	Name               string          `json:"name"`
	Properties         json.RawMessage `json:"properties"`
	Timestamp          string          `json:"timestamp"`
	ProcessedSequences []string        `json:"processedSequences"`
}

type eventReq struct {
	Email         Opt[string]                     `json:"email" required:"true" format:"email" doc:"An existing contact's address: events never create contacts."`
	Name          Opt[string]                     `json:"name" required:"true" min:"1" max:"256" doc:"The event's name, case-sensitive (purchase.completed)."`
	Properties    Opt[map[string]json.RawMessage] `json:"properties" values:"EventPropertyValue" nullable:"true" max:"200" doc:"At most 200 properties."`
	Timestamp     Opt[string]                     `json:"timestamp" doc:"When it happened; now when absent; at most 5 minutes ahead."`
	UpdateContact Opt[bool]                       `json:"updateContact" doc:"Update the contact's derived counters (true when absent)."`
}

func (r *eventReq) validate(tenantID string, now time.Time) (events.Custom, error) {
	var f apperr.Fields
	in := events.Custom{TenantID: tenantID, Timestamp: now, UpdateContact: true}
	email := requiredEmail(&f, r.Email)
	in.Email = email
	if !r.Name.Set || r.Name.Null {
		f.Add("name", "is required")
	} else {
		mergeFields(&f, events.ValidateName(r.Name.V))
		in.Name = r.Name.V
	}
	props, err := events.ValidateProperties(r.Properties.V)
	mergeFields(&f, err)
	in.Properties = props
	if v, ok := r.Timestamp.Value(); ok {
		ts, err := parseTime(v)
		if err != nil {
			f.Add("timestamp", "must be an ISO 8601 timestamp")
		} else if err := events.ValidateTimestamp(ts, now); err != nil {
			mergeFields(&f, err)
		} else {
			in.Timestamp = ts
		}
	}
	if v, ok := r.UpdateContact.Value(); ok {
		in.UpdateContact = v
	}
	return in, f.Err()
}

func (s *Server) eventCreate(c *fiber.Ctx) error {
	var req eventReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.validate(tenantID(c), time.Now())
	if err != nil {
		return err
	}
	// Answered once the batch holding the event has committed (group
	// commit): a 201 is durable.
	rec, err := s.ingest.Record(c.UserContext(), in)
	if err != nil {
		return err
	}
	out := eventCreatedJSON{
		Event: eventJSON{EventID: rec.EventID, Name: rec.Name, Properties: rec.Properties,
			Timestamp: formatTime(rec.Timestamp), ProcessedSequences: rec.ProcessedSequences},
		ContactID: rec.ContactID, TriggeredSequences: rec.TriggeredSequences,
	}
	if in.UpdateContact {
		v := contactView(rec.Contact, true)
		out.Contact = &v
	}
	return c.Status(http.StatusCreated).JSON(out)
}

// eventCreatedJSON is POST /api/events's answer; contact is there when
// the event updated it (updateContact).
type eventCreatedJSON struct {
	Event              eventJSON    `json:"event"`
	ContactID          string       `json:"contactId"`
	TriggeredSequences []string     `json:"triggeredSequences"`
	Contact            *contactJSON `json:"contact,omitempty"`
}

func eventView(e queries.Event) eventJSON {
	return eventJSON{EventID: e.ID, ContactID: e.ContactID, Name: e.Name, Properties: e.Properties,
		Timestamp: formatTime(e.OccurredAt), ProcessedSequences: e.ProcessedSequences}
}

func (s *Server) eventList(c *fiber.Ctx) error {
	return s.listEvents(c, "")
}

func (s *Server) eventListByContact(c *fiber.Ctx) error {
	id, err := s.contactParam(c)
	if err != nil {
		return err
	}
	return s.listEvents(c, id)
}

// listEvents answers a page of events, of one contact when contactID is
// not "", filtered by ?name=.
func (s *Server) listEvents(c *fiber.Ctx, contactID string) error {
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	by := events.Filter{ContactID: contactID, Name: c.Query("name")}
	rows, next, err := s.feed.List(c.UserContext(), tenantID(c), by, p)
	if err != nil {
		return err
	}
	items := make([]eventJSON, len(rows))
	for i, e := range rows {
		items[i] = eventView(e)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

type timelineJSON struct {
	Type      string         `json:"type"`
	Timestamp string         `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

const (
	timelineDefault = 50
	timelineMax     = 100
)

// timelineStart stands for an open "from"; timestamptz covers it.
var timelineStart = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)

func (s *Server) contactTimeline(c *fiber.Ctx) error {
	id, err := s.contactParam(c)
	if err != nil {
		return err
	}
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), timelineDefault, timelineMax)
	if err != nil {
		return err
	}
	var f apperr.Fields
	from, to := timelineStart, page.Far
	if v := c.Query("from"); v != "" {
		if from, err = parseTime(v); err != nil {
			f.Add("from", "must be an ISO 8601 timestamp")
		}
	}
	if v := c.Query("to"); v != "" {
		if to, err = parseTime(v); err != nil {
			f.Add("to", "must be an ISO 8601 timestamp")
		}
	}
	if len(f) == 0 && from.After(to) {
		f.Add("from", "must not be after to")
	}
	if err := f.Err(); err != nil {
		return err
	}
	p.Until = to
	rows, next, err := s.feed.Timeline(c.UserContext(), tenantID(c), id, from, p)
	if err != nil {
		return err
	}
	items := make([]timelineJSON, len(rows))
	for i, r := range rows {
		items[i] = timelineView(r)
	}
	return c.JSON(timelinePageJSON{Items: items, HasMore: next != nil, NextCursor: s.pages.Next(next)})
}

// timelineView shapes one entry: events carry their id, name and
// properties (system events also spread their metadata, e.g. sendId);
// other entries carry the data they were written with.
func timelineView(r queries.TimelineRow) timelineJSON {
	var data map[string]any
	_ = json.Unmarshal(r.Data, &data)
	if data == nil {
		data = map[string]any{}
	}
	if r.Kind != "event" {
		return timelineJSON{Type: r.Name, Timestamp: formatTime(r.OccurredAt), Data: data}
	}
	typ := events.TimelineType(r.Name)
	out := map[string]any{"eventId": r.ID, "name": r.Name}
	if typ == "event" {
		out["properties"] = data
	} else {
		for k, v := range data {
			out[k] = v
		}
	}
	return timelineJSON{Type: typ, Timestamp: formatTime(r.OccurredAt), Data: out}
}

type timelinePageJSON struct {
	Items      []timelineJSON `json:"items"`
	HasMore    bool           `json:"hasMore"`
	NextCursor *string        `json:"nextCursor"`
}

type archiveJSON struct {
	Month  string `json:"month"`
	Events int64  `json:"events"`
	Bytes  int64  `json:"bytes"`
}

// archiveList lists the tenant's archived months, newest first.
func (s *Server) archiveList(c *fiber.Ctx) error {
	rows, err := s.archives.List(c.UserContext(), tenantID(c))
	if err != nil {
		return err
	}
	items := make([]archiveJSON, len(rows))
	for i, r := range rows {
		items[i] = archiveJSON{Month: r.Month, Events: r.Events, Bytes: r.Bytes}
	}
	return c.JSON(whole(items))
}

// archiveGet streams one month's archived events as NDJSON, decompressed
// as the client reads: no month is held in memory.
func (s *Server) archiveGet(c *fiber.Ctx) error {
	r, err := s.archives.Open(c.UserContext(), tenantID(c), c.Params("month"))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "application/x-ndjson")
	return c.SendStream(r) // fasthttp closes r once it is sent
}
