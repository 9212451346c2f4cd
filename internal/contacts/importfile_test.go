package contacts

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"tidings/internal/apperr"
)

// readAll reads every row of body, or the error that stops it.
func readAll(format ImportFormat, body string) ([]importRow, *importReader, error) {
	rd, err := newImportReader(format, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	var rows []importRow
	for {
		row, err := rd.next()
		if err == io.EOF {
			return rows, rd, nil
		}
		if err != nil {
			return rows, rd, err
		}
		rows = append(rows, row)
	}
}

// show is a row as the tests write it: "line:field|field" or "line!problem"
// or "line=doc".
func show(r importRow) string {
	s := showFull(r)
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func showFull(r importRow) string {
	switch {
	case r.problem != "":
		return fmt.Sprintf("%d!%s", r.line, r.problem)
	case r.fields != nil:
		return fmt.Sprintf("%d:%s", r.line, strings.Join(r.fields, "|"))
	}
	return fmt.Sprintf("%d=%s", r.line, r.doc)
}

func TestImportReaderRows(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", MaxImportLine+1)
	tests := []struct {
		desc   string
		format ImportFormat
		body   string
		want   []string
	}{
		{desc: "csv: the header is line 1", format: CSV, body: "email,name\na@x.io,Ann\nb@x.io,Bob\n",
			want: []string{"2:a@x.io|Ann", "3:b@x.io|Bob"}},
		{desc: "csv: CRLF, a byte order mark, no final line break", format: CSV, body: "\xef\xbb\xbfemail,name\r\na@x.io,Ann\r\nb@x.io,Bob",
			want: []string{"2:a@x.io|Ann", "3:b@x.io|Bob"}},
		{desc: "csv: blank lines count as lines and are skipped", format: CSV, body: "email\n\na@x.io\n  \nb@x.io\n\n",
			want: []string{"3:a@x.io", "5:b@x.io"}},
		{desc: "csv: quoted commas, quotes and line breaks; a record spanning lines is its first line's", format: CSV,
			body: "email,note\na@x.io,\"one, \"\"two\"\"\"\nb@x.io,\"three\nfour\"\nc@x.io,\"\"\n",
			want: []string{`2:a@x.io|one, "two"`, "3:b@x.io|three\nfour", "5:c@x.io|"}},
		{desc: "csv: malformed rows fail alone", format: CSV,
			body: "email,name\na@x.io\nb@x.io,Bo\"b\nc@x.io,\"Cy\"x\nd@x.io,Di,extra\ne@x.io,\xff\nf@x.io,Fay\n",
			want: []string{"2!row has 1 fields; the header has 2", "3!row is not valid CSV: a quote inside an unquoted field",
				"4!row is not valid CSV: text after a closing quote", "5!row has 3 fields; the header has 2",
				"6!row must be valid UTF-8 text", "7:f@x.io|Fay"}},
		{desc: "csv: an open quote at the end", format: CSV, body: "email,name\na@x.io,Ann\nb@x.io,\"Bob\n",
			want: []string{"2:a@x.io|Ann", "3!row is not valid CSV: the file ends inside a quoted field"}},
		{desc: "csv: a line too long fails alone", format: CSV, body: "email,name\na@x.io," + long + "\nb@x.io,Bob\n",
			want: []string{fmt.Sprintf("2!line is longer than %d bytes", MaxImportLine), "3:b@x.io|Bob"}},
		{desc: "ndjson: the first object is line 1", format: NDJSON, body: "{\"email\":\"a@x.io\"}\n\n{\"email\":\"b@x.io\"}",
			want: []string{`1={"email":"a@x.io"}`, `3={"email":"b@x.io"}`}},
		{desc: "ndjson: malformed lines are rows (judged later); unstorable and long ones fail here", format: NDJSON,
			body: "{\"email\":\n\"\xff\"\n" + long + "\n{}\r\n",
			want: []string{`1={"email":`, "2!line must be valid UTF-8 text", fmt.Sprintf("3!line is longer than %d bytes", MaxImportLine), "4={}"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			rows, _, err := readAll(tt.format, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(rows))
			for i, r := range rows {
				got[i] = show(r)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Fatalf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestImportReaderHeader(t *testing.T) {
	t.Parallel()
	rows, rd, err := readAll(CSV, " First Name ,EMAIL,plan\nAnn,a@x.io,pro\n")
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %v, err %v", rows, err)
	}
	if got := strings.Join(rd.columns, "|"); got != "First Name|EMAIL|plan" || rd.emailColumn != 1 {
		t.Fatalf("columns %q, email column %d", got, rd.emailColumn)
	}
}

// A body that cannot start an import is refused at once: what the client
// sees as 400 VALIDATION_ERROR (or 413), naming the field.
func TestImportReaderRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc         string
		format       ImportFormat
		body         string
		field, want  string
		wantTooLarge bool
	}{
		{desc: "empty csv", format: CSV, body: "", field: "body", want: "must not be empty"},
		{desc: "empty ndjson", format: NDJSON, body: "", field: "body", want: "must not be empty"},
		{desc: "ndjson of blank lines", format: NDJSON, body: "\n \n\r\n", field: "body", want: "must hold at least one row"},
		{desc: "csv of blank lines", format: CSV, body: "\n\n", field: "body", want: "must not be empty"},
		{desc: "a header without email", format: CSV, body: "name,plan\nAnn,pro\n", field: "header", want: "must have an email column"},
		{desc: "only a header", format: CSV, body: "email,name\n", field: "body", want: "at least one row after the header"},
		{desc: "email twice", format: CSV, body: "email,Email\na,b\n", field: "header", want: "names the email column twice"},
		{desc: "a column twice", format: CSV, body: "email,plan,plan\na,b,c\n", field: "header", want: `names column "plan" twice`},
		{desc: "an empty column name", format: CSV, body: "email,,plan\na,b,c\n", field: "header", want: "column 2 is a property name"},
		{desc: "a header that is not CSV", format: CSV, body: "email,\"pl\"an\na,b\n", field: "header", want: "is not valid CSV"},
		{desc: "too many columns", format: CSV, body: "email" + manyColumns(201) + "\n", field: "header",
			want: "a contact takes at most 200 properties"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			_, _, err := readAll(tt.format, tt.body)
			e, ok := apperr.As(err)
			if !ok || e.Code != "VALIDATION_ERROR" {
				t.Fatalf("err %v, want VALIDATION_ERROR", err)
			}
			msgs, _ := e.Details["fields"].(map[string]any)[tt.field].([]string)
			if len(msgs) == 0 || !strings.Contains(strings.Join(msgs, "; "), tt.want) {
				t.Fatalf("fields %v, want %s: %q", e.Details["fields"], tt.field, tt.want)
			}
		})
	}
}

func manyColumns(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, ",c%d", i)
	}
	return b.String()
}

// Past MaxImportRows rows the import is PAYLOAD_TOO_LARGE; exactly that
// many is fine.
func TestImportReaderRowCap(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rows    int
		wantErr bool
	}{{MaxImportRows, false}, {MaxImportRows + 1, true}} {
		body := strings.Repeat("{}\n", tt.rows)
		rows, _, err := readAll(NDJSON, body)
		if tt.wantErr {
			if !apperr.IsCode(err, "PAYLOAD_TOO_LARGE") {
				t.Fatalf("%d rows: err %v, want PAYLOAD_TOO_LARGE", tt.rows, err)
			}
			continue
		}
		if err != nil || len(rows) != tt.rows {
			t.Fatalf("%d rows: read %d, err %v", tt.rows, len(rows), err)
		}
	}
}

