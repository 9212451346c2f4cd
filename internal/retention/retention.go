// Package retention archives events past their tenant's retention
// (ADDENDUM 15): each tenant's expired events of one UTC month are written
// to that month's archive (gzip NDJSON), made durable, and only then
// deleted, in one repeatable-read transaction that also records the
// archive's new committed size. A crash anywhere leaves each event in the
// table or in the committed archive, never both and never neither:
//
//   - before the commit, the rows are all still in the table and whatever
//     the run appended lies past the committed size, cut off by the next
//     append;
//   - after it, the rows are gone and the archive's committed size covers
//     them.
//
// The delete sees the snapshot the reads saw, so an event recorded during
// the run (an old timestamp posted now) is neither written nor deleted: it
// waits for the next run.
package retention

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"tidings/internal/apperr"
	"tidings/internal/store"
	"tidings/queries"
)

// PartitionsAhead is how many months past the current one have their
// partition made ahead of time.
const PartitionsAhead = 3

// pageSize is how many events one read of the archiver holds in memory.
const pageSize = 5000

// restPerWork is how long the archiver rests after each page, as a
// multiple of the time the page took: a run takes about a fifth of the
// machine, so ingest goes on beside it at most of its rate (measured: 60%
// of the ingest rate while a run went flat out, a million events in 6 s;
// the target is 80%, within 60 s).
const restPerWork = 4

// Line is one archived event: as GET /api/events shows it, with contactId.
type Line struct {
	EventID            string          `json:"eventId"`
	ContactID          string          `json:"contactId"`
	Name               string          `json:"name"`
	Properties         json.RawMessage `json:"properties"`
	Timestamp          string          `json:"timestamp"`
	ProcessedSequences []string        `json:"processedSequences"`
}

// timeLayout is the API's: ISO 8601, UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z"

// Archiver moves expired events to the archive.
type Archiver struct {
	DB    *store.DB
	Files Files
	Log   *slog.Logger
	// Fault, when set, is called at each step of a month's run and may
	// stop it there as a crash would (tests): "page" after the first page
	// is written, "written" before the sync, "synced" before the delete,
	// "deleted" before the commit, "committed" after it.
	Fault func(step string) error
}

// Result is what a run did.
type Result struct {
	Tenants, Months int
	Events          int64
}

// Run makes sure the coming months have their partitions, then archives
// every tenant's expired events, oldest month first. A month another
// archiver holds is skipped (the next run takes it).
func (a *Archiver) Run(ctx context.Context) (Result, error) {
	var res Result
	if _, err := a.DB.EventsEnsurePartitions(ctx, PartitionsAhead); err != nil {
		return res, fmt.Errorf("event partitions: %w", err)
	}
	due, err := a.DB.RetentionDue(ctx)
	if err != nil {
		return res, err
	}
	for _, t := range due {
		res.Tenants++
		for ctx.Err() == nil {
			oldest, err := a.DB.RetentionOldest(ctx, t.ID)
			if err != nil {
				return res, err
			}
			if !oldest.Before(t.Cutoff) {
				break
			}
			from := monthStart(oldest)
			to := from.AddDate(0, 1, 0)
			if t.Cutoff.Before(to) {
				to = t.Cutoff
			}
			n, err := a.Month(ctx, t.ID, from, to)
			if err != nil {
				return res, fmt.Errorf("archive %s %s: %w", t.ID, from.Format("2006-01"), err)
			}
			if n == 0 { // held by another archiver
				break
			}
			res.Months++
			res.Events += n
		}
	}
	return res, ctx.Err()
}

