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

// ImportError is a failed row as the progress resource lists it.
type ImportError struct {
	Line    int    `json:"line"`
	Message string `json:"message"`
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
	StartedAt   string        `json:"startedAt"`
	CompletedAt *string       `json:"completedAt"`
}

// shownErrors is how many failed rows Print lists.
const shownErrors = 10

// Print writes the result for a person: the counts, then the first failed
// rows.
func (r Result) Print(w io.Writer) {
	fmt.Fprintf(w, "import %s %s: %d rows, %d created, %d updated, %d failed\n",
		r.ImportID, r.Status, r.Total, r.Created, r.Updated, r.Failed)
	for i, e := range r.Errors {
		if i == shownErrors {
			break
		}
		fmt.Fprintf(w, "  line %d: %s\n", e.Line, e.Message)
	}
	if shown := min(len(r.Errors), shownErrors); r.Failed > int64(shown) {
		fmt.Fprintf(w, "  ... and %d more failed rows", r.Failed-int64(shown))
		if r.Failed > int64(len(r.Errors)) {
			fmt.Fprintf(w, " (the API keeps the first %d)", len(r.Errors))
		}
		fmt.Fprintln(w)
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