// The body's byte limit: a body of exactly the limit reads, one byte more
// is PAYLOAD_TOO_LARGE; a failing reader is a VALIDATION_ERROR on body
// that keeps its cause.
func TestImportBodyLimits(t *testing.T) {
	t.Parallel()
	read := func(body string, limit int64) error {
		_, err := io.ReadAll(&limitedBody{r: strings.NewReader(body), left: limit})
		return err
	}
	if err := read("0123456789", 10); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if err := read("0123456789x", 10); !apperr.IsCode(err, "PAYLOAD_TOO_LARGE") {
		t.Fatalf("past the limit: %v", err)
	}
	cause := errors.New("connection reset")
	rd, err := newImportReader(NDJSON, io.MultiReader(strings.NewReader("{}\n{}\n"), errReader{cause}))
	if err != nil {
		t.Fatal(err)
	}
	var last error
	for last == nil {
		_, last = rd.next()
	}
	if !apperr.IsCode(last, "VALIDATION_ERROR") || !errors.Is(last, cause) {
		t.Fatalf("a failing body: %v", last)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// Every row of one email goes to one part, however the email is written
// (its stored form decides), in both formats; the parts are all used.
func TestImportPartByEmail(t *testing.T) {
	csv := &importReader{format: CSV, emailColumn: 1}
	nd := &importReader{format: NDJSON}
	const parts = 4
	used := map[int16]bool{}
	for i := range 64 {
		email := fmt.Sprintf("user%d@example.com", i)
		want := csv.part(importRow{fields: []string{"x", email}}, parts)
		used[want] = true
		for _, got := range []int16{
			csv.part(importRow{fields: []string{"y", "  " + strings.ToUpper(email) + " "}}, parts),
			nd.part(importRow{doc: `{"email": "` + strings.ToUpper(email) + `", "properties": {"a": 1}}`}, parts),
		} {
			if got != want {
				t.Fatalf("%s: part %d, want %d", email, got, want)
			}
		}
	}
	if len(used) != parts {
		t.Fatalf("64 emails used parts %v of %d", used, parts)
	}
	if got := csv.part(importRow{fields: []string{"x", "a@example.com"}}, 1); got != 0 {
		t.Fatalf("one part: %d", got)
	}
}
