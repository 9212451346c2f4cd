package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tidings/internal/config"
	"tidings/internal/contacts"
)

// upload sends body to path as contentType with the given extra headers
// ("Name: value").
func (b *bundle) upload(method, path, token, contentType string, body io.Reader, headers ...string) resp {
	b.t.Helper()
	req := httptest.NewRequest(method, path, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	res, err := b.app.Test(req, -1)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if b.record != nil {
		b.record(req, nil, res, raw)
	}
	r := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			b.t.Fatalf("%s %s: not JSON: %.200s", method, path, raw)
		}
	}
	return r
}

// importFile posts an import and checks its 202 answer; it returns the
// import's id.
func (b *bundle) importFile(token, contentType, body string, headers ...string) string {
	b.t.Helper()
	r := b.upload("POST", "/api/contacts/import", token, contentType, strings.NewReader(body), headers...)
	id, _ := r.body["importId"].(string)
	if r.status != http.StatusAccepted || !strings.HasPrefix(id, "imp_") || r.body["status"] != "running" || len(r.body) != 2 {
		b.t.Fatalf("POST /api/contacts/import: %d %.300s", r.status, r.raw)
	}
	return id
}

// runImport does what the worker's task does (contacts.Imports.Run) and
// returns the progress resource.
func (b *bundle) runImport(tenant, token, id string) map[string]any {
	b.t.Helper()
	if err := b.svc.Imports.Run(context.Background(), tenant, id); err != nil {
		b.t.Fatalf("Run: %v", err)
	}
	return b.expect("GET", "/api/contacts/import/"+id, token, nil, 200).body
}

// importShape checks the progress resource's fields and counts.
func importShape(t *testing.T, got map[string]any, status string, total, processed, created, updated, failed int) {
	t.Helper()
	for _, k := range []string{"importId", "status", "total", "processed", "created", "updated", "failed", "errors",
		"planLimit", "duplicates", "warnings", "startedAt", "completedAt"} {
		if _, ok := got[k]; !ok {
			t.Fatalf("progress without %s: %v", k, got)
		}
	}
	if len(got) != 13 {
		t.Fatalf("progress has other fields: %v", got)
	}
	want := fmt.Sprint(status, total, processed, created, updated, failed)
	if have := fmt.Sprint(got["status"], got["total"], got["processed"], got["created"], got["updated"], got["failed"]); have != want {
		t.Fatalf("status total processed created updated failed = %s, want %s (%v)", have, want, got)
	}
	if (status == "running") != (got["completedAt"] == nil) {
		t.Fatalf("%s with completedAt %v", status, got["completedAt"])
	}
}

// errorLines lists the progress resource's errors as "line: message".
func errorLines(got map[string]any) []string {
	var out []string
	for _, e := range got["errors"].([]any) {
		m := e.(map[string]any)
		out = append(out, fmt.Sprintf("%v: %v", m["line"], m["message"]))
	}
	return out
}

func TestImportCSVOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_imp_csv"))
	b.expect("PUT", "/api/contacts", tok, map[string]any{"email": "old@example.com", "properties": map[string]any{"plan": "free"}}, 201)
	id := b.importFile(tok, "text/csv; charset=utf-8", "email,firstName,plan\n"+
		"ann@example.com,Ann,pro\n"+
		"old@example.com,Olga,\n"+
		"bad,Bob,pro\n"+
		"cy@example.com\n")
	// Before the worker runs: running, nothing processed yet.
	importShape(t, b.expect("GET", "/api/contacts/import/"+id, tok, nil, 200).body, "running", 4, 0, 0, 0, 0)
	got := b.runImport("org_imp_csv", tok, id)
	importShape(t, got, "completed", 4, 4, 1, 1, 2)
	if e := strings.Join(errorLines(got), "\n"); e != "4: email must be a valid email address\n5: row has 1 fields; the header has 3" {
		t.Fatalf("errors (the header is line 1):\n%s", e)
	}
	ann := b.expect("GET", "/api/contacts?email=ann@example.com", tok, nil, 200).body
	if p := ann["properties"].(map[string]any); p["firstName"] != "Ann" || p["plan"] != "pro" || ann["subscribed"] != true {
		t.Fatalf("ann: %v", ann)
	}
	old := b.expect("GET", "/api/contacts?email=old@example.com", tok, nil, 200).body
	if p := old["properties"].(map[string]any); p["firstName"] != "Olga" || p["plan"] != "free" {
		t.Fatalf("old (an empty cell leaves a property): %v", old)
	}
}

func TestImportNDJSONOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_imp_nd"))
	for _, ct := range []string{"application/x-ndjson", "application/jsonl"} {
		id := b.importFile(tok, ct, `{"email": "ann@example.com", "userId": "u1", "properties": {"seats": 3}}`+"\n"+
			`{"email": "bob@example.com", "properties": {"x": 1}`+"\n"+ // malformed
			`{"email": "cy@example.com", "firstName": "Cy"}`+"\n"+ // unknown field, as PUT refuses it
			"\n"+
			`{"email": "dee@example.com", "subscribed": "no"}`)
		got := b.runImport("org_imp_nd", tok, id)
		if ct == "application/x-ndjson" {
			importShape(t, got, "completed", 4, 4, 1, 0, 3)
		} else {
			importShape(t, got, "completed", 4, 4, 0, 1, 3)
		}
		want := "2: line is not valid JSON: the body ends before the JSON does (column 52)\n" +
			"3: firstName is not a known field\n" +
			"5: subscribed must be a boolean"
		if e := strings.Join(errorLines(got), "\n"); e != want {
			t.Fatalf("%s: errors (the first object is line 1):\n%s\nwant\n%s", ct, e, want)
		}
	}
	ann := b.expect("GET", "/api/contacts?email=ann@example.com", tok, nil, 200).body
	if ann["userId"] != "u1" || ann["properties"].(map[string]any)["seats"] != float64(3) {
		t.Fatalf("ann: %v", ann)
	}
}

