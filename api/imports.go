package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/idempotency"
	"tidings/internal/store"
	"tidings/queries"
)

// Contact imports (docs/decisions.md "Contact import", "Import limits").
// POST /api/contacts/import is the one route whose body is streamed rather
// than read whole (routes.streamed): it takes one of the tenant's import
// places (contacts.Imports.BeginUpload: 429 past IMPORT_MAX_RUNNING, 503
// past this instance's IMPORT_MAX_UPLOADS), receives up to
// contacts.MaxImportBytes into a temporary file at the client's pace with
// no database connection held, then stages the file and answers 202 once
// it is committed. GET /api/contacts/import/{id} is its progress.

// importIdleTimeout is how long the body may stall: each read moves the
// connection's read deadline this far ahead (but never past the upload's
// deadline, IMPORT_UPLOAD_TIMEOUT).
const importIdleTimeout = 30 * time.Second

type importJSON struct {
	ImportID  string          `json:"importId"`
	Status    string          `json:"status"`
	Total     int64           `json:"total"`
	Processed int64           `json:"processed"`
	Created   int64           `json:"created"`
	Updated   int64           `json:"updated"`
	Failed    int64           `json:"failed"`
	Errors    json.RawMessage `json:"errors" doc:"The first 100 failed rows, each {line, code, message}; line counts the file's physical lines from 1. Every failed row: GET /api/contacts/import/{id}/errors."`
	// The plan's limit, when it refused rows: named with its setting.
	PlanLimit *importPlanLimitJSON `json:"planLimit" doc:"Set when the plan's contact limit refused rows: the plan, its limit, how many rows it refused, and a sentence naming the setting (PLAN_FREE_CONTACTS)."`
	// Duplicates are rows whose email an earlier row had: applied, and
	// told (the first 100 in warnings).
	Duplicates  int64           `json:"duplicates" doc:"Rows whose email an earlier row of the file had: applied after it (as a second PUT), and listed in warnings."`
	Warnings    json.RawMessage `json:"warnings" doc:"The first 100 duplicate rows, each {line, code: DUPLICATE_ROW, message naming the earlier line}."`
	StartedAt   string          `json:"startedAt"`
	CompletedAt *string         `json:"completedAt"`
}

// importPlanLimitJSON is what the plan's limit did to an import.
type importPlanLimitJSON struct {
	Plan        string `json:"plan"`
	Limit       int    `json:"limit"`
	NotImported int64  `json:"notImported"`
	Setting     string `json:"setting"`
	Message     string `json:"message"`
}

// importStartedJSON is POST /api/contacts/import's 202.
type importStartedJSON struct {
	ImportID string `json:"importId"`
	Status   string `json:"status"`
}

func importView(imp queries.ContactImport, freeLimit int) importJSON {
	v := importJSON{ImportID: imp.ID, Status: imp.Status, Total: imp.Total, Processed: imp.Processed,
		Created: imp.Created, Updated: imp.Updated, Failed: imp.Failed, Errors: imp.Errors,
		Duplicates: imp.Duplicates, Warnings: imp.Warnings,
		StartedAt: formatTime(imp.StartedAt), CompletedAt: formatTimePtr(imp.CompletedAt)}
	if imp.PlanRefused > 0 {
		v.PlanLimit = &importPlanLimitJSON{Plan: "free", Limit: freeLimit, NotImported: imp.PlanRefused,
			Setting: "PLAN_FREE_CONTACTS", Message: contacts.PlanLimitSummary(freeLimit, imp.PlanRefused)}
	}
	return v
}

// importFormat reads the format from Content-Type: text/csv is CSV,
// application/x-ndjson and application/jsonl are NDJSON, in UTF-8.
// Anything else is VALIDATION_ERROR, as a JSON route refuses a body that is
// not sent as JSON.
func importFormat(contentType string) (contacts.ImportFormat, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	refused := apperr.Invalid("body", "must be sent as text/csv, application/x-ndjson or application/jsonl")
	if err != nil {
		return "", refused
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "", apperr.Invalid("body", "must be UTF-8 (charset=utf-8)")
	}
	switch mt {
	case "text/csv":
		return contacts.CSV, nil
	case "application/x-ndjson", "application/jsonl":
		return contacts.NDJSON, nil
	}
	return "", refused
}

