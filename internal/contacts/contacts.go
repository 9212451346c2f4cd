package contacts

import (
	"context"
	"encoding/json"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/internal/topics"
	"tidings/queries"
)

// Input is a validated create or upsert request.
type Input struct {
	Email      string
	UserID     *string // nil: not given
	Properties Patch
	Subscribed *bool // nil: not given
	// Topics are the contact's choices per topic id (ADDENDUM 16): true
	// joins, false leaves, nil removes the choice (the topic's default
	// applies).
	Topics map[string]*bool
}

// setTopics merges the contact's topic choices, each key a topic of the
// tenant (VALIDATION_ERROR otherwise).
func setTopics(ctx context.Context, q *store.Tx, c *queries.Contact, choices map[string]*bool) error {
	if len(choices) == 0 {
		return nil
	}
	merged, err := topics.CheckChoices(ctx, q.Queries, c.TenantID, choices)
	if err != nil {
		return err
	}
	*c, err = q.ContactSetTopics(ctx, queries.ContactSetTopicsParams{TenantID: c.TenantID, ID: c.ID, Choices: merged})
	return err
}

// Store performs contact operations for one service configuration.
type Store struct {
	DB *store.DB
	// FreeLimit is PLAN_FREE_CONTACTS.
	FreeLimit int
}

func errExists() error {
	return apperr.Conflict("CONTACT_EXISTS", "a contact with this email already exists")
}

// NotFound is the contact 404.
func NotFound() *apperr.Error { return apperr.NotFound("CONTACT_NOT_FOUND", "contact") }

func notFound(err error) error { return apperr.Specific(err, apperr.KindNotFound, NotFound()) }

// tooLargeProblem is what is wrong with properties whose merge would pass
// MaxPropertiesBytes.
const tooLargeProblem = "must total at most 65536 bytes per contact (as stored JSON)"

// tooLargeMessage is an import row's message for it.
const tooLargeMessage = "properties " + tooLargeProblem

// tooLarge names the field when a write would take the contact's merged
// properties past MaxPropertiesBytes (checked by the database).
func tooLarge(err error) error {
	if store.IsCheckViolation(err, "contacts_properties_size") {
		e := apperr.Invalid("properties", tooLargeProblem)
		e.Err = err
		return e
	}
	return err
}

// Create adds a new contact; CONTACT_EXISTS when the email is taken.
func (s *Store) Create(ctx context.Context, tenantID string, in Input) (queries.Contact, error) {
	var c queries.Contact
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		var err error
		c, err = q.ContactInsert(ctx, insertParams(tenantID, in))
		if store.IsNoRows(err) {
			return errExists() // whatever the plan: it would not have taken a slot
		}
		if err != nil {
			return err
		}
		if err := s.reserve(ctx, q, tenantID); err != nil {
			return err // the insert rolls back
		}
		q.AuditResource(c.ID)
		return setTopics(ctx, q, &c, in.Topics)
	})
	return c, tooLarge(err)
}

// Upsert creates the contact or merges into the existing one with that
// email; created says which.
func (s *Store) Upsert(ctx context.Context, tenantID string, in Input) (c queries.Contact, created bool, err error) {
	err = s.DB.InTx(ctx, func(q *store.Tx) error {
		// The contact named in the request's audit entry, whichever way it
		// goes.
		defer func() { q.AuditResource(c.ID) }()
		c, err = q.ContactUpdateByEmail(ctx, updateByEmailParams(tenantID, in))
		if err == nil {
			if err := setTopics(ctx, q, &c, in.Topics); err != nil {
				return err
			}
			return s.optOutIfAsked(ctx, q, &c, in)
		}
		if !store.IsNoRows(err) {
			return err
		}
		c, err = q.ContactInsert(ctx, insertParams(tenantID, in))
		if err == nil {
			created = true
			if err := s.reserve(ctx, q, tenantID); err != nil {
				return err // the insert rolls back
			}
			return setTopics(ctx, q, &c, in.Topics)
		}
		if !store.IsNoRows(err) {
			return err
		}
		// Another request created it between our update and insert: merge
		// into theirs.
		if c, err = q.ContactUpdateByEmail(ctx, updateByEmailParams(tenantID, in)); err != nil {
			return err
		}
		if err := setTopics(ctx, q, &c, in.Topics); err != nil {
			return err
		}
		return s.optOutIfAsked(ctx, q, &c, in)
	})
	return c, created, tooLarge(err)
}