// What cannot start an import is answered at once, in the error envelope,
// and nothing is stored.
func TestImportRefusedAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_imp_refused"))
	tests := []struct {
		desc, ct, body string
		status         int
		code, field    string
	}{
		{desc: "empty body", ct: "text/csv", body: "", status: 400, code: "VALIDATION_ERROR", field: "body"},
		{desc: "empty ndjson", ct: "application/x-ndjson", body: "", status: 400, code: "VALIDATION_ERROR", field: "body"},
		{desc: "no email column", ct: "text/csv", body: "name,plan\nAnn,pro\n", status: 400, code: "VALIDATION_ERROR", field: "header"},
		{desc: "JSON is not an import", ct: "application/json", body: `{"email": "a@example.com"}`, status: 400, code: "VALIDATION_ERROR", field: "body"},
		{desc: "no content type", ct: "", body: "email\na@example.com\n", status: 400, code: "VALIDATION_ERROR", field: "body"},
		{desc: "another charset", ct: "text/csv; charset=latin1", body: "email\na@example.com\n", status: 400, code: "VALIDATION_ERROR", field: "body"},
	}
	for _, tt := range tests {
		r := b.upload("POST", "/api/contacts/import", tok, tt.ct, strings.NewReader(tt.body))
		if r.status != tt.status || r.code() != tt.code || r.fields()[tt.field] == nil {
			t.Fatalf("%s: %d %s", tt.desc, r.status, r.raw)
		}
	}
	// A declared length past the ceiling is refused before a byte is read.
	req := httptest.NewRequest("POST", "/api/contacts/import", strings.NewReader("email\n"))
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.ContentLength = contacts.MaxImportBytes + 1
	res, err := b.app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 413 || !strings.Contains(string(raw), "PAYLOAD_TOO_LARGE") {
		t.Fatalf("past 512 MiB: %d %s", res.StatusCode, raw)
	}
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM contact_imports`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d imports stored by refused requests (%v)", n, err)
	}
}

// The import's body may be larger than the 1 MiB of every other route,
// which keeps its limit (with a declared length or chunked).
func TestImportBodyOverOneMiB(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.PlanFreeContacts = 100_000 })
	tok := b.apiKey(b.tenant("org_imp_big"))
	var body strings.Builder
	body.WriteString("email,note\n")
	pad := strings.Repeat("n", 200)
	rows := 0
	for body.Len() < 3<<20 {
		fmt.Fprintf(&body, "c%d@example.com,%s\n", rows, pad)
		rows++
	}
	id := b.importFile(tok, "text/csv", body.String())
	importShape(t, b.runImport("org_imp_big", tok, id), "completed", rows, rows, rows, 0, 0)

	big := `{"email": "a@example.com", "properties": {"k": "` + strings.Repeat("x", 2<<20) + `"}}`
	r := b.upload("POST", "/api/contacts", tok, "application/json", strings.NewReader(big))
	if r.status != 413 || r.code() != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("2 MiB on POST /api/contacts: %d %.200s", r.status, r.raw)
	}

	// Chunked (no declared length), through a real connection: read up to
	// the limit, then refused; under it, read whole.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.Shutdown() })
	chunked := func(body string) (int, string) {
		t.Helper()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		w := bufio.NewWriter(conn)
		fmt.Fprintf(w, "PUT /api/contacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n", tok)
		for len(body) > 0 {
			n := min(len(body), 64<<10)
			fmt.Fprintf(w, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
		}
		fmt.Fprint(w, "0\r\n\r\n")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}
	over := `{"email": "a@example.com", "properties": {"k": "` + strings.Repeat("x", 1<<20) + `"}}`
	if status, raw := chunked(over); status != 413 || !strings.Contains(raw, "PAYLOAD_TOO_LARGE") {
		t.Fatalf("chunked past 1 MiB on PUT /api/contacts: %d %.200s", status, raw)
	}
	if status, raw := chunked(`{"email": "z@example.com"}`); status != 201 {
		t.Fatalf("chunked PUT: %d %s", status, raw)
	}
}

// The plan limit stops new contacts only: updates go on, and every new row
// past it fails naming the limit.
func TestImportPlanLimitOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.PlanFreeContacts = 2 })
	tok := b.apiKey(b.tenant("org_imp_plan"))
	b.expect("PUT", "/api/contacts", tok, map[string]any{"email": "a@example.com"}, 201)
	id := b.importFile(tok, "text/csv", "email,n\nb@example.com,1\nc@example.com,2\na@example.com,3\nd@example.com,4\n")
	got := b.runImport("org_imp_plan", tok, id)
	importShape(t, got, "completed", 4, 4, 1, 1, 2)
	limit := "plan free allows 2 contacts: a new contact is not imported past it (the operator's PLAN_FREE_CONTACTS)"
	want := "3: " + limit + "\n5: " + limit
	if e := strings.Join(errorLines(got), "\n"); e != want {
		t.Fatalf("errors:\n%s\nwant\n%s", e, want)
	}
	pl, _ := got["planLimit"].(map[string]any)
	if fmt.Sprintf("%v %v %v %v", pl["plan"], pl["limit"], pl["notImported"], pl["setting"]) != "free 2 2 PLAN_FREE_CONTACTS" ||
		pl["message"] != "plan free allows 2 contacts; 2 rows not imported; raise PLAN_FREE_CONTACTS or move the tenant to another plan" {
		t.Fatalf("planLimit: %v", got["planLimit"])
	}
	if a := b.expect("GET", "/api/contacts?email=a@example.com", tok, nil, 200).body; a["properties"].(map[string]any)["n"] != "3" {
		t.Fatalf("the update over the limit did not go on: %v", a)
	}
}

// The progress resource keeps the first 100 errors and counts them all.
func TestImportErrorsCappedOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_imp_cap"))
	var body strings.Builder
	for i := range 150 {
		fmt.Fprintf(&body, "{\"email\": \"bad%d\"}\n", i)
	}
	id := b.importFile(tok, "application/x-ndjson", body.String())
	got := b.runImport("org_imp_cap", tok, id)
	importShape(t, got, "completed", 150, 150, 0, 0, 150)
	lines := errorLines(got)
	if len(lines) != 100 || lines[0] != "1: email must be a valid email address" || !strings.HasPrefix(lines[99], "100: ") {
		t.Fatalf("%d errors: first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
}

// An unknown import, or another tenant's, is 404 NOT_FOUND.
func TestImportNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tokA := b.apiKey(b.tenant("org_imp_a"))
	tokB := b.apiKey(b.tenant("org_imp_b"))
	id := b.importFile(tokA, "text/csv", "email\na@example.com\n")
	b.expect("GET", "/api/contacts/import/"+id, tokA, nil, 200)
	b.expectError("GET", "/api/contacts/import/"+id, tokB, nil, 404, "NOT_FOUND")
	b.expectError("GET", "/api/contacts/import/imp_nope", tokA, nil, 404, "NOT_FOUND")
}

// Idempotency-Key applies to the import as to every POST: the same key and
// body answer the first 202 (the same import, not a second one), another
// body is 422.
func TestImportIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_imp_idem"))
	body := "email\na@example.com\nb@example.com\n"
	first := b.upload("POST", "/api/contacts/import", tok, "text/csv", strings.NewReader(body), "Idempotency-Key: imp-1")
	again := b.upload("POST", "/api/contacts/import", tok, "text/csv", strings.NewReader(body), "Idempotency-Key: imp-1")
	if first.status != 202 || again.status != 202 || string(again.raw) != string(first.raw) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first %d %s, repeat %d %s (%v)", first.status, first.raw, again.status, again.raw, again.header)
	}
	other := b.upload("POST", "/api/contacts/import", tok, "text/csv", strings.NewReader("email\nc@example.com\n"), "Idempotency-Key: imp-1")
	if other.status != 422 || other.code() != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("another body: %d %s", other.status, other.raw)
	}
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM contact_imports`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d imports, want 1 (%v)", n, err)
	}
	// A refused first attempt is not kept: the retry runs.
	bad := b.upload("POST", "/api/contacts/import", tok, "text/csv", strings.NewReader("name\nx\n"), "Idempotency-Key: imp-2")
	retry := b.upload("POST", "/api/contacts/import", tok, "text/csv", strings.NewReader("name\nx\n"), "Idempotency-Key: imp-2")
	if bad.status != 400 || retry.status != 400 || retry.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("refused: %d, retry %d %v", bad.status, retry.status, retry.header)
	}
}