// contactImport is POST /api/contacts/import.
func (s *Server) contactImport(c *fiber.Ctx) error {
	format, err := importFormat(c.Get(fiber.HeaderContentType))
	if err != nil {
		return err
	}
	if enc := c.Get(fiber.HeaderContentEncoding); enc != "" && !strings.EqualFold(enc, "identity") {
		return apperr.Invalid("Content-Encoding", "is not supported by imports: send the file as it is")
	}
	if n := c.Request().Header.ContentLength(); n > contacts.MaxImportBytes {
		return apperr.TooLarge(fmt.Sprintf("an import body holds at most %d bytes (512 MiB)", contacts.MaxImportBytes))
	}
	up, err := s.imports.BeginUpload(store.WithoutAudit(c.UserContext()), tenantID(c))
	if err != nil {
		return err
	}
	defer func() {
		if err := up.Close(c.UserContext()); err != nil {
			s.log.Warn("contact import: freeing an upload", "tenant_id", up.TenantID, "import_id", up.ID, "err", err)
		}
	}()
	gate, _ := c.Locals(streamGateKey).(*streamGate)
	body := &uploadBody{r: c.Context().RequestBodyStream(), conn: c.Context().Conn(),
		declared: int64(c.Request().Header.ContentLength()), limit: s.cfg.ImportUploadTimeout,
		deadline: time.Now().Add(s.cfg.ImportUploadTimeout), done: func() { c.Locals(bodyReadKey, true) }}
	if body.r == nil {
		body.r = strings.NewReader("")
	}
	if gate != nil {
		body.hash = gate.hash
	}
	if err := up.Receive(format, body); err != nil {
		return err
	}
	var beforeCommit func(context.Context) error
	if gate != nil {
		beforeCommit = gate.begin
	}
	ctx, cancel := context.WithTimeout(s.base, contacts.StageTimeout)
	defer cancel()
	// The upload's own deadline, with the request's audit entry.
	ctx = store.WithAudit(ctx, store.AuditOf(c.UserContext()))
	imp, err := up.Stage(ctx, beforeCommit)
	if err != nil {
		return err
	}
	return c.Status(http.StatusAccepted).JSON(importStartedJSON{ImportID: imp.ID, Status: imp.Status})
}

// contactImportGet is GET /api/contacts/import/{id}.
func (s *Server) contactImportGet(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	imp, err := s.imports.Get(c.UserContext(), tenantID(c), id)
	if err != nil {
		return err
	}
	return c.JSON(importView(imp, s.imports.FreeLimit))
}

// failuresFormat is the download's format: ?format= (csv, ndjson), else
// the Accept header, else CSV (what a spreadsheet opens).
func failuresFormat(c *fiber.Ctx) (contacts.ImportFormat, error) {
	switch strings.ToLower(c.Query("format")) {
	case "csv":
		return contacts.CSV, nil
	case "ndjson", "jsonl":
		return contacts.NDJSON, nil
	case "":
	default:
		return "", apperr.Invalid("format", "must be csv or ndjson")
	}
	switch c.Accepts("text/csv", "application/x-ndjson", "application/jsonl") {
	case "application/x-ndjson", "application/jsonl":
		return contacts.NDJSON, nil
	}
	return contacts.CSV, nil
}

// contactImportErrors is GET /api/contacts/import/{id}/errors: every
// failed row and warning of the import, by line, with the row as it was
// read, streamed as CSV or NDJSON a page at a time.
func (s *Server) contactImportErrors(c *fiber.Ctx) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	format, err := failuresFormat(c)
	if err != nil {
		return err
	}
	tenant := tenantID(c)
	imp, err := s.imports.Get(c.UserContext(), tenant, id)
	if err != nil {
		return err
	}
	w := contacts.NewFailureWriter(format, imp)
	if format == contacts.CSV {
		c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	} else {
		c.Set(fiber.HeaderContentType, "application/x-ndjson; charset=utf-8")
	}
	c.Set(fiber.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s-errors.%s"`, imp.ID, format))
	// Written after the handler returns, at the client's pace: each page is
	// its own short read, no connection held in between. A failure midway
	// can no longer change the status: the body ends short and the log
	// says why.
	log := s.log
	base := s.base
	imports := s.imports
	c.Context().SetBodyStreamWriter(func(bw *bufio.Writer) {
		err := w.Begin(bw)
		if err != nil {
			log.Warn("contact import: the failed rows' download ended early", "tenant_id", tenant, "import_id", id, "err", err)
			return
		}
		err = imports.Failures(base, tenant, id, func(rows []contacts.ImportFailure) error {
			for _, r := range rows {
				if err := w.Write(bw, r); err != nil {
					return err
				}
			}
			return bw.Flush()
		})
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			log.Warn("contact import: the failed rows' download ended early", "tenant_id", tenant, "import_id", id, "err", err)
		}
	})
	return nil
}

// uploadBody is a streamed request body as the import reads it: each read
// moves the connection's read deadline importIdleTimeout ahead, never past
// the upload's deadline (a slow but moving upload may take longer than the
// server's ReadTimeout, a stalled one may not, and a trickling one may not
// take longer than IMPORT_UPLOAD_TIMEOUT); the bytes go through hash when
// an Idempotency-Key needs them; a body that ends before its declared
// length (the client went away) is an error, not the end of the file; and
// done runs once the body has been read to its end.
type uploadBody struct {
	r        io.Reader
	conn     interface{ SetReadDeadline(time.Time) error }
	hash     hash.Hash
	declared int64 // Content-Length; -1: chunked
	read     int64
	deadline time.Time
	limit    time.Duration // what deadline came from, for the message
	done     func()
}

