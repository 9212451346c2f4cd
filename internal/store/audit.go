package store

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"tidings/internal/ids"
	"tidings/queries"
)

// Audit is the audit-log entry (ADDENDUM 25) that a write request owes.
// The HTTP layer puts it in the request's context (WithAudit) and every
// transaction begun with that context may write it: the first one that
// commits does, inside itself, so the entry commits or rolls back with
// the write and a write that fails leaves none. A write that runs no
// transaction of its own hands its entry to the code that does (the
// group commit of events carries it with the event: Tx.AuditMany).
//
// Its fields are set before the request's handler runs, except ResourceID
// when the write makes the resource (a create): the domain names it in its
// transaction (Tx.AuditResource).
type Audit struct {
	TenantID     string
	ActorType    string // "session" or "apiKey"
	ActorID      string // the key's id, or the session's subject
	Action       string // "<resourceType>.<verb>"
	ResourceType string
	ResourceID   string
	RequestID    string
	IP           string

	mu    sync.Mutex
	state auditState
	// more are further resources of one write (a batch of sends): one
	// entry each, alike but for the id.
	more []string
	// named: a transaction named the resource (Tx.AuditResource), which
	// the route did not.
	named bool
}

type auditState uint8

const (
	auditPending auditState = iota // no transaction holds it
	auditClaimed                   // a transaction will write it if it commits
	auditWritten                   // a committed transaction holds it
)

type auditKey struct{}

// WithAudit returns ctx carrying a: the transactions begun with it write
// a (see Audit).
func WithAudit(ctx context.Context, a *Audit) context.Context {
	return context.WithValue(ctx, auditKey{}, a)
}

// WithoutAudit hides ctx's entry from the transactions begun with the
// result: a write's step that must not carry it (a send's record, written
// before the provider has accepted the message) uses it.
func WithoutAudit(ctx context.Context) context.Context {
	if AuditOf(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, auditKey{}, (*Audit)(nil))
}

// AuditOf is the entry ctx carries, nil when none (not a write request,
// or a background task).
func AuditOf(ctx context.Context) *Audit {
	a, _ := ctx.Value(auditKey{}).(*Audit)
	return a
}

// Written reports whether a committed transaction holds the entry.
func (a *Audit) Written() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state == auditWritten
}

// claim hands the entry to one transaction at a time: the first one begun
// while it is pending.
func (a *Audit) claim() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state != auditPending {
		return false
	}
	a.state = auditClaimed
	return true
}

// settle ends a claim: written once its transaction committed, pending
// again (for a later transaction of the request) when it did not.
func (a *Audit) settle(committed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if committed {
		a.state = auditWritten
	} else {
		a.state = auditPending
	}
}

func (a *Audit) setResources(ids []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ResourceID, a.more, a.named = ids[0], append([]string(nil), ids[1:]...), true
}

// row is the entry as AuditInsert writes it, with a new id.
func (a *Audit) row() queries.AuditInsertParams {
	a.mu.Lock()
	defer a.mu.Unlock()
	return queries.AuditInsertParams{TenantID: a.TenantID, ID: ids.New(ids.Audit), ActorType: a.ActorType,
		ActorID: a.ActorID, Action: a.Action, ResourceType: a.ResourceType, ResourceID: a.ResourceID,
		RequestID: a.RequestID, Ip: a.IP}
}

// insert writes the entry in q: one row, or one per resource.
func (a *Audit) insert(ctx context.Context, q *queries.Queries) error {
	r := a.row()
	a.mu.Lock()
	more := a.more
	a.mu.Unlock()
	if len(more) == 0 {
		return q.AuditInsert(ctx, r)
	}
	var p queries.AuditInsertManyParams
	for _, id := range append([]string{r.ResourceID}, more...) {
		appendRow(&p, r, id)
	}
	return q.AuditInsertMany(ctx, p)
}