// download asks for an import's failed rows and returns the status, the
// Content-Type and the body.
func (b *bundle) download(path, token string, headers ...string) (int, string, string) {
	b.t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	res, err := b.app.Test(req, -1)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), string(raw)
}

// Every failed row, not only the first 100, downloads by line with the row
// as read, as CSV or NDJSON (by ?format= or Accept); duplicates are there
// as warnings; another tenant's import is 404.
func TestImportErrorsDownload(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.PlanFreeContacts = 3 })
	tok := b.apiKey(b.tenant("org_imp_dl"))
	other := b.apiKey(b.tenant("org_imp_dl_other"))
	var body strings.Builder
	body.WriteString("email,name\n")
	for i := range 150 {
		fmt.Fprintf(&body, "bad%d,N%d\n", i, i) // lines 2-151
	}
	body.WriteString("a@example.com,A\nb@example.com,B\na@example.com,A2\nc@example.com,C\nd@example.com,D\n") // 152-156
	id := b.importFile(tok, "text/csv", body.String())
	got := b.runImport("org_imp_dl", tok, id)
	importShape(t, got, "completed", 155, 155, 3, 1, 151)
	if got["duplicates"] != float64(1) || len(got["warnings"].([]any)) != 1 {
		t.Fatalf("duplicates %v, warnings %v", got["duplicates"], got["warnings"])
	}

	status, ct, csvBody := b.download("/api/contacts/import/"+id+"/errors", tok)
	lines := strings.Split(strings.TrimSuffix(csvBody, "\n"), "\n")
	if status != 200 || !strings.HasPrefix(ct, "text/csv") || len(lines) != 1+151+1 {
		t.Fatalf("CSV: %d %s, %d lines:\n%.500s", status, ct, len(lines), csvBody)
	}
	want := []string{
		"line,severity,code,message,email,name",
		"2,error,VALIDATION_ERROR,email must be a valid email address,bad0,N0",
		"151,error,VALIDATION_ERROR,email must be a valid email address,bad149,N149",
		"154,warning,DUPLICATE_ROW,\"duplicate of line 152 (same email): applied after it, as a second PUT would be\",a@example.com,A2",
		"156,error,PLAN_LIMIT_EXCEEDED,plan free allows 3 contacts: a new contact is not imported past it (the operator's PLAN_FREE_CONTACTS),d@example.com,D",
	}
	if have := []string{lines[0], lines[1], lines[150], lines[151], lines[152]}; strings.Join(have, "\n") != strings.Join(want, "\n") {
		t.Fatalf("CSV:\n%s\nwant\n%s", strings.Join(have, "\n"), strings.Join(want, "\n"))
	}

	for _, how := range [][]string{{"?format=ndjson"}, {"", "Accept: application/x-ndjson"}} {
		status, ct, nd := b.download("/api/contacts/import/"+id+"/errors"+how[0], tok, how[1:]...)
		rows := strings.Split(strings.TrimSuffix(nd, "\n"), "\n")
		if status != 200 || !strings.HasPrefix(ct, "application/x-ndjson") || len(rows) != 152 {
			t.Fatalf("NDJSON %v: %d %s, %d rows", how, status, ct, len(rows))
		}
		var last map[string]any
		if err := json.Unmarshal([]byte(rows[151]), &last); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%v %v %v %v", last["line"], last["severity"], last["code"], last["fields"]) != "156 error PLAN_LIMIT_EXCEEDED map[email:d@example.com name:D]" {
			t.Fatalf("NDJSON %v: last row %v", how, last)
		}
	}

	b.expectError("GET", "/api/contacts/import/"+id+"/errors?format=xml", tok, nil, 400, "VALIDATION_ERROR")
	b.expectError("GET", "/api/contacts/import/"+id+"/errors", other, nil, 404, "NOT_FOUND")
	b.expectError("GET", "/api/contacts/import/imp_nope/errors", tok, nil, 404, "NOT_FOUND")
}