func (u *uploadBody) Read(p []byte) (int, error) {
	now := time.Now()
	if !u.deadline.IsZero() && !now.Before(u.deadline) {
		return 0, u.late()
	}
	if u.conn != nil {
		next := now.Add(importIdleTimeout)
		if !u.deadline.IsZero() && u.deadline.Before(next) {
			next = u.deadline
		}
		_ = u.conn.SetReadDeadline(next)
	}
	n, err := u.r.Read(p)
	u.read += int64(n)
	if u.hash != nil {
		u.hash.Write(p[:n])
	}
	switch {
	case err == nil:
	case errors.Is(err, io.EOF) && u.declared >= 0 && u.read < u.declared:
		return n, io.ErrUnexpectedEOF
	case errors.Is(err, io.EOF):
		if u.done != nil {
			u.done()
			u.done = nil
		}
	case !u.deadline.IsZero() && !time.Now().Before(u.deadline):
		return n, u.late()
	}
	return n, err
}

// late is the error of an upload past its deadline.
func (u *uploadBody) late() error {
	return apperr.Invalid("body", fmt.Sprintf("was not received within %s (IMPORT_UPLOAD_TIMEOUT)", u.limit))
}

// Locals of a streamed body.
const (
	// streamedKey marks a route that reads its own body as a stream.
	streamedKey = "body-streamed"
	// bodyReadKey says a streamed body was read to its end.
	bodyReadKey = "body-read"
	// streamGateKey holds the Idempotency-Key of a streamed body.
	streamGateKey = "idempotency-stream"
)

func streamed(c *fiber.Ctx) bool { return c.Locals(streamedKey) != nil }

// markStreamed is the first handler of a streamed route (in place of
// readBody).
func markStreamed(c *fiber.Ctx) error {
	c.Locals(streamedKey, true)
	return c.Next()
}

// readBody reads a request's body whole before any handler looks at it, at
// most bodyLimit bytes: the server streams request bodies (for the
// import), so every other route reads its own here, as fasthttp did before
// the handler. A larger body is 413 PAYLOAD_TOO_LARGE (not read: the
// connection closes after the answer).
func readBody(c *fiber.Ctx) error {
	req := c.Request()
	n := req.Header.ContentLength()
	stream := c.Context().RequestBodyStream()
	if n == 0 || stream == nil {
		return c.Next()
	}
	if n > bodyLimit {
		return fiber.ErrRequestEntityTooLarge
	}
	var body []byte
	var err error
	if n > 0 {
		body = make([]byte, n)
		_, err = io.ReadFull(stream, body)
	} else { // chunked: up to one byte past the limit tells
		body, err = io.ReadAll(io.LimitReader(stream, bodyLimit+1))
		if err == nil && len(body) > bodyLimit {
			return fiber.ErrRequestEntityTooLarge
		}
	}
	if err != nil {
		e := apperr.Invalid("body", "could not be read to its end")
		e.Err = err
		return e
	}
	req.SetBodyRaw(body)
	return c.Next()
}

// closeUnread closes the connection after answering a request whose body
// was not read to its end (refused before reading it, or an unknown
// route): what is left of it would be read as the next request.
func closeUnread(c *fiber.Ctx) error {
	err := c.Next()
	req := c.Request()
	if req.IsBodyStream() && req.Header.ContentLength() != 0 && c.Locals(bodyReadKey) == nil {
		c.Response().SetConnectionClose()
	}
	return err
}

// streamGate is the Idempotency-Key of a streamed body: its request hash
// (method, URL and body, as idempotentWrite hashes them) is known only once
// the body has been read, so the key is claimed then, before the import
// commits (contacts.CreateImport.BeforeCommit); a repeat of a kept answer
// rolls the import back and answers that.
type streamGate struct {
	s                  *Server
	tenant, scope, key string
	hash               hash.Hash
	claim              *idempotency.Claim
	replay             *idempotency.Response
}

// errReplayed rolls back a streamed request that repeats a kept answer.
var errReplayed = errors.New("idempotent repeat")

func (g *streamGate) begin(ctx context.Context) error {
	claim, stored, err := g.s.idempotency.BeginHash(ctx, g.tenant, g.scope, g.key, g.hash.Sum(nil))
	switch {
	case err != nil:
		return err
	case stored != nil && (stored.SendID != "" || stored.BatchSends != nil):
		// Only POST /api/send links sends to its keys.
		return apperr.Conflict("IDEMPOTENCY_KEY_IN_USE", "this Idempotency-Key belongs to another request")
	case stored != nil:
		g.replay = stored
		return errReplayed
	}
	g.claim = claim
	return nil
}

// idempotentStream serves the Idempotency-Key of a streamed route.
func (s *Server) idempotentStream(c *fiber.Ctx, scope, key string) error {
	h := sha256.New()
	h.Write([]byte(c.Method() + " " + c.OriginalURL() + "\n"))
	gate := &streamGate{s: s, tenant: tenantID(c), scope: scope, key: key, hash: h}
	c.Locals(streamGateKey, gate)
	err := c.Next()
	if gate.replay != nil {
		setReplayed(c)
		if len(gate.replay.Body) > 0 {
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		}
		return c.Status(gate.replay.Status).Send(gate.replay.Body)
	}
	if gate.claim == nil {
		return err // refused before the key was claimed: nothing to keep or free
	}
	return s.settle(c, gate.claim, err)
}
