// Package idempotency implements Idempotency-Key for POST requests (ADDENDUM
// section 8, after the IETF httpapi idempotency-key draft): the first
// request with a key runs, its successful response is kept for a day and
// replayed to repeats with the same body; a repeat with another body, or one
// that arrives while the first still runs, is refused. Keys live in
// PostgreSQL, per tenant and per scope (the operation), so every api
// instance sees the same state. The HTTP wiring is api's; the rules are here.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/store"
	"tidings/queries"
)

// Defaults of the draft's recommendations, as ADDENDUM section 8 pins them.
const (
	// TTL is how long a completed response is replayed.
	TTL = 24 * time.Hour
	// StaleAfter is how long a key may stay in flight before a repeat may
	// take it over: far beyond the API's 30 s request deadline, so only a
	// request whose process died is taken over.
	StaleAfter = 2 * time.Minute
	// MaxKeyLength bounds the header value.
	MaxKeyLength = 255
)

// ValidKey reports whether k is an acceptable key: 1-255 printable ASCII
// characters (ADDENDUM section 8).
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKeyLength {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// Response is a stored first response.
type Response struct {
	Status int
	Body   []byte
	// SendID, with no Status, is the send a first request recorded before
	// it died without storing its answer: the answer is that send's record.
	SendID string
	// BatchSends, with no Status, are the records a first batch request
	// wrote (by the message's position) before it died or failed to store
	// its answer: the answer is built from those records.
	BatchSends map[int]string
}

// Claim is an owned key: the request holding it runs, then calls exactly one
// of Complete (success) or Release (failure).
type Claim struct {
	s                  *Store
	tenant, scope, key string
	hash               []byte
}

// Store keeps the keys.
type Store struct {
	DB *store.DB
	// Sealer seals the secret fields of stored responses (seal.go); nil
	// stores them as they are (tests of other rules only).
	Sealer *Sealer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Begin claims key for a request with the given body. It returns a Claim
// when this request should run; a stored Response when it repeats a
// completed one with the same body; IDEMPOTENCY_KEY_REUSED when the key was
// used with another body; IDEMPOTENCY_KEY_IN_USE while the first request
// still runs.
func (s *Store) Begin(ctx context.Context, tenantID, scope, key string, body []byte) (*Claim, *Response, error) {
	sum := sha256.Sum256(body)
	return s.BeginHash(ctx, tenantID, scope, key, sum[:])
}

// BeginHash is Begin for a request whose SHA-256 the caller has computed
// (a body streamed rather than held: a contact import).
func (s *Store) BeginHash(ctx context.Context, tenantID, scope, key string, hash []byte) (*Claim, *Response, error) {
	now := s.now()
	_, err := s.DB.IdempotencyClaim(ctx, queries.IdempotencyClaimParams{
		TenantID: tenantID, Scope: scope, Key: key, RequestHash: hash,
		ExpiresAt: now.Add(TTL), StaleBefore: now.Add(-StaleAfter)})
	if err == nil {
		return &Claim{s: s, tenant: tenantID, scope: scope, key: key, hash: hash}, nil, nil
	}
	if !store.IsNoRows(err) {
		return nil, nil, err
	}
	row, err := s.DB.IdempotencyGet(ctx, queries.IdempotencyGetParams{TenantID: tenantID, Scope: scope, Key: key})
	if store.IsNoRows(err) {
		// The holder released or expired it between the two statements:
		// try once more rather than loop.
		return s.BeginHash(ctx, tenantID, scope, key, hash)
	}
	if err != nil {
		return nil, nil, err
	}
	if string(row.RequestHash) != string(hash) {
		return nil, nil, apperr.Unprocessable("IDEMPOTENCY_KEY_REUSED",
			"this Idempotency-Key was used with a different request body")
	}
	if row.ResponseStatus == nil {
		// A first request that recorded its send and then went silent (its
		// process died before storing the answer): the answer is the send's
		// record, and nothing is sent again.
		if !row.CreatedAt.After(now.Add(-StaleAfter)) {
			if row.SendID != nil {
				return nil, &Response{SendID: *row.SendID}, nil
			}
			if row.BatchSends != nil {
				links, err := batchLinks(row.BatchSends)
				if err != nil {
					return nil, nil, err
				}
				return nil, &Response{BatchSends: links}, nil
			}
		}
		return nil, nil, apperr.Conflict("IDEMPOTENCY_KEY_IN_USE",
			"a request with this Idempotency-Key is still being processed; retry later")
	}
	body, err := s.Sealer.open(row.ResponseBody)
	if err != nil {
		return nil, nil, err
	}
	return nil, &Response{Status: int(*row.ResponseStatus), Body: body}, nil
}

// batchLinks reads the batch_sends column: positions as object keys.
func batchLinks(raw []byte) (map[int]string, error) {
	var byKey map[string]string
	if err := json.Unmarshal(raw, &byKey); err != nil {
		return nil, fmt.Errorf("idempotency batch_sends: %w", err)
	}
	links := make(map[int]string, len(byKey))
	for k, v := range byKey {
		i, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("idempotency batch_sends position %q: %w", k, err)
		}
		links[i] = v
	}
	return links, nil
}

// Complete stores the response of a successful request for replay. It uses
// its own context: the response is already decided and must be kept even
// when the request's context has ended.
func (c *Claim) Complete(ctx context.Context, status int, body []byte) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	st := int32(status)
	body, err := c.s.Sealer.seal(body)
	if err != nil {
		return err
	}
	_, err = c.s.DB.IdempotencyComplete(ctx, queries.IdempotencyCompleteParams{
		TenantID: c.tenant, Scope: c.scope, Key: c.key, RequestHash: c.hash,
		ResponseStatus: &st, ResponseBody: body})
	return err
}

