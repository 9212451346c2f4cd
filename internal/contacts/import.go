package contacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/ids"
	"tidings/internal/store"
	"tidings/internal/strictjson"
	"tidings/internal/topics"
	"tidings/queries"

	"golang.org/x/sync/errgroup"
)

// Contact imports (issue 26; docs/decisions.md "Contact import"). Create
// streams a body into staging rows (COPY) and commits them with the import
// before the caller answers; Run upserts them a chunk at a time, in line
// order, each chunk one transaction that writes its contacts set-based and
// moves the counters and the import's next line, so a crash repeats at
// most an uncommitted chunk; the staging rows go once the import ends. Rows are judged by the rules of PUT
// /api/contacts: Body.Input, the property rules, the topic check, the
// plan limit, the merge.

// Import statuses.
const (
	ImportRunning   = "running"
	ImportCompleted = "completed"
	ImportFailed    = "failed"
)

// ImportID is the prefix of import ids.
const ImportID = "imp_"

// Bounds of processing.
const (
	// MaxImportErrors is how many failed rows an import keeps (the first,
	// by line).
	MaxImportErrors = 100
	// DefaultImportChunk is how many rows one chunk transaction takes.
	DefaultImportChunk = 5000
	// DefaultImportParts is how many parts a new import's rows are
	// split into, processed side by side (one connection each): two keeps
	// both cores of a small machine busy, one on PostgreSQL's inserts
	// while the other judges the next chunk (docs/benchmarks.md).
	DefaultImportParts = 2
	// MaxImportParts bounds Imports.Parts (the schema's check).
	MaxImportParts = 64
	// MaxImportAttempts is how many task runs in a row may end without a
	// chunk committed before the import is failed.
	MaxImportAttempts = 10
	// importBatch and importBatchBytes bound one COPY of staging rows
	// while the body is read.
	importBatch      = 10_000
	importBatchBytes = 8 << 20
	// importRaceRetries bounds the tries of a chunk whose plan-limit
	// reservation lost to another writer, and the rounds a row may be
	// placed again after a contact was created or deleted under it.
	importRaceRetries = 5
)

// Imports runs contact imports.
type Imports struct {
	// DB is the pool of requests: the progress route and the places of
	// uploads (upload.go).
	DB *store.DB
	// Work is the pool of imports' long work, staging and chunks, kept
	// apart from DB (IMPORT_DB_CONNS, store.DB.Share) so that imports
	// never take the connections requests need; nil: DB.
	Work *store.DB
	// FreeLimit is PLAN_FREE_CONTACTS.
	FreeLimit int
	// Chunk is how many rows one transaction takes (0:
	// DefaultImportChunk).
	Chunk int
	// Parts is how many parts a new import's rows are split into (0:
	// DefaultImportParts); an import keeps the number it was created with.
	Parts int
	// MaxRunning is IMPORT_MAX_RUNNING: a tenant's imports uploading or
	// running at once (0: DefaultMaxRunning).
	MaxRunning int
	// MaxUploads is IMPORT_MAX_UPLOADS: uploads this process receives at
	// once (0: DefaultMaxUploads).
	MaxUploads int
	// UploadTimeout is IMPORT_UPLOAD_TIMEOUT: the longest an upload may
	// take to arrive (0: DefaultUploadTimeout). The caller cuts the body
	// off; here it bounds how long the place of an upload whose process
	// died keeps counting.
	UploadTimeout time.Duration
	// SpoolDir is IMPORT_SPOOL_DIR, where bodies wait while they arrive
	// ("": the system's temporary directory).
	SpoolDir string
	// FailurePage is how many failed rows Failures reads at a time (0:
	// DefaultFailurePage).
	FailurePage int

	// uploading counts the uploads this process is receiving.
	uploading atomic.Int64
}

// work is the pool of imports' long work.
func (s *Imports) work() *store.DB {
	if s.Work != nil {
		return s.Work
	}
	return s.DB
}

// partsFor is how many parts a new import of the tenant is split into:
// one under a plan limit, so that the rows admitted while the plan has
// room are the first new ones by line, as the limit's rule says (parts
// would admit them in the order their chunks happen to commit); else
// Parts. An import keeps its number if the plan changes while it runs.
func (s *Imports) partsFor(ctx context.Context, q *store.Tx, tenantID string) (int, error) {
	room, err := s.room(ctx, q, tenantID)
	switch {
	case err != nil:
		return 0, err
	case room != math.MaxInt64:
		return 1, nil
	case s.Parts <= 0:
		return DefaultImportParts, nil
	}
	return min(s.Parts, MaxImportParts), nil
}

// ImportNotFound is the 404 of an unknown import (or another tenant's).
func ImportNotFound() *apperr.Error { return apperr.NotFound("NOT_FOUND", "import") }

