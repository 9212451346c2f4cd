package contacts

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"

	"tidings/queries"
)

// FailureWriter writes an import's failed rows (Imports.Failures) for the
// download, as CSV or NDJSON. CSV: the columns line, severity (error or
// warning), code and message, then the import's own columns with the row's
// cells (a CSV import) or one column row with the line as sent (an NDJSON
// import): delete the first four columns, fix the rows and the file
// imports again. NDJSON: one object a row, {line, severity, code,
// message} and fields (the CSV row by header) or row (the NDJSON line as
// sent).
type FailureWriter struct {
	format  ImportFormat
	imp     queries.ContactImport
	csv     *csv.Writer
	out     io.Writer
	started bool
}

// NewFailureWriter writes the failed rows of imp in format.
func NewFailureWriter(format ImportFormat, imp queries.ContactImport) *FailureWriter {
	return &FailureWriter{format: format, imp: imp}
}

// failureJSON is one NDJSON line of the download.
type failureJSON struct {
	Line     int               `json:"line"`
	Severity string            `json:"severity"`
	Code     string            `json:"code"`
	Message  string            `json:"message"`
	Fields   map[string]string `json:"fields,omitempty"`
	Row      *string           `json:"row,omitempty"`
}

func severity(warning bool) string {
	if warning {
		return "warning"
	}
	return "error"
}

// Begin writes what comes before the rows (the CSV header); Write calls
// it if it was not.
func (w *FailureWriter) Begin(out io.Writer) error {
	w.started = true
	w.out = out
	if w.format != CSV {
		return nil
	}
	w.csv = csv.NewWriter(out)
	header := []string{"line", "severity", "code", "message"}
	if w.imp.Format == string(CSV) {
		header = append(header, w.imp.Columns...)
	} else {
		header = append(header, "row")
	}
	if err := w.csv.Write(header); err != nil {
		return err
	}
	w.csv.Flush()
	return w.csv.Error()
}

// Write writes one failed row.
func (w *FailureWriter) Write(out io.Writer, f ImportFailure) error {
	if !w.started || w.out != out {
		if err := w.Begin(out); err != nil {
			return err
		}
	}
	if w.format == CSV {
		rec := []string{strconv.Itoa(f.Line), severity(f.Warning), f.Code, f.Message}
		if w.imp.Format == string(CSV) {
			rec = append(rec, f.Fields...)
		} else if f.Doc != nil {
			rec = append(rec, *f.Doc)
		}
		if err := w.csv.Write(rec); err != nil {
			return err
		}
		w.csv.Flush()
		return w.csv.Error()
	}
	j := failureJSON{Line: f.Line, Severity: severity(f.Warning), Code: f.Code, Message: f.Message, Row: f.Doc}
	if w.imp.Format == string(CSV) && f.Fields != nil {
		j.Fields = make(map[string]string, len(f.Fields))
		for i, v := range f.Fields {
			name := "column" + strconv.Itoa(i+1) // a cell past the header's columns
			if i < len(w.imp.Columns) {
				name = w.imp.Columns[i]
			}
			j.Fields[name] = v
		}
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}