// optOutIfAsked unsubscribes an existing contact through ApplyOptOut when
// the upsert says subscribed:false (a new one is simply created so).
func (s *Store) optOutIfAsked(ctx context.Context, q *store.Tx, c *queries.Contact, in Input) error {
	if !unsubscribes(in.Subscribed) {
		return nil
	}
	var err error
	*c, err = ApplyOptOut(ctx, q, OptOut{TenantID: c.TenantID, ContactID: c.ID, Unsubscribe: true})
	return err
}

// Change is a PATCH of a contact as sent; Update judges it.
type Change struct {
	// EmailSent says an email came with the PATCH: refused, the address is
	// the contact's identity (create another contact instead).
	EmailSent  bool
	UserIDSent bool
	UserID     *string // nil with UserIDSent: cleared
	// PropertiesSent says properties came; a null value removes its key.
	PropertiesSent bool
	Properties     map[string]json.RawMessage
	Subscribed     *bool
	// Topics are choices per topic id, as in Input.
	Topics map[string]*bool
}

// check judges a change and returns its properties patch.
func (ch Change) check() (Patch, error) {
	if !ch.EmailSent && !ch.UserIDSent && !ch.PropertiesSent && ch.Subscribed == nil && len(ch.Topics) == 0 {
		return Patch{}, apperr.AtLeastOne("userId", "properties", "subscribed", "topics")
	}
	var f apperr.Fields
	f.Check(!ch.EmailSent, "email", "cannot be changed")
	if ch.UserID != nil {
		f.Check(ValidUserID(*ch.UserID), "userId", "must be at most 256 characters")
	}
	props := parseProperties(&f, ch.Properties)
	return props, f.Err()
}

// Update applies a PATCH. subscribed:false goes through ApplyOptOut, which
// also cancels the contact's pending sends; true re-subscribes.
func (s *Store) Update(ctx context.Context, tenantID, id string, ch Change) (queries.Contact, error) {
	var c queries.Contact
	props, err := ch.check()
	if err != nil {
		return c, err
	}
	err = s.DB.InTx(ctx, func(q *store.Tx) error {
		var err error
		c, err = q.ContactUpdate(ctx, queries.ContactUpdateParams{
			TenantID: tenantID, ID: id, SetUserID: ch.UserIDSent, UserID: ch.UserID,
			SetProps: props.SetJSON(), RemoveProps: props.RemoveKeys(), Subscribed: resubscribe(ch.Subscribed),
		})
		if err != nil {
			return err
		}
		if err := setTopics(ctx, q, &c, ch.Topics); err != nil {
			return err
		}
		if !unsubscribes(ch.Subscribed) {
			return nil
		}
		c, err = ApplyOptOut(ctx, q, OptOut{TenantID: tenantID, ContactID: id, Unsubscribe: true})
		return err
	})
	return c, tooLarge(notFound(err))
}

// resubscribe keeps only a true: false is ApplyOptOut's to set.
func resubscribe(subscribed *bool) *bool {
	if unsubscribes(subscribed) {
		return nil
	}
	return subscribed
}

func unsubscribes(subscribed *bool) bool { return subscribed != nil && !*subscribed }