// CreateImport is what Create stages.
type CreateImport struct {
	Format ImportFormat
	Body   io.Reader
	// upload is the received upload the import is staged from: the
	// import takes its id and, in the staging transaction, its place.
	upload *Upload
	// BeforeCommit runs once the whole body is staged, in place of the
	// commit's last step: an error rolls everything back and is returned
	// (the api claims the request's Idempotency-Key here, with the body's
	// hash that only the end of the body gives).
	BeforeCommit func(ctx context.Context) error
}

// Create reads the body into a new import's staging rows and commits them;
// its task is queued after the commit. A body that cannot start an import
// (empty, a CSV header without an email column, no rows) is
// VALIDATION_ERROR, one past MaxImportBytes or MaxImportRows
// PAYLOAD_TOO_LARGE; nothing is stored then.
func (s *Imports) Create(ctx context.Context, tenantID string, c CreateImport) (queries.ContactImport, error) {
	var imp queries.ContactImport
	rd, err := newImportReader(c.Format, c.Body)
	if err != nil {
		return imp, err
	}
	id := ids.New(ImportID)
	if c.upload != nil {
		id = c.upload.ID
	}
	err = s.work().InTx(ctx, func(q *store.Tx) error {
		if c.upload != nil {
			// The upload's place becomes the import's (running): at no
			// moment does the tenant's count miss it or see it twice.
			if _, err := q.ContactImportUploadDelete(ctx, queries.ContactImportUploadDeleteParams{
				TenantID: tenantID, ID: id}); err != nil {
				return err
			}
		}
		cols := rd.columns
		if cols == nil {
			cols = []string{}
		}
		parts, err := s.partsFor(ctx, q, tenantID)
		if err != nil {
			return err
		}
		seq, err := q.ContactImportInsert(ctx, queries.ContactImportInsertParams{TenantID: tenantID, ID: id,
			Format: string(c.Format), Columns: cols, EmailColumn: int32(max(rd.emailColumn, 0)), Parts: int32(parts)})
		if err != nil {
			return err
		}
		q.AuditResource(id)
		if err := q.ContactImportPartsAdd(ctx, queries.ContactImportPartsAddParams{ImportSeq: seq,
			LastPart: int32(parts - 1)}); err != nil {
			return err
		}
		total, err := stage(ctx, q, seq, parts, rd)
		if err != nil {
			return err
		}
		if _, err := q.ContactImportSetTotal(ctx, queries.ContactImportSetTotalParams{TenantID: tenantID, ID: id,
			Total: total}); err != nil {
			return err
		}
		if c.BeforeCommit != nil {
			if err := c.BeforeCommit(ctx); err != nil {
				return err
			}
		}
		q.AfterCommit(func(ctx context.Context) { s.DB.Tasks.ContactImport(ctx, tenantID, id) })
		return nil
	})
	if err != nil {
		return imp, err
	}
	return s.Get(ctx, tenantID, id)
}

// stage copies the reader's rows into the import's staging rows, a batch
// per COPY; the next batch is read while one is copied. It returns how
// many rows it staged.
func stage(ctx context.Context, q *store.Tx, seq int64, parts int, rd *importReader) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []queries.ContactImportRowsAddParams, 1)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		readErr <- readBatches(ctx, rd, seq, parts, batches)
	}()
	var total int64
	var copyErr error
	for b := range batches {
		if copyErr != nil {
			continue // drain, so the reader can end
		}
		n, err := q.ContactImportRowsAdd(ctx, b)
		total += n
		if err != nil {
			copyErr = err
			cancel()
		}
	}
	if err := <-readErr; err != nil && !errors.Is(err, context.Canceled) {
		return 0, err
	}
	return total, copyErr
}

// readBatches reads rows into batches of at most importBatch rows and
// importBatchBytes bytes until the body ends.
func readBatches(ctx context.Context, rd *importReader, seq int64, parts int, out chan<- []queries.ContactImportRowsAddParams) error {
	batch := make([]queries.ContactImportRowsAddParams, 0, importBatch)
	size := 0
	send := func() error {
		select {
		case out <- batch:
		case <-ctx.Done():
			return ctx.Err()
		}
		batch, size = make([]queries.ContactImportRowsAddParams, 0, importBatch), 0
		return nil
	}
	for {
		row, err := rd.next()
		if err == io.EOF {
			if len(batch) == 0 {
				return nil
			}
			return send()
		}
		if err != nil {
			return err
		}
		p := queries.ContactImportRowsAddParams{ImportSeq: seq, Part: rd.part(row, parts), Line: int32(row.line),
			Fields: row.fields}
		if rd.format == NDJSON && row.problem == "" {
			p.Doc = &row.doc
		}
		if row.problem != "" {
			p.Problem = &row.problem
		}
		batch = append(batch, p)
		if size += row.size(); len(batch) >= importBatch || size >= importBatchBytes {
			if err := send(); err != nil {
				return err
			}
		}
	}
}