func appendRow(p *queries.AuditInsertManyParams, r queries.AuditInsertParams, resourceID string) {
	p.TenantIds, p.Ids, p.ActorTypes = append(p.TenantIds, r.TenantID), append(p.Ids, ids.New(ids.Audit)), append(p.ActorTypes, r.ActorType)
	p.ActorIds, p.Actions = append(p.ActorIds, r.ActorID), append(p.Actions, r.Action)
	p.ResourceTypes, p.ResourceIds = append(p.ResourceTypes, r.ResourceType), append(p.ResourceIds, resourceID)
	p.RequestIds, p.Ips = append(p.RequestIds, r.RequestID), append(p.Ips, r.Ip)
}

// AuditResource names the resource the transaction's write made, for the
// request's audit entry: a create calls it with the new id (the other
// writes have theirs in the path). Outside a request, or in a transaction
// that does not hold the entry, it does nothing.
func (t *Tx) AuditResource(id string) { t.AuditResources(id) }

// AuditResources is AuditResource for a write that makes several resources
// (a batch of sends): one entry each. An entry whose resource the route
// named already keeps it.
func (t *Tx) AuditResources(ids ...string) {
	if t.audit != nil && !t.auditFixed && len(ids) > 0 {
		t.audit.setResources(ids)
	}
}

// fixed reports whether the entry's resource is known before its
// transaction runs (the route named it).
func (a *Audit) fixed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ResourceID != "" && !a.named
}

// commitAudited writes the transaction's entry and commits in one round
// trip: the INSERT (the generated AuditInsert, by its cached prepared
// statement: no parse or plan of its own) and the COMMIT are one batch,
// one pipeline of messages with one Sync. If the INSERT fails, the server
// skips the COMMIT and the transaction stays open, aborted, for InTx's
// rollback; the write is lost with its entry.
func (t *Tx) commitAudited(ctx context.Context) error {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 2)}
	if err := t.audit.insert(ctx, queries.New(batching{b})); err != nil {
		return err
	}
	b.Queue("commit")
	br := t.raw.SendBatch(ctx, b)
	_, err := br.Exec()
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() == "ROLLBACK" { // what COMMIT answers in an aborted transaction
		err = pgx.ErrTxCommitRollback
	}
	return Translate(err)
}

// batching is a queries.DBTX that queues the statements it is given into a
// batch, for the generated inserts of an entry (Audit.insert); nothing
// else runs through it.
type batching struct{ b *pgx.Batch }

func (q batching) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

var errBatching = errors.New("store: only Exec queues into an audit batch")

func (batching) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, errBatching }

func (batching) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{} }

func (batching) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, errBatching
}

type errRow struct{}

func (errRow) Scan(...any) error { return errBatching }

// AuditMany makes the transaction write the entries of others' writes that
// it carries out (a group commit's batch), as[i] about resource
// resourceIDs[i]: each one still pending is claimed and inserted now, and
// marked written once the transaction has committed. One statement for the
// batch.
func (t *Tx) AuditMany(ctx context.Context, as []*Audit, resourceIDs []string) error {
	var p queries.AuditInsertManyParams
	for i, a := range as {
		if a == nil || !a.claim() {
			continue
		}
		t.carried = append(t.carried, a)
		a.setResources(resourceIDs[i : i+1])
		appendRow(&p, a.row(), resourceIDs[i])
	}
	if len(p.Ids) == 0 {
		return nil
	}
	return t.Queries.AuditInsertMany(ctx, p)
}

// settleAudits ends the claims of the transaction's entries.
func (t *Tx) settleAudits(committed bool) {
	if t.audit != nil {
		t.audit.settle(committed)
	}
	for _, a := range t.carried {
		a.settle(committed)
	}
}

// WriteAudit writes a pending entry on its own, for a write request that
// ran no transaction which wrote it: one that writes nothing to the
// database (a preview, a dry run, a test delivery) or found nothing to
// change (a repeated PUT). An entry already written is left alone.
func (db *DB) WriteAudit(ctx context.Context, a *Audit) error {
	if !a.claim() {
		return nil
	}
	err := a.insert(ctx, db.Queries)
	a.settle(err == nil)
	return err
}
