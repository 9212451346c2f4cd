// Package store owns the PostgreSQL connection: the pool, migrations, the
// transaction helper and the translation of driver errors into apperr codes.
package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tidings/internal/tasks"
	"tidings/queries"
)

// DB is the pool plus the generated queries bound to it. Every query's
// errors pass through Translate.
type DB struct {
	Pool *pgxpool.Pool
	*queries.Queries
	// Tasks enqueues what transactions schedule (Tx.Schedule) after they
	// commit; nil leaves it to the worker's sweeps.
	Tasks *tasks.Client
}

// DefaultMaxConns is the least number of connections Open's pool keeps.
const DefaultMaxConns = 16

// Open connects to url and verifies the connection.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	// pgx's default of max(4, CPUs) connections queues a send's handful of
	// queries behind three others while the provider call holds none:
	// measured, 16 concurrent sends ran at a third of the rate with 4
	// connections. pool_max_conns in DATABASE_URL still wins.
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(DefaultMaxConns, int32(4*runtime.GOMAXPROCS(0)))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	return New(pool), nil
}

// Share opens another pool of at most maxConns connections on db's
// database, with db's settings: a share of the database kept apart for
// long work (contact imports), so that such work never takes the
// connections requests need from db's pool, and requests never take its
// own. Its Tasks are db's.
func (db *DB) Share(ctx context.Context, maxConns int) (*DB, error) {
	cfg := db.Pool.Config()
	cfg.MaxConns = int32(maxConns)
	cfg.MinConns = 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	shared := New(pool)
	shared.Tasks = db.Tasks
	return shared, nil
}

// New wraps an existing pool.
func New(pool *pgxpool.Pool) *DB { return &DB{Pool: pool, Queries: translated(pool)} }

// Close closes the pool.
func (db *DB) Close() { db.Pool.Close() }

// Tx is one transaction: its generated queries, and what must happen once
// it has committed. Domain code that writes a row whose timer is a queued
// task (a scheduled send) says so with Schedule; the task is enqueued
// after the commit, never before (a worker could not see the row) and
// never for a transaction that rolled back.
type Tx struct {
	*queries.Queries
	raw    pgx.Tx
	after  []func(context.Context)
	timers []tasks.Timer
	// audit is the request's audit entry when this transaction holds it
	// (the first of the request's transactions: InTxOptions), carried
	// those of others' writes it carries out (AuditMany).
	audit   *Audit
	carried []*Audit
	// auditFixed: the route named audit's resource before the
	// transaction began; the transaction's own naming does not replace it.
	auditFixed bool
}

// AfterCommit runs fn once the transaction has committed (not at all if it
// rolls back), with a context that outlives the caller's cancellation.
func (t *Tx) AfterCommit(fn func(ctx context.Context)) { t.after = append(t.after, fn) }

// Schedule enqueues a scheduled send's task once the transaction has
// committed (through DB.Tasks; without it the worker's sweep finds the row).
func (t *Tx) Schedule(tm tasks.Timer) { t.timers = append(t.timers, tm) }

// Scheduled returns the timers scheduled so far: what the commit will
// enqueue.
func (t *Tx) Scheduled() []tasks.Timer { return append([]tasks.Timer(nil), t.timers...) }

// Raw is the pgx transaction, for the rare statement built at run time
// (segment compute); its errors are not translated: pass them to Translate.
func (t *Tx) Raw() pgx.Tx { return t.raw }

// Savepoint runs fn under a savepoint of the transaction: if fn fails,
// what it wrote is rolled back and its error returned, and the
// transaction goes on (a statement that failed would otherwise abort it).
// fn uses t's queries.
func (t *Tx) Savepoint(ctx context.Context, fn func() error) error {
	sp, err := t.raw.Begin(ctx)
	if err != nil {
		return Translate(err)
	}
	if err := fn(); err != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return errors.Join(err, Translate(rerr))
		}
		return err
	}
	return Translate(sp.Commit(ctx))
}

// afterCommitTimeout bounds the hooks: they enqueue, and the sweeps catch
// whatever they miss.
const afterCommitTimeout = 5 * time.Second

// Tx runs fn in a transaction (see InTx) for the common case that needs
// only the queries.
func (db *DB) Tx(ctx context.Context, fn func(q *queries.Queries) error) error {
	return db.InTx(ctx, func(tx *Tx) error { return fn(tx.Queries) })
}

// InTx runs fn in a transaction and, once it has committed, its
// after-commit work. The deferred rollback is a no-op after a commit and
// guarantees that a panic or early return never leaks an open
// transaction.
func (db *DB) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	return db.InTxOptions(ctx, pgx.TxOptions{}, fn)
}

// InTxOptions is InTx with the transaction's options (a repeatable-read
// snapshot for work that must read and then delete the same rows).
func (db *DB) InTxOptions(ctx context.Context, opts pgx.TxOptions, fn func(tx *Tx) error) error {
	// The request's audit entry, if this is the first of its transactions.
	var a *Audit
	if a = AuditOf(ctx); a != nil && !a.claim() {
		a = nil
	}
	fixed := a != nil && a.fixed()
	// The connection is acquired here rather than by Pool.BeginTx, whose
	// transaction must end in its own Commit or Rollback: one that writes
	// an entry commits through a batch instead (commitAudited), and the
	// connection goes back to the pool without another message.
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		if a != nil {
			a.settle(false)
		}
		return err
	}
	defer conn.Release()
	raw, err := conn.BeginTx(ctx, opts)
	if err != nil {
		if a != nil {
			a.settle(false)
		}
		return err
	}
	ended := false
	// Deferred after the release, so it runs before it: the connection
	// goes back to the pool outside a transaction.
	defer func() {
		if !ended {
			_ = raw.Rollback(ctx)
		}
	}()
	tx := &Tx{Queries: translated(raw), raw: raw, audit: a, auditFixed: fixed}
	committed := false
	// Deferred so that a panic in fn, too, hands the entry back.
	defer func() { tx.settleAudits(committed) }()
	if err := fn(tx); err != nil {
		return err
	}
	if tx.audit != nil {
		// The request's audit entry, once fn has named the resource, and
		// the COMMIT in one round trip.
		if err := tx.commitAudited(ctx); err != nil {
			return err
		}
		ended = true
	} else if err := Translate(raw.Commit(ctx)); err != nil { // a deferred constraint fails at commit
		return err
	}
	committed = true
	if len(tx.after) == 0 && len(tx.timers) == 0 {
		return nil
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterCommitTimeout)
	defer cancel()
	for _, f := range tx.after {
		f(actx)
	}
	db.Tasks.ScheduledSends(actx, tx.timers)
	return nil
}