// Delete removes a contact with its events, timeline, enrolments and send
// history (foreign key cascade). Its open scheduled sends are cancelled
// first (contact_deleted, ADDENDUM 7) and stay, so the cancelled metric
// counts them and GET /api/scheduled?status=cancelled shows them; the lock
// order is ApplyOptOut's and a send record's: contact, enrolments, sends.
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	return s.DB.InTx(ctx, func(q *store.Tx) error {
		if _, err := q.ContactGetForUpdate(ctx, queries.ContactGetForUpdateParams{TenantID: tenantID, ID: id}); err != nil {
			return notFound(err)
		}
		if err := cancelPending(ctx, q, tenantID, id, ReasonContactDeleted); err != nil {
			return err
		}
		n, err := q.ContactDelete(ctx, queries.ContactDeleteParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		if n == 0 {
			return NotFound()
		}
		return q.TenantReleaseContacts(ctx, queries.TenantReleaseContactsParams{ID: tenantID, N: n})
	})
}

// Get returns one contact or CONTACT_NOT_FOUND.
func (s *Store) Get(ctx context.Context, tenantID, id string) (queries.Contact, error) {
	c, err := s.DB.ContactGet(ctx, queries.ContactGetParams{TenantID: tenantID, ID: id})
	return c, notFound(err)
}

// GetByEmail returns the contact with this email (normalised here) or
// CONTACT_NOT_FOUND.
func (s *Store) GetByEmail(ctx context.Context, tenantID, email string) (queries.Contact, error) {
	email, ok := NormalizeEmail(email)
	if !ok {
		return queries.Contact{}, apperr.Invalid("email", "must be a valid email address")
	}
	c, err := s.DB.ContactGetByEmail(ctx, queries.ContactGetByEmailParams{TenantID: tenantID, Email: email})
	return c, notFound(err)
}

// List returns a page of contacts, newest first.
func (s *Store) List(ctx context.Context, tenantID string, p page.Params) ([]queries.Contact, *page.Cursor, error) {
	return page.List(p, func(q page.Query) ([]queries.Contact, error) {
		return s.DB.ContactList(ctx, queries.ContactListParams{TenantID: tenantID, BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
	}, func(c queries.Contact) page.Cursor { return page.Cursor{Time: c.CreatedAt, ID: c.ID} })
}

// Stats counts the tenant's audience.
func (s *Store) Stats(ctx context.Context, tenantID string) (queries.ContactStatsRow, error) {
	return s.DB.ContactStats(ctx, tenantID)
}

// MustExist answers CONTACT_NOT_FOUND for an unknown id; sub-resources of a
// contact use it.
func (s *Store) MustExist(ctx context.Context, tenantID, id string) error {
	ok, err := s.DB.ContactExists(ctx, queries.ContactExistsParams{TenantID: tenantID, ID: id})
	if err != nil {
		return err
	}
	if !ok {
		return NotFound()
	}
	return nil
}

// reserve takes a slot of the plan's contact limit for a contact the
// transaction has just inserted: after the insert, so that every writer of
// contacts locks a contact before its tenant's row, as an import chunk
// does (the opposite order, tenant first, could deadlock a create with an
// import of the same email).
func (s *Store) reserve(ctx context.Context, q *store.Tx, tenantID string) error {
	_, err := q.TenantReserveContact(ctx, queries.TenantReserveContactParams{ID: tenantID, FreeLimit: int64(s.FreeLimit)})
	if store.IsNoRows(err) {
		return apperr.PlanLimit("contacts", s.FreeLimit)
	}
	return err
}

func insertParams(tenantID string, in Input) queries.ContactInsertParams {
	sub := true
	if in.Subscribed != nil {
		sub = *in.Subscribed
	}
	return queries.ContactInsertParams{TenantID: tenantID, ID: ids.New(ids.Contact), Email: in.Email,
		UserID: in.UserID, Properties: in.Properties.SetJSON(), Subscribed: sub}
}

func updateByEmailParams(tenantID string, in Input) queries.ContactUpdateByEmailParams {
	return queries.ContactUpdateByEmailParams{TenantID: tenantID, Email: in.Email,
		SetUserID: in.UserID != nil, UserID: in.UserID,
		SetProps: in.Properties.SetJSON(), RemoveProps: in.Properties.RemoveKeys(), Subscribed: resubscribe(in.Subscribed)}
}
