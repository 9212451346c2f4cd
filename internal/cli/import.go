package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// ContentType is the Content-Type of an import file: from format when
// given (csv, ndjson, jsonl), else from the file's extension.
func ContentType(path, format string) (string, error) {
	if format == "" {
		format = strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	}
	switch strings.ToLower(format) {
	case "csv":
		return "text/csv", nil
	case "ndjson":
		return "application/x-ndjson", nil
	case "jsonl":
		return "application/jsonl", nil
	}
	return "", fmt.Errorf("%s: cannot tell the format: name the file .csv, .ndjson or .jsonl, or pass -type", path)
}

// Importer runs an import against one API.
type Importer struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
	// Interval is the time between two asks for the import's progress.
	Interval time.Duration
	// Progress gets the progress bars (upload, then rows); nil: none.
	Progress io.Writer
}

// ImportError is a failed row (or a warning) as the progress resource
// lists it.
type ImportError struct {
	Line    int    `json:"line"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// PlanLimit is what the plan's contact limit did to an import.
type PlanLimit struct {
	Plan        string `json:"plan"`
	Limit       int64  `json:"limit"`
	NotImported int64  `json:"notImported"`
	Setting     string `json:"setting"`
	Message     string `json:"message"`
}

// Result is an import's progress resource (GET /api/contacts/import/{id}).
type Result struct {
	ImportID    string        `json:"importId"`
	Status      string        `json:"status"`
	Total       int64         `json:"total"`
	Processed   int64         `json:"processed"`
	Created     int64         `json:"created"`
	Updated     int64         `json:"updated"`
	Failed      int64         `json:"failed"`
	Errors      []ImportError `json:"errors"`
	PlanLimit   *PlanLimit    `json:"planLimit"`
	Duplicates  int64         `json:"duplicates"`
	Warnings    []ImportError `json:"warnings"`
	StartedAt   string        `json:"startedAt"`
	CompletedAt *string       `json:"completedAt"`
}

// Counts is the one sentence of an import's numbers, the same in the
// progress bar and in the summary.
func (r Result) Counts() string {
	s := fmt.Sprintf("%d rows, %d created, %d updated, %d failed", r.Total, r.Created, r.Updated, r.Failed)
	if r.Duplicates > 0 {
		s += fmt.Sprintf(", %d duplicate", r.Duplicates)
		if r.Duplicates > 1 {
			s += "s"
		}
	}
	return s
}

// Failures is what the client read of an import's failed rows (GET
// /api/contacts/import/{id}/errors): how many of each code, and the first
// ones of each severity, the plan limit's rows aside (the plan's line
// says them).
type Failures struct {
	ByCode   map[string]int64
	Errors   []ImportError
	Warnings []ImportError
	// File is where every failed row was written ("" when not).
	File string
}

// shownErrors is how many failed rows (and warnings) Print lists.
const shownErrors = 10

// planCode is the code of rows the plan's limit refused.
const planCode = "PLAN_LIMIT_EXCEEDED"

// Print writes the result for a person: the counts, the plan's limit when
// it refused rows, the kinds of failure, the first failed rows that are
// not the plan's, the first duplicates, and where every failed row is.
// f may be nil (the failed rows were not read): the progress resource's
// first 100 are listed then.
func (r Result) Print(w io.Writer, f *Failures) {
	fmt.Fprintf(w, "import %s %s: %s\n", r.ImportID, r.Status, r.Counts())
	if r.PlanLimit != nil {
		fmt.Fprintf(w, "  %s\n", r.PlanLimit.Message)
	}
	errs, warns := r.Errors, r.Warnings
	if f != nil {
		errs, warns = f.Errors, f.Warnings
		if len(f.ByCode) > 1 || (len(f.ByCode) == 1 && r.PlanLimit == nil) {
			codes := make([]string, 0, len(f.ByCode))
			for c := range f.ByCode {
				codes = append(codes, c)
			}
			slices.Sort(codes)
			parts := make([]string, len(codes))
			for i, c := range codes {
				parts[i] = fmt.Sprintf("%d %s", f.ByCode[c], c)
			}
			fmt.Fprintf(w, "  failed rows by kind: %s\n", strings.Join(parts, ", "))
		}
	}
	shown := 0
	for _, e := range errs {
		if shown == shownErrors {
			break
		}
		if e.Code == planCode && r.PlanLimit != nil {
			continue
		}
		fmt.Fprintf(w, "  line %d: %s\n", e.Line, e.Message)
		shown++
	}
	for i, e := range warns {
		if i == shownErrors {
			break
		}
		fmt.Fprintf(w, "  line %d (warning): %s\n", e.Line, e.Message)
	}
	switch {
	case f != nil && f.File != "":
		fmt.Fprintf(w, "  every failed row and warning, with the row as sent: %s\n", f.File)
	case r.Failed+r.Duplicates > 0:
		fmt.Fprintf(w, "  every failed row and warning: GET /api/contacts/import/%s/errors\n", r.ImportID)
	}
}

// apiError is the error envelope of the API.
type apiError struct {
	Status     int
	retryAfter string
	Body       struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
}

func (e *apiError) Error() string {
	if e.Body.Error.Code == "" {
		return fmt.Sprintf("the API answered %d", e.Status)
	}
	return fmt.Sprintf("%s (%d %s)", e.Body.Error.Message, e.Status, e.Body.Error.Code)
}

// uploadTries is how often an upload is sent when no answer comes back:
// each try carries the same Idempotency-Key, so a try that did reach the
// API is answered with its import rather than started again.
const uploadTries = 3

// Import uploads the file at path (streamed from the disk, never held
// whole) as contentType, then asks for the import's progress every
// Interval until it is no longer running, and returns the last answer.
func (im *Importer) Import(ctx context.Context, path, contentType string) (Result, error) {
	id, err := im.upload(ctx, path, contentType)
	if err != nil {
		return Result{}, err
	}
	return im.follow(ctx, id)
}

func (im *Importer) upload(ctx context.Context, path, contentType string) (string, error) {
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	idemKey := "tidings-import-" + hex.EncodeToString(key)
	var lastErr error
	for try := 1; try <= uploadTries; try++ {
		id, err := im.uploadOnce(ctx, path, contentType, idemKey)
		var ae *apiError
		if err == nil || errors.As(err, &ae) || ctx.Err() != nil {
			return id, err
		}
		lastErr = err
		if im.Progress != nil {
			fmt.Fprintf(im.Progress, "upload interrupted (%v); trying again\n", err)
		}
	}
	return "", lastErr
}

func (im *Importer) uploadOnce(ctx context.Context, path, contentType, idemKey string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	var body io.Reader = f
	var bar *progressbar.ProgressBar
	if im.Progress != nil {
		bar = progressbar.NewOptions64(st.Size(), progressbar.OptionSetWriter(im.Progress),
			progressbar.OptionSetDescription("uploading"), progressbar.OptionShowBytes(true),
			progressbar.OptionShowTotalBytes(true), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30), progressbar.OptionOnCompletion(func() { fmt.Fprintln(im.Progress) }))
		r := progressbar.NewReader(f, bar)
		body = &r
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, im.BaseURL+"/api/contacts/import", body)
	if err != nil {
		return "", err
	}
	req.ContentLength = st.Size()
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Idempotency-Key", idemKey)
	im.auth(req)
	var out struct {
		ImportID string `json:"importId"`
	}
	if err := im.do(req, http.StatusAccepted, &out); err != nil {
		return "", err
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return out.ImportID, nil
}

// follow asks for the import's progress until it has ended.
func (im *Importer) follow(ctx context.Context, id string) (Result, error) {
	var bar *progressbar.ProgressBar
	defer func() {
		if bar != nil {
			_ = bar.Exit()
			fmt.Fprintln(im.Progress)
		}
	}()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, im.BaseURL+"/api/contacts/import/"+id, nil)
		if err != nil {
			return Result{}, err
		}
		im.auth(req)
		var res Result
		wait := im.Interval
		err = im.do(req, http.StatusOK, &res)
		var ae *apiError
		switch {
		case errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests:
			// The tenant's rate limit: ask again when it says.
			if s, perr := strconv.Atoi(ae.retryAfter); perr == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
		case err != nil:
			return Result{}, err
		default:
			if im.Progress != nil {
				if bar == nil {
					bar = progressbar.NewOptions64(res.Total, progressbar.OptionSetWriter(im.Progress),
						progressbar.OptionSetDescription("importing"), progressbar.OptionShowCount(),
						progressbar.OptionSetItsString("rows"), progressbar.OptionShowIts(),
						progressbar.OptionSetWidth(30))
				}
				bar.Describe("importing: " + res.Counts())
				_ = bar.Set64(res.Processed)
			}
			if res.Status != "running" {
				return res, nil
			}
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (im *Importer) auth(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+im.APIKey)
	req.Header.Set("User-Agent", "tidings-cli")
}

// do sends req and decodes a want answer into out; any other answer is an
// *apiError.
func (im *Importer) do(req *http.Request, want int, out any) error {
	res, err := im.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		ae := &apiError{Status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
		_ = json.Unmarshal(raw, &ae.Body)
		return ae
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("the API's answer is not what an import answers: %w", err)
	}
	return nil
}

// ReadFailures reads every failed row of an import (NDJSON) and keeps the
// counts and the first rows Print shows.
func (im *Importer) ReadFailures(ctx context.Context, id string) (*Failures, error) {
	res, err := im.get(ctx, "/api/contacts/import/"+id+"/errors?format=ndjson")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	f := &Failures{ByCode: map[string]int64{}}
	dec := json.NewDecoder(res.Body)
	for {
		var row struct {
			ImportError
			Severity string `json:"severity"`
		}
		if err := dec.Decode(&row); err == io.EOF {
			return f, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading the failed rows: %w", err)
		}
		if row.Severity == "warning" {
			if len(f.Warnings) < shownErrors {
				f.Warnings = append(f.Warnings, row.ImportError)
			}
			continue
		}
		f.ByCode[row.Code]++
		if row.Code != planCode && len(f.Errors) < shownErrors {
			f.Errors = append(f.Errors, row.ImportError)
		}
	}
}

// SaveFailures writes every failed row of an import, as CSV, to path.
func (im *Importer) SaveFailures(ctx context.Context, id, path string) error {
	res, err := im.get(ctx, "/api/contacts/import/"+id+"/errors?format=csv")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, res.Body); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// get asks for path and returns a 200 answer to be read; any other is an
// *apiError.
func (im *Importer) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, im.BaseURL+path, nil)
	if err != nil {
		return nil, err
	}
	im.auth(req)
	res, err := im.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		ae := &apiError{Status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
		_ = json.Unmarshal(raw, &ae.Body)
		return nil, ae
	}
	return res, nil
}

// FailuresPath is where the command writes an import's failed rows by
// default: beside the file, contacts.csv giving contacts.errors.csv.
func FailuresPath(file string) string {
	return strings.TrimSuffix(file, filepath.Ext(file)) + ".errors.csv"
}
