package contacts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/store"
	"tidings/queries"
)

// Uploads (ADDENDUM 25, last bullet; docs/decisions.md "Import limits").
// An import's body arrives at the client's pace, which may be a byte every
// few seconds for as long as the upload deadline allows. It is received
// whole into a temporary file, holding no database connection, and staged
// from the file only then (Create, at the disk's pace). While it arrives
// it holds a place: one of its tenant's MaxRunning (a row, so that every
// api instance counts it) and one of this process's MaxUploads.

// Defaults of the upload limits.
const (
	// DefaultMaxRunning is IMPORT_MAX_RUNNING's default.
	DefaultMaxRunning = 2
	// DefaultMaxUploads is IMPORT_MAX_UPLOADS's default: eight bodies of
	// at most 512 MiB is 4 GiB of spool at worst.
	DefaultMaxUploads = 8
	// DefaultUploadTimeout is IMPORT_UPLOAD_TIMEOUT's default: 512 MiB at
	// about 1 MB/s.
	DefaultUploadTimeout = 10 * time.Minute
	// StageTimeout bounds staging a received body (a COPY from the local
	// file: 512 MiB takes well under a minute).
	StageTimeout = 5 * time.Minute
	// UploadRetryAfter is the Retry-After of an upload refused for want
	// of a place: an import of a million rows runs in about a minute.
	UploadRetryAfter = 30
)

// Upload is an import being received: its place, and the temporary file
// its body goes to. Close frees what it holds.
type Upload struct {
	s *Imports
	// TenantID and ID name the import to be: it takes this id.
	TenantID, ID string
	format       ImportFormat
	file         *os.File
	// staged: the import committed and took the tenant's place.
	staged bool
	closed bool
}

// Uploading is how many uploads this process is receiving.
func (s *Imports) Uploading() int { return int(s.uploading.Load()) }

func (s *Imports) maxRunning() int64 {
	if s.MaxRunning > 0 {
		return int64(s.MaxRunning)
	}
	return DefaultMaxRunning
}

func (s *Imports) uploadTimeout() time.Duration {
	if s.UploadTimeout > 0 {
		return s.UploadTimeout
	}
	return DefaultUploadTimeout
}

// BeginUpload takes a place for a new import of the tenant, before any of
// its body is read. A tenant with MaxRunning imports uploading or running
// already is RATE_LIMITED; a process receiving MaxUploads bodies already
// is SERVICE_UNAVAILABLE (another instance may take it); both with
// Retry-After.
func (s *Imports) BeginUpload(ctx context.Context, tenantID string) (*Upload, error) {
	maxUploads := int64(s.MaxUploads)
	if maxUploads <= 0 {
		maxUploads = DefaultMaxUploads
	}
	if s.uploading.Add(1) > maxUploads {
		s.uploading.Add(-1)
		return nil, apperr.Overloaded("SERVICE_UNAVAILABLE", fmt.Sprintf(
			"this instance is receiving as many imports as it takes (%d); retry after %d seconds",
			maxUploads, UploadRetryAfter), UploadRetryAfter)
	}
	u := &Upload{s: s, TenantID: tenantID, ID: ids.New(ImportID)}
	// The place outlives the longest upload and its staging, so it counts
	// while either may still run, and no longer than that if the process
	// died.
	ttl := s.uploadTimeout() + StageTimeout + time.Minute
	err := s.DB.InTx(ctx, func(q *store.Tx) error {
		if err := q.ContactImportSlotsLock(ctx, tenantID); err != nil {
			return err
		}
		taken, err := q.ContactImportSlotsTaken(ctx, tenantID)
		if err != nil {
			return err
		}
		if taken >= s.maxRunning() {
			e := apperr.RateLimited(UploadRetryAfter)
			e.Message = fmt.Sprintf("at most %d imports of a tenant may be uploading or running at once; retry after %d seconds",
				s.maxRunning(), UploadRetryAfter)
			return e
		}
		return q.ContactImportUploadInsert(ctx, queries.ContactImportUploadInsertParams{TenantID: tenantID, ID: u.ID,
			TtlSeconds: ttl.Seconds()})
	})
	if err != nil {
		s.uploading.Add(-1)
		return nil, err
	}
	return u, nil
}

// spoolWriter keeps the first error writing the spool: a full disk is the
// service's fault, not the body's.
type spoolWriter struct {
	w   io.Writer
	err error
}

func (s *spoolWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

// Receive reads body to its end into a temporary file, holding no
// database connection. The CSV header and the first row are judged as
// they arrive, so a body that cannot start an import is refused before
// the rest is read (VALIDATION_ERROR); past MaxImportBytes it is
// PAYLOAD_TOO_LARGE; a body that fails to arrive is VALIDATION_ERROR on
// body (or the *apperr.Error body returned). The row limit is judged when
// the body is staged.
func (u *Upload) Receive(format ImportFormat, body io.Reader) error {
	if u.file != nil {
		return errors.New("contact import: an upload is received once")
	}
	f, err := os.CreateTemp(u.s.SpoolDir, "tidings-import-*")
	if err != nil {
		return fmt.Errorf("contact import: spool: %w", err)
	}
	// Unlinked at once: its space comes back when it is closed, also if
	// the process dies first.
	_ = os.Remove(f.Name())
	u.file, u.format = f, format
	sw := &spoolWriter{w: bufio.NewWriterSize(f, 256<<10)}
	limited := &limitedBody{r: body, left: MaxImportBytes}
	_, err = newImportReader(format, io.TeeReader(limited, sw))
	if err == nil {
		_, err = io.Copy(sw, limited)
	}
	if sw.err != nil {
		return fmt.Errorf("contact import: spool: %w", sw.err)
	}
	if err != nil {
		return bodyUnread(err)
	}
	if err := sw.w.(*bufio.Writer).Flush(); err != nil {
		return fmt.Errorf("contact import: spool: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("contact import: spool: %w", err)
	}
	return nil
}

// Stage stages the received body as the import (Create) and returns it;
// the import takes the upload's id and its place. beforeCommit is
// CreateImport.BeforeCommit.
func (u *Upload) Stage(ctx context.Context, beforeCommit func(context.Context) error) (queries.ContactImport, error) {
	if u.file == nil {
		return queries.ContactImport{}, errors.New("contact import: staged before it was received")
	}
	imp, err := u.s.Create(ctx, u.TenantID, CreateImport{Format: u.format, Body: bufio.NewReaderSize(u.file, 256<<10),
		upload: u, BeforeCommit: beforeCommit})
	u.staged = err == nil // else Close frees the place (a no-op if the import took it)
	return imp, err
}

// releaseTimeout bounds freeing a place (its expiry frees it otherwise).
const releaseTimeout = 10 * time.Second

// Close frees what the upload holds: its file, this process's place and,
// unless its import was staged, the tenant's place. ctx's cancellation
// does not stop it.
func (u *Upload) Close(ctx context.Context) error {
	if u.closed {
		return nil
	}
	u.closed = true
	u.s.uploading.Add(-1)
	var errs []error
	if u.file != nil {
		errs = append(errs, u.file.Close())
	}
	if !u.staged {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		_, err := u.s.DB.ContactImportUploadDelete(ctx, queries.ContactImportUploadDeleteParams{TenantID: u.TenantID,
			ID: u.ID})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// PurgeUploads deletes the places of uploads whose process died (every
// tenant; the import sweep).
func (s *Imports) PurgeUploads(ctx context.Context) (int64, error) {
	return s.DB.ContactImportUploadsPurge(ctx)
}
