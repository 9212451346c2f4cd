package contacts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strings"

	"tidings/internal/apperr"
	"tidings/internal/storable"
)

// ImportFormat is how an import body is written.
type ImportFormat string

// The formats of POST /api/contacts/import.
const (
	// CSV has a header row naming an email column; every other column is
	// a string property named by its header.
	CSV ImportFormat = "csv"
	// NDJSON has one PUT /api/contacts body per line.
	NDJSON ImportFormat = "ndjson"
)

// Bounds of an import body (README "Input limits"), so that no import
// takes unbounded memory or time: the body is read as a stream, one line
// (or CSV record) at a time.
const (
	// MaxImportRows is how many data rows one import holds.
	MaxImportRows = 1_000_000
	// MaxImportBytes is how large an import body may be (512 MiB).
	MaxImportBytes = 512 << 20
	// MaxImportLine is how long one line (an NDJSON line, a CSV record,
	// the header) may be: the 1 MiB that any other request body may be.
	MaxImportLine = 1 << 20
)

// importRow is one data row as read from the body, before it is judged.
type importRow struct {
	line    int      // its first physical line, from 1
	fields  []string // CSV
	doc     string   // NDJSON: the line as sent
	problem string   // what made it unreadable; the row fails with it
}

// size is roughly what the row takes in memory and in the COPY.
func (r importRow) size() int {
	n := len(r.doc) + len(r.problem) + 16
	for _, f := range r.fields {
		n += len(f) + 8
	}
	return n
}

// importReader reads the rows of an import body: physical lines of at most
// MaxImportLine bytes, CSV records (which may span lines inside quotes) or
// NDJSON lines; blank lines are skipped (they still count as lines).
type importReader struct {
	format ImportFormat
	br     *bufio.Reader
	line   int // physical lines read
	eof    bool
	buf    []byte
	// columns is the CSV header (trimmed), emailColumn the email's index.
	columns     []string
	emailColumn int
	rows        int
	// first is the first data row, read ahead by newImportReader to tell
	// an empty import; nil once returned.
	first *importRow
}

// bodyUnread is a failure to read the body (the client went away, a read
// deadline passed): the request fails and nothing is stored. An
// *apperr.Error from the reader (the body's size limit) passes as it is.
func bodyUnread(err error) error {
	var known *apperr.Error
	if errors.As(err, &known) {
		return known
	}
	e := apperr.Invalid("body", "could not be read to its end")
	e.Err = err
	return e
}