// monthStart is the start of t's UTC month.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Month archives the tenant's events in [from, to), which lie in one UTC
// month, and returns how many it archived (0 when another archiver holds
// the month).
func (a *Archiver) Month(ctx context.Context, tenantID string, from, to time.Time) (int64, error) {
	month := from.UTC().Format("2006-01")
	var n int64
	err := a.DB.InTxOptions(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx *store.Tx) error {
		if ok, err := tx.ArchiveLock(ctx, queries.ArchiveLockParams{TenantID: tenantID, Month: month}); err != nil || !ok {
			return err
		}
		size, err := tx.ArchiveCommitted(ctx, queries.ArchiveCommittedParams{TenantID: tenantID, Month: month})
		if err != nil {
			return err
		}
		newSize, err := a.Files.Append(tenantID, month, size, func(w io.Writer) error {
			var werr error
			n, werr = a.write(ctx, tx, w, tenantID, from, to)
			if werr == nil {
				werr = a.fault("written")
			}
			return werr
		})
		if err != nil {
			return err
		}
		if err := a.fault("synced"); err != nil {
			return err
		}
		deleted, err := tx.ArchiveEventsDelete(ctx, queries.ArchiveEventsDeleteParams{TenantID: tenantID,
			FromTime: from, ToTime: to})
		if err != nil {
			return err
		}
		if deleted != n {
			// Cannot happen in one snapshot; if it does, nothing is lost:
			// the rollback keeps every row and the append is cut off.
			return fmt.Errorf("archived %d events but the delete found %d", n, deleted)
		}
		if err := a.fault("deleted"); err != nil {
			return err
		}
		return tx.ArchiveRecord(ctx, queries.ArchiveRecordParams{TenantID: tenantID, Month: month, Events: n, Bytes: newSize})
	})
	if err != nil {
		return 0, err
	}
	if err := a.fault("committed"); err != nil {
		return n, err
	}
	if n > 0 && a.Log != nil {
		a.Log.Info("events archived", "tenant_id", tenantID, "month", month, "events", n)
	}
	return n, nil
}

// write streams the events of [from, to) into one gzip member, a page at
// a time, and returns how many it wrote.
func (a *Archiver) write(ctx context.Context, tx *store.Tx, w io.Writer, tenantID string, from, to time.Time) (int64, error) {
	// BestSpeed: the archive is written once and read rarely; CPU spent
	// here is taken from ingest.
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return 0, err
	}
	enc := json.NewEncoder(zw)
	var n int64
	after, afterID := from.Add(-time.Microsecond), ""
	for {
		began := time.Now()
		rows, err := tx.ArchiveEventsPage(ctx, queries.ArchiveEventsPageParams{TenantID: tenantID, FromTime: from,
			ToTime: to, AfterTime: after, AfterID: afterID, Lim: pageSize})
		if err != nil {
			return 0, err
		}
		for _, e := range rows {
			if err := enc.Encode(LineOf(e)); err != nil {
				return 0, err
			}
		}
		n += int64(len(rows))
		if n > 0 && n == int64(len(rows)) {
			if err := a.fault("page"); err != nil {
				return 0, err
			}
		}
		if len(rows) < pageSize {
			break
		}
		last := rows[len(rows)-1]
		after, afterID = last.OccurredAt, last.ID
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(restPerWork * time.Since(began)):
		}
	}
	return n, zw.Close()
}

// LineOf is an event's archive line.
func LineOf(e queries.Event) Line {
	return Line{EventID: e.ID, ContactID: e.ContactID, Name: e.Name, Properties: e.Properties,
		Timestamp: e.OccurredAt.UTC().Format(timeLayout), ProcessedSequences: e.ProcessedSequences}
}

func (a *Archiver) fault(step string) error {
	if a.Fault == nil {
		return nil
	}
	return a.Fault(step)
}

// Archives reads a tenant's archive for the API.
type Archives struct {
	DB    *store.DB
	Files Files
}

// ValidMonth reports whether s is a month as the API names it (YYYY-MM).
func ValidMonth(s string) bool {
	t, err := time.Parse("2006-01", s)
	return err == nil && t.Format("2006-01") == s
}

// List returns the tenant's archived months, newest first.
func (s *Archives) List(ctx context.Context, tenantID string) ([]queries.EventArchive, error) {
	return s.DB.ArchiveList(ctx, tenantID)
}

// Open returns the month's archived events as NDJSON, read from the
// committed part of its archive as the caller reads (no month is held in
// memory): NOT_FOUND for a month with none, VALIDATION_ERROR for a
// malformed one.
func (s *Archives) Open(ctx context.Context, tenantID, month string) (io.ReadCloser, error) {
	if !ValidMonth(month) {
		return nil, apperr.Invalid("month", "must be a month as YYYY-MM")
	}
	rec, err := s.DB.ArchiveGet(ctx, queries.ArchiveGetParams{TenantID: tenantID, Month: month})
	if err != nil {
		return nil, apperr.Specific(err, apperr.KindNotFound, apperr.NotFound("NOT_FOUND", "archive of "+month))
	}
	f, err := s.Files.Open(tenantID, month, rec.Bytes)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, closeBoth{zr, f}}, nil
}

type closeBoth struct{ a, b io.Closer }

func (c closeBoth) Close() error { return errors.Join(c.a.Close(), c.b.Close()) }
