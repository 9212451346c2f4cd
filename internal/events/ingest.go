package events

import (
	"context"
	"errors"

	"tidings/internal/apperr"
	"tidings/internal/groupcommit"
	"tidings/internal/store"
	"tidings/internal/telemetry"
)

// Ingest records custom events by group commit (POST /api/events): a
// caller's event waits in a groupcommit.Committer until a batch of events
// is recorded by RecordCustomMany in one transaction, and the caller is
// answered once that transaction has committed, never before. What an
// event does is RecordCustom's (the record, the derived fields, the
// hooks); Ingest only decides when it is written and with which others.
type Ingest struct {
	c *groupcommit.Committer[Custom, *Recorded]
}

// NewIngest records through r in batches bounded by o.
func NewIngest(r *Recorder, o groupcommit.Options) *Ingest {
	return &Ingest{c: groupcommit.New(func(ctx context.Context, batch []Custom) ([]*Recorded, []error) {
		telemetry.IngestBatch(len(batch))
		return r.RecordCustomMany(ctx, batch)
	}, o)}
}

// RetryAfter is the wait, in seconds, that Busy asks for.
const RetryAfter = 1

// Busy is the error of an event that was not recorded because the ingest
// queue is full (the database is slower than the load), the process is
// shutting down, or the request gave up while its event still waited:
// nothing was written, and the client may retry after RetryAfter seconds
// (503 SERVICE_UNAVAILABLE with Retry-After).
func Busy() *apperr.Error {
	return apperr.Overloaded("SERVICE_UNAVAILABLE",
		"too many events are waiting to be written; this one was not recorded: retry after 1 second", RetryAfter)
}

// Record records in as RecordCustom would, in the next batch, and returns
// once that batch's transaction has committed (or failed). It answers Busy
// at once when the queue is full, and when ctx ends before a batch took
// the event (which is then never written); once a batch holds the event it
// waits for the outcome whatever ctx says.
func (g *Ingest) Record(ctx context.Context, in Custom) (*Recorded, error) {
	in.Audit = store.AuditOf(ctx)
	rec, err := g.c.Submit(ctx, in)
	if groupcommit.NotWritten(err) {
		telemetry.IngestNotWritten(errors.Is(err, groupcommit.ErrAbandoned))
		return nil, Busy()
	}
	return rec, err
}

// Close stops taking events (Record answers Busy), records every event
// already queued and waits until every batch has committed: the api's
// drain on SIGTERM.
func (g *Ingest) Close() { g.c.Close() }

// Stats are the committer's counters (batches, events, refusals).
func (g *Ingest) Stats() *groupcommit.Stats { return g.c.Stats() }

// Queued is how many events wait for a batch now.
func (g *Ingest) Queued() int { return g.c.Queued() }