// limitedBody ends an import body past MaxImportBytes with
// PAYLOAD_TOO_LARGE.
type limitedBody struct {
	r    io.Reader
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a body of exactly the limit from a larger one.
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			return 0, apperr.TooLarge(fmt.Sprintf("an import body holds at most %d bytes (512 MiB)", MaxImportBytes))
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// newImportReader starts reading body: the CSV header, then the first
// data row. An empty body, a CSV header without an email column (or with
// duplicate, empty or unstorable names, or more columns than a contact
// takes) and a body without a data row are VALIDATION_ERROR.
func newImportReader(format ImportFormat, body io.Reader) (*importReader, error) {
	body = &limitedBody{r: body, left: MaxImportBytes}
	r := &importReader{format: format, br: bufio.NewReaderSize(body, 64<<10)}
	// A UTF-8 byte order mark (spreadsheets write one) is not data.
	if b, err := r.br.Peek(3); err == nil && bytes.Equal(b, []byte("\xef\xbb\xbf")) {
		_, _ = r.br.Discard(3)
	}
	if _, err := r.br.Peek(1); err == io.EOF {
		return nil, apperr.Invalid("body", "must not be empty")
	} else if err != nil {
		return nil, bodyUnread(err)
	}
	if format == CSV {
		if err := r.header(); err != nil {
			return nil, err
		}
	}
	first, err := r.read()
	if err == io.EOF {
		if format == CSV {
			return nil, apperr.Invalid("body", "must hold at least one row after the header")
		}
		return nil, apperr.Invalid("body", "must hold at least one row")
	}
	if err != nil {
		return nil, err
	}
	r.first = &first
	return r, nil
}

// next returns the next data row; io.EOF after the last. More than
// MaxImportRows rows is PAYLOAD_TOO_LARGE.
func (r *importReader) next() (importRow, error) {
	if r.first != nil {
		row := *r.first
		r.first = nil
		return row, nil
	}
	return r.read()
}

func (r *importReader) read() (importRow, error) {
	for {
		b, tooLong, err := r.readLine()
		if err != nil {
			return importRow{}, err
		}
		start := r.line
		if !tooLong && len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		r.rows++
		if r.rows > MaxImportRows {
			return importRow{}, apperr.TooLarge(fmt.Sprintf("an import holds at most %d rows", MaxImportRows))
		}
		if tooLong {
			return importRow{line: start, problem: fmt.Sprintf("line is longer than %d bytes", MaxImportLine)}, nil
		}
		if r.format == NDJSON {
			if p := storable.Text(string(b)); p != "" {
				return importRow{line: start, problem: "line " + p}, nil
			}
			return importRow{line: start, doc: string(b)}, nil
		}
		fields, problem, err := r.record(b)
		if err != nil {
			return importRow{}, err
		}
		if problem == "" && len(fields) != len(r.columns) {
			problem = fmt.Sprintf("row has %d fields; the header has %d", len(fields), len(r.columns))
		}
		for _, f := range fields {
			if p := storable.Text(f); problem == "" && p != "" {
				problem = "row " + p
			}
		}
		if problem != "" {
			return importRow{line: start, problem: problem}, nil
		}
		return importRow{line: start, fields: fields}, nil
	}
}

// header reads and checks the CSV header row.
func (r *importReader) header() error {
	var b []byte
	for {
		line, tooLong, err := r.readLine()
		if err == io.EOF {
			return apperr.Invalid("body", "must not be empty")
		}
		if err != nil {
			return err
		}
		if tooLong {
			return apperr.Invalid("header", fmt.Sprintf("is longer than %d bytes", MaxImportLine))
		}
		if len(bytes.TrimSpace(line)) > 0 {
			b = line
			break
		}
	}
	fields, problem, err := r.record(b)
	if err != nil {
		return err
	}
	if problem != "" {
		return apperr.Invalid("header", "is not valid CSV: "+strings.TrimPrefix(problem, "row "))
	}
	var f apperr.Fields
	r.emailColumn = -1
	seen := map[string]bool{}
	for i, name := range fields {
		name = strings.TrimSpace(name)
		fields[i] = name
		switch {
		case strings.EqualFold(name, "email"):
			if r.emailColumn >= 0 {
				f.Add("header", "names the email column twice")
			}
			r.emailColumn = i
		case seen[name]:
			f.Add("header", fmt.Sprintf("names column %q twice", shortName(name)))
		default:
			if p := storable.PropertyKey(name); p != "" {
				f.Add("header", fmt.Sprintf("column %d is a property name, and property %s", i+1, p))
			}
		}
		seen[name] = true
	}
	if r.emailColumn < 0 {
		f.Add("header", "must have an email column")
	}
	if len(fields)-1 > storable.MaxProperties {
		f.Add("header", fmt.Sprintf("has %d property columns; a contact takes at most %d properties per write",
			len(fields)-1, storable.MaxProperties))
	}
	r.columns = fields
	return f.Err()
}

// shortName bounds a header name before it is echoed.
func shortName(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

// record parses the CSV record that starts with line (RFC 4180: fields
// separated by commas, quoted fields with "" for a quote, which may hold
// commas and line breaks; a record whose quotes are open at the end of a
// line goes on with the next). A malformed record is a problem, not an
// error: it ends at the end of the physical line where it broke.
func (r *importReader) record(line []byte) (fields []string, problem string, err error) {
	var cur []byte
	inQuotes, quoted, size := false, false, len(line)
	for {
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case inQuotes && c == '"' && i+1 < len(line) && line[i+1] == '"':
				cur = append(cur, '"')
				i++
			case inQuotes && c == '"':
				inQuotes = false
			case inQuotes:
				cur = append(cur, c)
			case c == ',':
				fields = append(fields, string(cur))
				cur, quoted = cur[:0], false
			case c == '"' && len(cur) == 0 && !quoted:
				inQuotes, quoted = true, true
			case c == '"':
				return nil, `row is not valid CSV: a quote inside an unquoted field`, nil
			case quoted:
				return nil, `row is not valid CSV: text after a closing quote`, nil
			default:
				cur = append(cur, c)
			}
		}
		if !inQuotes {
			return append(fields, string(cur)), "", nil
		}
		// A quoted field goes on with the next line.
		next, tooLong, err := r.readLine()
		if err == io.EOF {
			return nil, "row is not valid CSV: the file ends inside a quoted field", nil
		}
		if err != nil {
			return nil, "", err
		}
		size += len(next) + 1
		if tooLong || size > MaxImportLine {
			return nil, fmt.Sprintf("row is longer than %d bytes", MaxImportLine), nil
		}
		cur = append(cur, '\n')
		line = next
	}
}

// readLine returns the next physical line without its line break (LF or
// CRLF). A line longer than MaxImportLine is read to its end and dropped:
// tooLong, with no bytes. io.EOF once nothing is left.
func (r *importReader) readLine() (line []byte, tooLong bool, err error) {
	if r.eof {
		return nil, false, io.EOF
	}
	r.buf = r.buf[:0]
	read := 0
	for {
		chunk, err := r.br.ReadSlice('\n')
		read += len(chunk)
		if !tooLong {
			if len(r.buf)+len(chunk) > MaxImportLine+2 { // +2: the line break
				tooLong, r.buf = true, r.buf[:0]
			} else {
				r.buf = append(r.buf, chunk...)
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			r.eof = true
			if read == 0 {
				return nil, false, io.EOF
			}
		default:
			return nil, false, bodyUnread(err)
		}
		r.line++
		b := bytes.TrimSuffix(bytes.TrimSuffix(r.buf, []byte("\n")), []byte("\r"))
		if tooLong || len(b) > MaxImportLine {
			return nil, true, nil
		}
		return b, false, nil
	}
}

// part is the part of an import (of parts) that row goes to: the hash of
// its email in the stored form (trimmed, lower-cased), so every row of one
// email is in one part and applied in line order. A row whose email
// cannot be read fails whatever part it is in.
func (r *importReader) part(row importRow, parts int) int16 {
	if parts <= 1 || row.problem != "" {
		return 0
	}
	var email string
	switch r.format {
	case CSV:
		if r.emailColumn >= 0 && r.emailColumn < len(row.fields) {
			email = row.fields[r.emailColumn]
		}
	case NDJSON:
		var d struct {
			Email string `json:"email"`
		}
		_ = json.Unmarshal([]byte(row.doc), &d) // a line that is not a body fails when judged
		email = d.Email
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(strings.ToLower(strings.TrimSpace(email))))
	return int16(h.Sum32() % uint32(parts))
}