// Get returns an import of the tenant, or NOT_FOUND.
func (s *Imports) Get(ctx context.Context, tenantID, id string) (queries.ContactImport, error) {
	imp, err := s.DB.ContactImportGet(ctx, queries.ContactImportGetParams{TenantID: tenantID, ID: id})
	return imp, apperr.Specific(err, apperr.KindNotFound, ImportNotFound())
}

// ImportRef names an import.
type ImportRef struct{ TenantID, ID string }

// Stale lists running imports (every tenant) that have not moved since
// before, oldest first: their task was lost or died (the sweep queues it
// again).
func (s *Imports) Stale(ctx context.Context, before time.Time, limit int) ([]ImportRef, error) {
	rows, err := s.DB.ContactImportStale(ctx, queries.ContactImportStaleParams{Before: before, Lim: int32(limit)})
	refs := make([]ImportRef, len(rows))
	for i, r := range rows {
		refs[i] = ImportRef{TenantID: r.TenantID, ID: r.ID}
	}
	return refs, err
}

// errRaced is a chunk whose plan-limit reservation lost to another writer:
// it is rolled back and tried again.
var errRaced = errors.New("contact import: the plan's contact count moved under the chunk")

// Run processes an import until it is completed (or failed), or ctx ends.
// Running it again, or twice at once, is safe: chunks take turns on the
// import's row lock and each takes the rows the last one left. An import
// whose task runs MaxImportAttempts times in a row without committing a
// chunk is failed.
func (s *Imports) Run(ctx context.Context, tenantID, id string) error {
	db := s.work()
	attempts, err := db.ContactImportAttempt(ctx, queries.ContactImportAttemptParams{TenantID: tenantID, ID: id})
	if store.IsNoRows(err) {
		return nil // completed, failed or unknown: nothing to do
	}
	if err != nil {
		return err
	}
	if attempts > MaxImportAttempts {
		reason := fmt.Sprintf("could not be processed: %d task runs in a row ended without progress", attempts-1)
		_, err := db.ContactImportFail(ctx, queries.ContactImportFailParams{TenantID: tenantID, ID: id, Reason: &reason})
		return err
	}
	imp, err := db.ContactImportGet(ctx, queries.ContactImportGetParams{TenantID: tenantID, ID: id})
	if err != nil {
		return apperr.Specific(err, apperr.KindNotFound, ImportNotFound())
	}
	var g errgroup.Group
	for part := range int(imp.Parts) {
		g.Go(func() error { return s.runPart(ctx, tenantID, id, part) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return s.DropRows(ctx, tenantID, id) // only once the import has ended
}

// runPart processes one part of an import until it is done (or the import
// has ended), a chunk at a time.
func (s *Imports) runPart(ctx context.Context, tenantID, id string, part int) error {
	raced := 0
	seen := &seenEmails{}
	for {
		done, err := s.stepPart(ctx, tenantID, id, part, seen)
		switch {
		case errors.Is(err, errRaced) && raced < importRaceRetries:
			raced++
			continue
		case err != nil:
			return err
		case done:
			return nil
		}
		raced = 0
	}
}

// DropRows deletes the staging rows of a finished import (Run does once
// the last chunk has committed; the sweep for an import whose task died
// in between). A running import keeps its rows.
func (s *Imports) DropRows(ctx context.Context, tenantID, id string) error {
	_, err := s.work().ContactImportDropRows(ctx, queries.ContactImportDropRowsParams{TenantID: tenantID, ID: id})
	return err
}

// StagedLeft lists finished imports (every tenant) that ended before
// before and still have staging rows.
func (s *Imports) StagedLeft(ctx context.Context, before time.Time, limit int) ([]ImportRef, error) {
	rows, err := s.DB.ContactImportStagedLeft(ctx, queries.ContactImportStagedLeftParams{Before: before, Lim: int32(limit)})
	refs := make([]ImportRef, len(rows))
	for i, r := range rows {
		refs[i] = ImportRef{TenantID: r.TenantID, ID: r.ID}
	}
	return refs, err
}

// Step processes one chunk of each part of an import that has rows left,
// one after the other, and reports whether the import has ended. Exported
// for tests that stop an import between chunks (a crash).
func (s *Imports) Step(ctx context.Context, tenantID, id string) (done bool, err error) {
	imp, err := s.Get(ctx, tenantID, id)
	if err != nil {
		return false, err
	}
	for part := range int(imp.Parts) {
		if _, err := s.StepPart(ctx, tenantID, id, part); err != nil {
			return false, err
		}
	}
	imp, err = s.Get(ctx, tenantID, id)
	return imp.Status != ImportRunning, err
}

// StepPart processes the next chunk of one part of an import in one
// transaction and reports whether that part is done (or the import has
// ended). The part's row lock serialises its chunks; the import's row is
// locked only once the chunk's contacts are written, to add the counts,
// so the parts' chunks run side by side until then.
func (s *Imports) StepPart(ctx context.Context, tenantID, id string, part int) (done bool, err error) {
	return s.stepPart(ctx, tenantID, id, part, &seenEmails{})
}

// stepPart is StepPart with the part's emails seen so far (Run keeps them
// from chunk to chunk; a fresh set is filled from the staging rows the
// part has processed).
func (s *Imports) stepPart(ctx context.Context, tenantID, id string, part int, seen *seenEmails) (done bool, err error) {
	chunk := s.Chunk
	if chunk <= 0 {
		chunk = DefaultImportChunk
	}
	err = s.work().InTx(ctx, func(q *store.Tx) error {
		prog, err := q.ContactImportPartLock(ctx, queries.ContactImportPartLockParams{TenantID: tenantID, ID: id,
			Part: int16(part)})
		if store.IsNoRows(err) || (err == nil && prog.Done) {
			done = true
			return nil
		}
		if err != nil {
			return err
		}
		imp, err := q.ContactImportGet(ctx, queries.ContactImportGetParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		if imp.Status != ImportRunning {
			done = true
			return nil
		}
		if err := seen.catchUp(ctx, q, imp, part, prog.NextLine, chunk); err != nil {
			return err
		}
		rows, err := q.ContactImportRows(ctx, queries.ContactImportRowsParams{TenantID: tenantID, ID: id,
			Part: int16(part), After: prog.NextLine, Lim: int32(chunk)})
		if err != nil {
			return err
		}
		res, err := s.apply(ctx, q, imp, rows, seen)
		if err != nil {
			return err
		}

		done = len(rows) < chunk
		next := prog.NextLine
		if len(rows) > 0 {
			next = rows[len(rows)-1].Line
		}
		if err := q.ContactImportPartProgress(ctx, queries.ContactImportPartProgressParams{TenantID: tenantID,
			ID: id, Part: int16(part), NextLine: next, Done: done}); err != nil {
			return err
		}
		// The counts: under the import's lock, after which the parts still
		// open are read afresh (a part another chunk finished and committed
		// while this one waited counts as done).
		imp, err = q.ContactImportLock(ctx, queries.ContactImportLockParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		// The failed rows' foreign key takes a share lock on the import's
		// row: written under ContactImportLock, so that two parts' chunks
		// never both hold it shared and wait to lock it (a deadlock).
		if err := keepFailures(ctx, q, imp.Seq, rows, res); err != nil {
			return err
		}
		open, err := q.ContactImportPartsOpen(ctx, queries.ContactImportPartsOpenParams{TenantID: tenantID, ID: id})
		if err != nil {
			return err
		}
		errs, err := firstErrors(imp.Errors, res.failures)
		if err != nil {
			return err
		}
		warns, err := firstErrors(imp.Warnings, res.warnings)
		if err != nil {
			return err
		}
		if err := q.ContactImportProgress(ctx, queries.ContactImportProgressParams{TenantID: tenantID, ID: id,
			Processed: int64(len(rows)), Created: res.created, Updated: res.updated,
			Failed: int64(len(res.failures)), Errors: errs, PlanRefused: res.planRefused,
			Duplicates: int64(len(res.warnings)), Warnings: warns, NextLine: next, Done: open == 0}); err != nil {
			return err
		}
		// Committed: what the set holds up to next is the part's truth
		// (a rolled back chunk's emails stay in it, but only as their own
		// first lines, which is what they are).
		q.AfterCommit(func(context.Context) { seen.upTo = max(seen.upTo, next) })
		return nil
	})
	return done, err
}

// keepFailures writes a chunk's failed rows and warnings with the rows as
// read (schema 0063), in the chunk's transaction.
func keepFailures(ctx context.Context, q *store.Tx, seq int64, rows []queries.ContactImportRowsRow, res chunkResult) error {
	if len(res.failures)+len(res.warnings) == 0 {
		return nil
	}
	byLine := make(map[int]queries.ContactImportRowsRow, len(res.failures)+len(res.warnings))
	for _, r := range rows {
		byLine[int(r.Line)] = r
	}
	out := make([]queries.ContactImportErrorsAddParams, 0, len(res.failures)+len(res.warnings))
	add := func(list []ImportError, warning bool) {
		for _, e := range list {
			r := byLine[e.Line]
			out = append(out, queries.ContactImportErrorsAddParams{ImportSeq: seq, Line: int32(e.Line),
				Warning: warning, Code: e.Code, Message: e.Message, Fields: r.Fields, Doc: r.Doc})
		}
	}
	add(res.failures, false)
	add(res.warnings, true)
	_, err := q.ContactImportErrorsAdd(ctx, out)
	return err
}

// firstErrors merges a chunk's failed rows into the import's kept ones
// and keeps the first MaxImportErrors by line: the parts commit their
// chunks out of line order.
func firstErrors(kept []byte, failures []ImportError) ([]byte, error) {
	var all []ImportError
	if err := json.Unmarshal(kept, &all); err != nil {
		return nil, fmt.Errorf("contact import: kept errors: %w", err)
	}
	if len(failures) == 0 {
		return kept, nil
	}
	all = append(all, failures...)
	slices.SortStableFunc(all, func(a, b ImportError) int { return a.Line - b.Line })
	return json.Marshal(all[:min(len(all), MaxImportErrors)])
}

// ImportError is a failed row of an import, or a warning about one.
type ImportError struct {
	Line int `json:"line"`
	// Code says what kind of failure (ImportCode...); empty in the kept
	// errors of imports from before schema 0063.
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// The codes of failed rows and warnings.
const (
	// ImportCodeInvalid: the row is not a valid PUT /api/contacts body.
	ImportCodeInvalid = "VALIDATION_ERROR"
	// ImportCodeUnreadable: the row could not be read (too long, not
	// UTF-8, not CSV).
	ImportCodeUnreadable = "UNREADABLE_ROW"
	// ImportCodePlanLimit: a new contact past the plan's contact limit.
	ImportCodePlanLimit = "PLAN_LIMIT_EXCEEDED"
	// ImportCodeTooLarge: the contact's properties would pass their bound.
	ImportCodeTooLarge = "PROPERTIES_TOO_LARGE"
	// ImportCodeDuplicate (a warning): the row's email is an earlier
	// line's; it was applied after that line, as a second PUT would be.
	ImportCodeDuplicate = "DUPLICATE_ROW"
)

type chunkResult struct {
	created, updated int64
	failures         []ImportError // by line
	warnings         []ImportError // duplicates, by line
	planRefused      int64
}

// pendingRow is a valid row waiting for its round.
type pendingRow struct {
	line   int
	in     Input
	patch  []byte
	topics []byte
	tries  int
}

// apply judges a chunk's rows and writes the valid ones: rounds in which
// each email appears once (a second row for an email is applied after the
// first, as two PUTs would be), new contacts admitted while the plan has
// room, then the opt-outs of existing contacts and the reservation of the
// new ones on the tenant (contacts first, then the tenant: the lock order).
func (s *Imports) apply(ctx context.Context, q *store.Tx, imp queries.ContactImport, rows []queries.ContactImportRowsRow, seen *seenEmails) (chunkResult, error) {
	var res chunkResult
	failAs := func(line int, code, msg string) {
		res.failures = append(res.failures, ImportError{Line: line, Code: code, Message: msg})
	}
	fail := func(line int, msg string) { failAs(line, ImportCodeTooLarge, msg) }
	var all []queries.Topic
	topicsRead := false
	pending := make([]pendingRow, 0, len(rows))
	for _, r := range rows {
		line := int(r.Line)
		if r.Problem != nil {
			failAs(line, ImportCodeUnreadable, *r.Problem)
			continue
		}
		in, err := importInput(imp, r)
		if err != nil {
			failAs(line, rowCode(err), rowMessage(err))
			continue
		}
		if first := seen.see(in.Email, line); first != line {
			res.warnings = append(res.warnings, ImportError{Line: line, Code: ImportCodeDuplicate,
				Message: fmt.Sprintf("duplicate of line %d (same email): applied after it, as a second PUT would be", first)})
		}
		p := pendingRow{line: line, in: in, patch: in.Properties.PatchJSON(), topics: []byte("{}")}
		if len(in.Topics) > 0 {
			if !topicsRead {
				if all, err = q.TopicAll(ctx, imp.TenantID); err != nil {
					return res, err
				}
				topicsRead = true
			}
			if p.topics, err = topics.Choices(all, in.Topics); err != nil {
				failAs(line, rowCode(err), rowMessage(err))
				continue
			}
		}
		pending = append(pending, p)
	}

	room, err := s.room(ctx, q, imp.TenantID)
	if err != nil {
		return res, err
	}
	var reserved int64
	var optOuts []string
	for len(pending) > 0 {
		round, later := splitRound(pending)
		// Which rows are new: under a plan limit that decides which may be
		// inserted, and the new ones go in by a plain insert (create).
		emails := make([]string, len(round))
		for i, p := range round {
			emails[i] = p.in.Email
		}
		existing, err := q.ContactEmailsExisting(ctx, queries.ContactEmailsExistingParams{TenantID: imp.TenantID, Emails: emails})
		if err != nil {
			return res, err
		}
		exists := make(map[string]bool, len(existing))
		for _, e := range existing {
			exists[e] = true
		}
		placed := map[int]pendingRow{}
		var create []pendingRow
		var admitted int64
		for _, p := range round {
			switch {
			case exists[p.in.Email]:
				placed[p.line] = p // merged, never inserted: it takes no slot
				continue
			case admitted >= room:
				failAs(p.line, ImportCodePlanLimit, PlanLimitRowMessage(s.FreeLimit))
				res.planRefused++
				continue
			}
			admitted++
			placed[p.line] = p
			create = append(create, p)
		}
		created, err := s.create(ctx, q, imp.TenantID, create)
		if err != nil {
			return res, err
		}
		for _, line := range created {
			delete(placed, line)
			res.created++
			reserved++
			room--
		}
		// The rest merge into the contacts their emails name, in line order
		// within the round (each email appears once in it).
		merge := make([]pendingRow, 0, len(placed))
		for _, p := range round {
			if _, ok := placed[p.line]; ok {
				merge = append(merge, p)
			}
		}
		merged, err := s.merge(ctx, q, imp.TenantID, merge)
		if err != nil {
			return res, err
		}
		for _, o := range merged {
			p, ok := placed[int(o.Line)]
			if !ok {
				continue
			}
			delete(placed, int(o.Line))
			res.updated++
			if unsubscribes(p.in.Subscribed) {
				optOuts = append(optOuts, o.ID)
			}
		}
		// What the statement did not write either passes the properties
		// bound, or met a contact created or deleted under it: that goes
		// again, with the rows for the same emails after it.
		if err := s.tooLarge(ctx, q, imp.TenantID, placed, fail); err != nil {
			return res, err
		}
		var again []pendingRow
		for _, p := range placed {
			if p.tries++; p.tries > importRaceRetries {
				return res, fmt.Errorf("contact import: line %d could not be placed in %d rounds", p.line, p.tries)
			}
			again = append(again, p)
		}
		pending = append(again, later...)
		sort.SliceStable(pending, func(i, j int) bool { return pending[i].line < pending[j].line })
	}
	for _, id := range optOuts {
		if _, err := ApplyOptOut(ctx, q, OptOut{TenantID: imp.TenantID, ContactID: id, Unsubscribe: true}); err != nil {
			return res, err
		}
	}
	if reserved > 0 {
		_, err := q.TenantReserveContacts(ctx, queries.TenantReserveContactsParams{ID: imp.TenantID, N: reserved,
			FreeLimit: int64(s.FreeLimit)})
		if store.IsNoRows(err) {
			return res, errRaced
		}
		if err != nil {
			return res, err
		}
	}
	slices.SortStableFunc(res.failures, func(a, b ImportError) int { return a.Line - b.Line })
	return res, nil
}

// seenEmails is the first line of each email a part of an import has
// read, so that a row repeating an earlier one's email is told (a
// warning, DUPLICATE_ROW). Every row of one email is in one part, in line
// order (importReader.part), so a part's set sees them all. Kept as a
// 64-bit hash of the email: some 20 bytes an email, 20 MB for a
// million-row part; a collision (about one in 10^7 for a million emails)
// would name a wrong line in a warning, never change what is imported.
type seenEmails struct {
	first map[uint64]int32
	// upTo is the part's last line the set holds (committed).
	upTo int32
}

// seenSeed hashes emails; a set lives in one process, so one seed a
// process is enough.
var seenSeed = maphash.MakeSeed()

// see records that line holds email and returns the first line that did
// (line itself the first time; a chunk tried again sees its own lines).
func (s *seenEmails) see(email string, line int) int {
	if s.first == nil {
		s.first = map[uint64]int32{}
	}
	h := maphash.String(seenSeed, email)
	if f, ok := s.first[h]; ok && int(f) <= line {
		return int(f)
	}
	s.first[h] = int32(line)
	return line
}

// catchUp adds the emails of the part's rows after upTo up to next (what
// earlier chunks, of this run or another, processed): a run that starts
// on a part half done reads them again from the staging rows, which stay
// until the import ends.
func (s *seenEmails) catchUp(ctx context.Context, q *store.Tx, imp queries.ContactImport, part int, next int32, chunk int) error {
	for s.upTo < next {
		rows, err := q.ContactImportRows(ctx, queries.ContactImportRowsParams{TenantID: imp.TenantID, ID: imp.ID,
			Part: int16(part), After: s.upTo, Lim: int32(chunk)})
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			if r.Line > next {
				s.upTo = next
				return nil
			}
			if r.Problem != nil {
				continue
			}
			if in, err := importInput(imp, r); err == nil {
				s.see(in.Email, int(r.Line))
			}
		}
		s.upTo = rows[len(rows)-1].Line
	}
	s.upTo = max(s.upTo, next)
	return nil
}

// PlanLimitRowMessage is the message of a row refused by the free plan's
// contact limit: it names the plan, the limit and the setting.
func PlanLimitRowMessage(limit int) string {
	return fmt.Sprintf("plan free allows %s contacts: a new contact is not imported past it (the operator's PLAN_FREE_CONTACTS)",
		Thousands(int64(limit)))
}

// PlanLimitSummary is an import's note on the rows the plan's limit
// refused ("" when none was).
func PlanLimitSummary(limit int, refused int64) string {
	if refused == 0 {
		return ""
	}
	rows := "rows"
	if refused == 1 {
		rows = "row"
	}
	return fmt.Sprintf("plan free allows %s contacts; %s %s not imported; raise PLAN_FREE_CONTACTS or move the tenant to another plan",
		Thousands(int64(limit)), Thousands(refused), rows)
}

// Thousands writes n with commas between thousands (1,000,000).
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// rowCode is the code of a row that failed its checks: the error's own
// (NOT_FOUND for an unknown topic), else VALIDATION_ERROR.
func rowCode(err error) string {
	if e, ok := apperr.As(err); ok && e.Code != "" {
		return e.Code
	}
	return ImportCodeInvalid
}

// rowArrays are the parameters a round's statements take per row, in the
// order of its rows.
type rowArrays struct {
	emails, userIDs          []string
	setUserID, setSubscribed []bool
	subscribed               []bool
	patches, topics          []json.RawMessage
}

func arraysOf(rows []pendingRow) rowArrays {
	n := len(rows)
	a := rowArrays{emails: make([]string, 0, n), userIDs: make([]string, 0, n), setUserID: make([]bool, 0, n),
		setSubscribed: make([]bool, 0, n), subscribed: make([]bool, 0, n), patches: make([]json.RawMessage, 0, n),
		topics: make([]json.RawMessage, 0, n)}
	for _, p := range rows {
		a.emails = append(a.emails, p.in.Email)
		a.setUserID = append(a.setUserID, p.in.UserID != nil)
		a.userIDs = append(a.userIDs, deref(p.in.UserID))
		a.patches = append(a.patches, p.patch)
		a.setSubscribed = append(a.setSubscribed, p.in.Subscribed != nil)
		a.subscribed = append(a.subscribed, p.in.Subscribed != nil && *p.in.Subscribed)
		a.topics = append(a.topics, p.topics)
	}
	return a
}

// create inserts the rows whose emails were not contacts of the tenant
// at the round's lookup and returns their lines. If another writer has
// created one of those emails since, the insert fails under a savepoint
// and nothing of it stays: the rows are then ones the round did not
// write, as any other (the merge takes the email the other writer made,
// the rest go again in the next round).
func (s *Imports) create(ctx context.Context, q *store.Tx, tenantID string, rows []pendingRow) ([]int, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	a := arraysOf(rows)
	args := queries.ContactImportCreateParams{TenantID: tenantID, MaxBytes: MaxPropertiesBytes,
		Ids: make([]string, len(rows)), Emails: a.emails, SetUserID: a.setUserID, UserIds: a.userIDs,
		Patches: a.patches, SetSubscribed: a.setSubscribed, Subscribed: a.subscribed, Topics: a.topics}
	lineOf := make(map[string]int, len(rows))
	for i, p := range rows {
		args.Ids[i] = ids.New(ids.Contact)
		lineOf[args.Ids[i]] = p.line
	}
	var out []string
	err := q.Savepoint(ctx, func() error {
		var err error
		out, err = q.ContactImportCreate(ctx, args)
		return err
	})
	if store.IsUniqueViolation(err, "contacts_email_key") {
		return nil, nil
	}
	lines := make([]int, len(out))
	for i, id := range out {
		lines[i] = lineOf[id]
	}
	return lines, err
}

// merge merges the rows into the contacts their emails name; a row whose
// contact is gone, or whose properties would grow past the bound, is not
// in what it returns.
func (s *Imports) merge(ctx context.Context, q *store.Tx, tenantID string, rows []pendingRow) ([]queries.ContactImportMergeRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	a := arraysOf(rows)
	args := queries.ContactImportMergeParams{TenantID: tenantID, MaxBytes: MaxPropertiesBytes,
		Lines: make([]int32, len(rows)), Emails: a.emails, SetUserID: a.setUserID, UserIds: a.userIDs,
		Patches: a.patches, SetSubscribed: a.setSubscribed, Subscribed: a.subscribed, Topics: a.topics}
	for i, p := range rows {
		args.Lines[i] = int32(p.line)
	}
	return q.ContactImportMerge(ctx, args)
}

// tooLarge fails the rows of placed (what a round did not write) whose
// properties would pass MaxPropertiesBytes, and takes them out of placed.
func (s *Imports) tooLarge(ctx context.Context, q *store.Tx, tenantID string, placed map[int]pendingRow, fail func(int, string)) error {
	if len(placed) == 0 {
		return nil
	}
	args := queries.ContactImportTooLargeParams{TenantID: tenantID, MaxBytes: MaxPropertiesBytes}
	for _, p := range placed {
		args.Lines = append(args.Lines, int32(p.line))
		args.Emails = append(args.Emails, p.in.Email)
		args.Patches = append(args.Patches, p.patch)
	}
	lines, err := q.ContactImportTooLarge(ctx, args)
	if err != nil {
		return err
	}
	for _, l := range lines {
		fail(int(l), tooLargeMessage)
		delete(placed, int(l))
	}
	return nil
}

// room is how many new contacts the tenant's plan takes now.
func (s *Imports) room(ctx context.Context, q *store.Tx, tenantID string) (int64, error) {
	t, err := q.TenantContactRoom(ctx, tenantID)
	if err != nil {
		return 0, err
	}
	if t.Plan != "free" {
		return math.MaxInt64, nil
	}
	return max(int64(s.FreeLimit)-t.ContactCount, 0), nil
}

// splitRound takes, in line order, the first row of each email; the rest
// wait for a later round.
func splitRound(rows []pendingRow) (round, later []pendingRow) {
	seen := make(map[string]bool, len(rows))
	round = make([]pendingRow, 0, len(rows))
	for _, p := range rows {
		if seen[p.in.Email] {
			later = append(later, p)
			continue
		}
		seen[p.in.Email] = true
		round = append(round, p)
	}
	return round, later
}

// importInput judges one staged row as PUT /api/contacts judges a body: a
// CSV record maps its email column to email and every other non-empty
// cell to a string property named by its header; an NDJSON line is a body.
func importInput(imp queries.ContactImport, r queries.ContactImportRowsRow) (Input, error) {
	if imp.Format == string(NDJSON) {
		var b Body
		if r.Doc == nil {
			return Input{}, apperr.Invalid("line", "is empty")
		}
		if err := strictjson.Decode([]byte(*r.Doc), &b); err != nil {
			return Input{}, err
		}
		return b.Input()
	}
	var f apperr.Fields
	var in Input
	props := make(map[string]string, len(r.Fields))
	for i, v := range r.Fields {
		switch {
		case i == int(imp.EmailColumn):
			in.Email = RequiredEmail(&f, strictjson.Opt[string]{Set: true, V: v})
		case v != "" && i < len(imp.Columns):
			props[imp.Columns[i]] = v
		}
	}
	in.Properties = parseTextProperties(&f, props)
	return in, f.Err()
}

// rowMessage is a failed row's message: each invalid field with its
// problem ("email must be a valid email address"), by field name. A line of
// NDJSON is named "line" where a request body is named "body", and its
// JSON errors give the column only.
func rowMessage(err error) string {
	e, ok := apperr.As(err)
	if !ok {
		return err.Error()
	}
	fields, _ := e.Details["fields"].(map[string]any)
	if len(fields) == 0 {
		return e.Message
	}
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		msgs, _ := fields[k].([]string)
		name := k
		if name == "body" {
			name = "line"
		}
		for _, m := range msgs {
			parts = append(parts, name+" "+strings.Replace(m, "(line 1, column", "(column", 1))
		}
	}
	return strings.Join(parts, "; ")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ImportFailure is a failed row (or a warning) as the download gives it:
// the row as read, the CSV fields or the NDJSON line (nil for a row that
// could not be read).
type ImportFailure struct {
	Line    int
	Warning bool
	Code    string
	Message string
	Fields  []string
	Doc     *string
}

// DefaultFailurePage is how many failed rows one read of the download
// takes.
const DefaultFailurePage = 5000

// Failures calls fn with the import's failed rows and warnings, by line,
// a page at a time (each page one short statement: a download at a slow
// client's pace holds no connection between pages). An unknown import (or
// another tenant's) is NOT_FOUND before fn is called.
func (s *Imports) Failures(ctx context.Context, tenantID, id string, fn func([]ImportFailure) error) error {
	if _, err := s.Get(ctx, tenantID, id); err != nil {
		return err
	}
	page := s.FailurePage
	if page <= 0 {
		page = DefaultFailurePage
	}
	var afterLine int32
	afterWarning := true // line 0 has nothing: start after all of it
	for {
		rows, err := s.DB.ContactImportErrorsPage(ctx, queries.ContactImportErrorsPageParams{TenantID: tenantID, ID: id,
			AfterLine: afterLine, AfterWarning: afterWarning, Lim: int32(page)})
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		out := make([]ImportFailure, len(rows))
		for i, r := range rows {
			out[i] = ImportFailure{Line: int(r.Line), Warning: r.Warning, Code: r.Code, Message: r.Message,
				Fields: r.Fields, Doc: r.Doc}
		}
		if err := fn(out); err != nil {
			return err
		}
		last := rows[len(rows)-1]
		afterLine, afterWarning = last.Line, last.Warning
		if len(rows) < page {
			return nil
		}
	}
}
