// Package outbound pushes a tenant's facts to its own systems as Standard
// Webhooks (ADDENDUM 14): endpoints and their secrets, the delivery log,
// and the Deliverer that posts each message, signed, with retries. The
// messages themselves are written by the database, in the transaction of
// each fact (schema 0016's triggers: a transactional outbox), so none is
// lost with a crash and none exists whose fact rolled back.
package outbound

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/queries"
)

// EventTypes are the types a message may have, in ADDENDUM 14's order,
// then ADDENDUM 21's.
var EventTypes = []string{"email.sent", "email.delivered", "email.opened", "email.clicked", "email.bounced",
	"email.complained", "email.unsubscribed", "contact.created", "contact.updated", "contact.deleted",
	"contact.unsubscribed", "contact.suppressed", "sequence.entered", "sequence.exited", "sequence.completed",
	"broadcast.sent", "tenant.paused", "webhook.test", "segment.entered", "segment.exited"}

// Delivery statuses.
var DeliveryStatuses = []string{"pending", "succeeded", "failed"}

// Limits.
const (
	MaxEndpoints      = 10
	maxURLLen         = 2048
	maxDescriptionLen = 500
)

// NotFound is the endpoint 404.
func NotFound() *apperr.Error { return apperr.NotFound("NOT_FOUND", "webhook") }

func notFound(err error) error { return apperr.Specific(err, apperr.KindNotFound, NotFound()) }

// Store keeps endpoints and reads their deliveries.
type Store struct {
	DB    *store.DB
	Guard *Guard
}

// Input is a create or a PATCH; nil fields stay as they are.
type Input struct {
	URL         *string
	Events      *[]string
	Description *string
	Enabled     *bool
}

// NewSecret is whsec_ and base64 of 32 random bytes.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// check validates and normalises in against the endpoint e (its current
// values for a PATCH); the URL's host is resolved and must be public.
func (s *Store) check(ctx context.Context, in Input, e *queries.WebhookEndpoint) error {
	var f apperr.Fields
	if in.URL != nil {
		u, err := url.Parse(strings.TrimSpace(*in.URL))
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" || u.Opaque != "":
			f.Add("url", "must be an https:// (or http://) URL")
		case u.User != nil:
			f.Add("url", "must not carry a user name or password")
		case len(*in.URL) > maxURLLen:
			f.Add("url", "must be at most 2048 characters")
		case !allowedURLPort(u):
			f.Add("url", "must use port 80, 443 or 1024-65535")
		default:
			if err := s.Guard.Check(ctx, u.Hostname()); err != nil {
				f.Add("url", "must reach a public internet address: "+err.Error())
			} else {
				e.Url = u.String()
			}
		}
	}
	if in.Events != nil {
		evs := []string{}
		for _, t := range *in.Events {
			if !slices.Contains(EventTypes, t) {
				f.Add("events", "unknown event type "+t+"; known: "+strings.Join(EventTypes, ", "))
				continue
			}
			if !slices.Contains(evs, t) {
				evs = append(evs, t)
			}
		}
		e.Events = evs
	}
	if in.Description != nil {
		f.Check(utf8.RuneCountInString(*in.Description) <= maxDescriptionLen, "description", "must be at most 500 characters")
		e.Description = *in.Description
	}
	if in.Enabled != nil {
		e.Enabled = *in.Enabled
	}
	return f.Err()
}

// allowedURLPort reports whether u's port, or its scheme's default, is one
// AllowedPort allows.
func allowedURLPort(u *url.URL) bool {
	p := u.Port()
	if p == "" {
		return true // 80 or 443
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && AllowedPort(uint16(n))
}

// Create adds an endpoint with a new secret (shown in the answer only).
func (s *Store) Create(ctx context.Context, tenantID string, in Input) (queries.WebhookEndpoint, error) {
	e := queries.WebhookEndpoint{Events: []string{}, Enabled: true}
	if in.URL == nil {
		return e, apperr.Invalid("url", "is required")
	}
	if err := s.check(ctx, in, &e); err != nil {
		return e, err
	}
	var out queries.WebhookEndpoint
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		var err error
		out, err = q.WebhookEndpointInsert(ctx, queries.WebhookEndpointInsertParams{TenantID: tenantID,
			ID: ids.New(ids.Webhook), Url: e.Url, Events: e.Events, Description: e.Description, Enabled: e.Enabled,
			Secret: NewSecret(), MaxEndpoints: MaxEndpoints})
		q.AuditResource(out.ID)
		return err
	})
	if store.IsNoRows(err) || apperr.IsKind(err, apperr.KindNotFound) {
		return out, apperr.Invalid("url", "a tenant has at most 10 webhook endpoints")
	}
	return out, err
}

// Get returns one endpoint.
func (s *Store) Get(ctx context.Context, tenantID, id string) (queries.WebhookEndpoint, error) {
	e, err := s.DB.WebhookEndpointGet(ctx, queries.WebhookEndpointGetParams{TenantID: tenantID, ID: id})
	return e, notFound(err)
}

