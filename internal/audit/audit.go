// Package audit reads and prunes the audit log (ADDENDUM 25): one entry
// per write under /api that succeeded. Entries are written by the write's
// own transaction (store.Audit, store.Tx), never here; no route changes or
// deletes one, and the maintenance task prunes those past Retention.
package audit

import (
	"context"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/queries"
)

// Actor types of an entry.
const (
	ActorSession = "session"
	ActorAPIKey  = "apiKey"
)

// Retention is how long an entry is kept.
const Retention = 365 * 24 * time.Hour

// Filter narrows a list; a zero field does not filter.
type Filter struct {
	ActorID      string
	Action       string
	ResourceType string
	// Since is the earliest time listed (inclusive).
	Since time.Time
}

// Store reads and prunes the audit log.
type Store struct{ DB *store.DB }

// List is a page of the tenant's entries, newest first.
func (s *Store) List(ctx context.Context, tenantID string, f Filter, p page.Params) ([]queries.AuditLog, *page.Cursor, error) {
	since := f.Since // zero: year 1, no bound
	return page.List(p, func(q page.Query) ([]queries.AuditLog, error) {
		return s.DB.AuditList(ctx, queries.AuditListParams{TenantID: tenantID, BeforeTime: q.BeforeTime,
			BeforeID: q.BeforeID, Since: since, ActorID: opt(f.ActorID), Action: opt(f.Action),
			ResourceType: opt(f.ResourceType), Lim: q.Limit})
	}, func(x queries.AuditLog) page.Cursor { return page.Cursor{Time: x.At, ID: x.ID} })
}

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CheckFilter judges the filter's text (at most 256 characters each: no
// actor id, action or resource type is longer).
func CheckFilter(f Filter) error {
	var fields apperr.Fields
	for name, v := range map[string]string{"actor": f.ActorID, "action": f.Action, "resourceType": f.ResourceType} {
		fields.Check(len(v) <= 256, name, "must be at most 256 characters")
	}
	return fields.Err()
}

// pruneBatch bounds one DELETE, so pruning a large backlog never holds
// many locks or a long transaction.
const pruneBatch = 10000

// Prune deletes the entries older than Retention before now, of every
// tenant, in rounds, and returns how many went.
func (s *Store) Prune(ctx context.Context, now time.Time) (int64, error) {
	before := now.Add(-Retention)
	var total int64
	for {
		n, err := s.DB.AuditPrune(ctx, queries.AuditPruneParams{Before: before, Lim: pruneBatch})
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

// WriteAfter writes a request's entry that no transaction of its write
// took (a write that ran none, such as a preview): on its own, after the
// write. The api's audit middleware calls it once the write succeeded.
func (s *Store) WriteAfter(ctx context.Context, e *store.Audit) error {
	return s.DB.WriteAudit(ctx, e)
}
