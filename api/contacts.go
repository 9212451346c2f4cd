package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/page"
	"tidings/internal/rules"
	"tidings/queries"
)

type derivedJSON struct {
	TotalSends   int64   `json:"totalSends"`
	TotalOpens   int64   `json:"totalOpens"`
	TotalClicks  int64   `json:"totalClicks"`
	LastEventAt  *string `json:"lastEventAt"`
	InactiveDays int64   `json:"inactiveDays"`
}

type contactJSON struct {
	ContactID  string          `json:"contactId"`
	Email      string          `json:"email"`
	UserID     *string         `json:"userId"`
	Properties json.RawMessage `json:"properties"`
	Derived    *derivedJSON    `json:"derived,omitempty"`
	Subscribed bool            `json:"subscribed"`
	Suppressed bool            `json:"suppressed"`
	// Topics are the contact's own choices; a topic it has none for
	// follows the topic's default.
	Topics    json.RawMessage `json:"topics"`
	CreatedAt string          `json:"createdAt"`
	UpdatedAt string          `json:"updatedAt"`
}

func contactView(c queries.Contact, withDerived bool) contactJSON {
	v := contactJSON{ContactID: c.ID, Email: c.Email, UserID: c.UserID, Properties: c.Properties,
		Subscribed: c.Subscribed, Suppressed: c.Suppressed, Topics: c.Topics,
		CreatedAt: formatTime(c.CreatedAt), UpdatedAt: formatTime(c.UpdatedAt)}
	if withDerived {
		v.Derived = &derivedJSON{TotalSends: c.TotalSends, TotalOpens: c.TotalOpens, TotalClicks: c.TotalClicks,
			LastEventAt: formatTimePtr(c.LastEventAt), InactiveDays: rules.InactiveDays(time.Now(), c.CreatedAt, c.LastEventAt)}
	}
	return v
}

// contactUpsertedJSON is PUT /api/contacts's answer: the contact and
// whether the call created it.
type contactUpsertedJSON struct {
	contactJSON
	Created bool `json:"created"`
}

type contactStatsJSON struct {
	Total           int64 `json:"total"`
	SuppressedCount int64 `json:"suppressedCount"`
	AddedLast24h    int64 `json:"addedLast24h"`
	AddedLast7d     int64 `json:"addedLast7d"`
}

// contactReq is the body of POST, PUT and PATCH /api/contacts.
type contactReq = contacts.Body

// requiredEmail normalises a required email field (contacts.RequiredEmail).
func requiredEmail(f *apperr.Fields, v Opt[string]) string { return contacts.RequiredEmail(f, v) }

// mergeFields copies a validation error's fields into f.
func mergeFields(f *apperr.Fields, err error) { f.Merge(err) }

func (s *Server) contactCreate(c *fiber.Ctx) error {
	var req contactReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.Input()
	if err != nil {
		return err
	}
	ct, err := s.contacts.Create(c.UserContext(), tenantID(c), in)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(contactView(ct, true))
}

func (s *Server) contactUpsert(c *fiber.Ctx) error {
	var req contactReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	in, err := req.Input()
	if err != nil {
		return err
	}
	ct, created, err := s.contacts.Upsert(c.UserContext(), tenantID(c), in)
	if err != nil {
		return err
	}
	return c.Status(upsertStatus(created)).JSON(contactUpsertedJSON{contactView(ct, true), created})
}

func (s *Server) contactList(c *fiber.Ctx) error {
	if email := emailQuery(c); email != "" {
		ct, err := s.contacts.GetByEmail(c.UserContext(), tenantID(c), email)
		if err != nil {
			return err
		}
		return c.JSON(contactView(ct, true))
	}
	p, err := s.pages.Parse(c.Query("cursor"), c.Query("limit"), page.DefaultLimit, page.MaxLimit)
	if err != nil {
		return err
	}
	rows, next, err := s.contacts.List(c.UserContext(), tenantID(c), p)
	if err != nil {
		return err
	}
	items := make([]contactJSON, len(rows))
	for i, r := range rows {
		items[i] = contactView(r, false)
	}
	return c.JSON(list(items, s.pages.Next(next)))
}

func (s *Server) contactStats(c *fiber.Ctx) error {
	st, err := s.contacts.Stats(c.UserContext(), tenantID(c))
	if err != nil {
		return err
	}
	return c.JSON(contactStatsJSON{Total: st.Total, SuppressedCount: st.SuppressedCount,
		AddedLast24h: st.AddedLast24h, AddedLast7d: st.AddedLast7d})
}

func (s *Server) contactGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	ct, err := s.contacts.Get(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(contactView(ct, true))
}

func (s *Server) contactUpdate(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req contactReq
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Subscribed.Set && req.Subscribed.Null {
		return apperr.Invalid("subscribed", "must be a boolean")
	}
	ct, err := s.contacts.Update(c.UserContext(), tenantID(c), id, contacts.Change{EmailSent: req.Email.Set,
		UserIDSent: req.UserID.Set, UserID: req.UserID.Ptr(), PropertiesSent: req.Properties.Set,
		Properties: req.Properties.V, Subscribed: req.Subscribed.Ptr(), Topics: req.Topics.V})
	if err != nil {
		return err
	}
	return c.JSON(contactView(ct, true))
}

func (s *Server) contactDelete(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.contacts.Delete(c.UserContext(), tenantID(c), id); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// contactParam resolves the {id} of a contact sub-resource, answering the
// contact's 404 when it does not exist in the tenant.
func (s *Server) contactParam(c *fiber.Ctx) (string, error) {
	id, err := pathParam(c, "id")
	if err != nil {
		return "", err
	}
	return id, s.contacts.MustExist(c.UserContext(), tenantID(c), id)
}

// emailQuery reads ?email= keeping "+" literal: form decoding would turn
// a+tag@x.io into "a tag@x.io", and no address has a space in it.
func emailQuery(c *fiber.Ctx) string {
	raw := string(c.Request().URI().QueryArgs().Peek("email"))
	if !strings.Contains(string(c.Request().URI().QueryString()), "+") {
		return raw
	}
	for _, kv := range strings.Split(string(c.Request().URI().QueryString()), "&") {
		if k, v, _ := strings.Cut(kv, "="); k == "email" {
			if dec, err := url.PathUnescape(v); err == nil {
				return dec
			}
		}
	}
	return raw
}