// LinkSend names the send this request is about to hand to the provider,
// in the transaction that writes the send's record (delivery.Request.OnRecord):
// a repeat after this request died answers from that record.
func (c *Claim) LinkSend(ctx context.Context, q *store.Tx, sendID string) error {
	_, err := q.IdempotencyLinkSend(ctx, queries.IdempotencyLinkSendParams{
		TenantID: c.tenant, Scope: c.scope, Key: c.key, RequestHash: c.hash, SendID: &sendID})
	return err
}

// LinkBatchSends names records a batch is about to hand to the provider
// (sendIDs by the message's position in the batch), in the transaction
// that writes them: a repeat after this request died, or failed to store
// its answer, answers from those records and sends nothing.
func (c *Claim) LinkBatchSends(ctx context.Context, q *store.Tx, sendIDs map[int]string) error {
	byKey := make(map[string]string, len(sendIDs))
	for i, id := range sendIDs {
		byKey[strconv.Itoa(i)] = id
	}
	links, err := json.Marshal(byKey)
	if err != nil {
		return err
	}
	n, err := q.IdempotencyLinkBatchSends(ctx, queries.IdempotencyLinkBatchSendsParams{
		TenantID: c.tenant, Scope: c.scope, Key: c.key, RequestHash: c.hash, Links: links})
	if err == nil && n == 0 {
		// The key is no longer this request's: writing the records would
		// leave a repeat unable to find them.
		err = errors.New("idempotency: the key was taken over before its batch was recorded")
	}
	return err
}

// Abandon forgets a key whose first request linked a send that no longer
// exists (the provider refused it, so nothing was sent): the client's
// repeat runs afresh.
func (s *Store) Abandon(ctx context.Context, tenantID, scope, key string, body []byte) error {
	sum := sha256.Sum256(body)
	_, err := s.DB.IdempotencyRelease(ctx, queries.IdempotencyReleaseParams{
		TenantID: tenantID, Scope: scope, Key: key, RequestHash: sum[:]})
	return err
}

// Release forgets the key after a failed request, so the client may retry
// with the same key (failed first attempts are not kept).
func (c *Claim) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := c.s.DB.IdempotencyRelease(ctx, queries.IdempotencyReleaseParams{
		TenantID: c.tenant, Scope: c.scope, Key: c.key, RequestHash: c.hash})
	return err
}

// DeleteExpired removes keys past their replay window; the worker calls it
// periodically.
func (s *Store) DeleteExpired(ctx context.Context) (int64, error) {
	return s.DB.IdempotencyDeleteExpired(ctx)
}