// List returns a page of endpoints, newest first.
func (s *Store) List(ctx context.Context, tenantID string, p page.Params) ([]queries.WebhookEndpoint, *page.Cursor, error) {
	return page.List(p, func(q page.Query) ([]queries.WebhookEndpoint, error) {
		return s.DB.WebhookEndpointList(ctx, queries.WebhookEndpointListParams{TenantID: tenantID,
			BeforeTime: q.BeforeTime, BeforeID: q.BeforeID, Lim: q.Limit})
	}, func(e queries.WebhookEndpoint) page.Cursor { return page.Cursor{Time: e.CreatedAt, ID: e.ID} })
}

// Update changes the fields given.
func (s *Store) Update(ctx context.Context, tenantID, id string, in Input) (queries.WebhookEndpoint, error) {
	if in.URL == nil && in.Events == nil && in.Description == nil && in.Enabled == nil {
		return queries.WebhookEndpoint{}, apperr.AtLeastOne("url", "events", "description", "enabled")
	}
	e, err := s.Get(ctx, tenantID, id)
	if err != nil {
		return e, err
	}
	if err := s.check(ctx, in, &e); err != nil {
		return e, err
	}
	return s.write(ctx, func(q *queries.Queries) (queries.WebhookEndpoint, error) {
		return q.WebhookEndpointUpdate(ctx, queries.WebhookEndpointUpdateParams{TenantID: tenantID, ID: id,
			Url: e.Url, Events: e.Events, Description: e.Description, Enabled: e.Enabled})
	})
}

// Delete removes an endpoint and its deliveries.
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	return s.DB.Tx(ctx, func(q *queries.Queries) error { // with the request's audit entry
		n, err := q.WebhookEndpointDelete(ctx, queries.WebhookEndpointDeleteParams{TenantID: tenantID, ID: id})
		if err == nil && n == 0 {
			return NotFound()
		}
		return err
	})
}

// Rotate gives the endpoint a new secret; the old one also signs for 24
// hours.
func (s *Store) Rotate(ctx context.Context, tenantID, id string) (queries.WebhookEndpoint, error) {
	return s.write(ctx, func(q *queries.Queries) (queries.WebhookEndpoint, error) {
		return q.WebhookEndpointRotate(ctx, queries.WebhookEndpointRotateParams{TenantID: tenantID, ID: id,
			Secret: NewSecret()})
	})
}

// write runs one statement that changes an endpoint in a transaction of
// its own, which also writes the request's audit entry (store.Audit).
func (s *Store) write(ctx context.Context, fn func(q *queries.Queries) (queries.WebhookEndpoint, error)) (queries.WebhookEndpoint, error) {
	var e queries.WebhookEndpoint
	err := s.DB.Tx(ctx, func(q *queries.Queries) error {
		var err error
		e, err = fn(q)
		return err
	})
	return e, notFound(err)
}

// Test queues a webhook.test message for the endpoint.
func (s *Store) Test(ctx context.Context, tenantID, id string) error {
	if _, err := s.Get(ctx, tenantID, id); err != nil {
		return err
	}
	return s.DB.InTx(ctx, func(q *store.Tx) error {
		if err := q.WebhookTestInsert(ctx, queries.WebhookTestInsertParams{TenantID: tenantID,
			MessageID: NewMessageID(), EndpointID: id}); err != nil {
			return err
		}
		return q.WebhookNotify(ctx)
	})
}

// NewMessageID is a webhook-id: msg_ and 32 hex digits (as the database's
// messages are).
func NewMessageID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	out = append(out, "msg_"...)
	for _, c := range b {
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}

// Deliveries returns a page of an endpoint's deliveries, newest first, of
// one status when status is not "".
func (s *Store) Deliveries(ctx context.Context, tenantID, id, status string, p page.Params) ([]queries.WebhookDeliveryListRow, *page.Cursor, error) {
	if status != "" && !slices.Contains(DeliveryStatuses, status) {
		return nil, nil, apperr.Invalid("status", "must be one of pending, succeeded, failed")
	}
	if _, err := s.Get(ctx, tenantID, id); err != nil {
		return nil, nil, err
	}
	arg := queries.WebhookDeliveryListParams{TenantID: tenantID, EndpointID: id}
	if status != "" {
		arg.Status = &status
	}
	return page.List(p, func(q page.Query) ([]queries.WebhookDeliveryListRow, error) {
		arg.BeforeTime, arg.BeforeID, arg.Lim = q.BeforeTime, q.BeforeID, q.Limit
		return s.DB.WebhookDeliveryList(ctx, arg)
	}, func(d queries.WebhookDeliveryListRow) page.Cursor {
		return page.Cursor{Time: d.CreatedAt, ID: d.MessageID}
	})
}

// Retry queues one more attempt of a delivery, at once.
func (s *Store) Retry(ctx context.Context, tenantID, id, messageID string) error {
	if _, err := s.Get(ctx, tenantID, id); err != nil {
		return err
	}
	return s.DB.InTx(ctx, func(q *store.Tx) error {
		n, err := q.WebhookDeliveryRetry(ctx, queries.WebhookDeliveryRetryParams{TenantID: tenantID, EndpointID: id, MessageID: messageID})
		if err != nil {
			return err
		}
		if n == 0 {
			return apperr.NotFound("NOT_FOUND", "delivery")
		}
		return q.WebhookNotify(ctx)
	})
}

// DeliveryCounts is how many deliveries each status holds (Prometheus).
func (s *Store) DeliveryCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.DB.WebhookDeliveryCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}
