package contacts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

// importBundle is an import service on a fresh database with the tenants
// ten_a and ten_b (plan free, limit 100 unless changed).
type importBundle struct {
	t   *testing.T
	ctx context.Context
	db  *store.DB
	imp *contacts.Imports
	cts *contacts.Store
}

func setupImports(t *testing.T, freeLimit, chunk int) *importBundle {
	t.Helper()
	ctx := context.Background()
	db := testenv.DB(t)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('ten_a', 'A'), ('ten_b', 'B')`); err != nil {
		t.Fatal(err)
	}
	return &importBundle{t: t, ctx: ctx, db: db, imp: &contacts.Imports{DB: db, FreeLimit: freeLimit, Chunk: chunk},
		cts: &contacts.Store{DB: db, FreeLimit: freeLimit}}
}

func (b *importBundle) exec(sql string, args ...any) {
	b.t.Helper()
	if _, err := b.db.Pool.Exec(b.ctx, sql, args...); err != nil {
		b.t.Fatal(err)
	}
}

// stage creates an import of body for tenant and returns its id.
func (b *importBundle) stage(tenant string, format contacts.ImportFormat, body string) string {
	b.t.Helper()
	imp, err := b.imp.Create(b.ctx, tenant, contacts.CreateImport{Format: format, Body: strings.NewReader(body)})
	if err != nil {
		b.t.Fatalf("Create: %v", err)
	}
	if imp.Status != contacts.ImportRunning || imp.Processed != 0 {
		b.t.Fatalf("staged import %+v", imp)
	}
	return imp.ID
}

// run stages body and runs the import to its end.
func (b *importBundle) run(tenant string, format contacts.ImportFormat, body string) queries.ContactImport {
	b.t.Helper()
	id := b.stage(tenant, format, body)
	if err := b.imp.Run(b.ctx, tenant, id); err != nil {
		b.t.Fatalf("Run: %v", err)
	}
	return b.get(tenant, id)
}

func (b *importBundle) get(tenant, id string) queries.ContactImport {
	b.t.Helper()
	imp, err := b.imp.Get(b.ctx, tenant, id)
	if err != nil {
		b.t.Fatal(err)
	}
	return imp
}

func (b *importBundle) contact(tenant, email string) queries.Contact {
	b.t.Helper()
	c, err := b.cts.GetByEmail(b.ctx, tenant, email)
	if err != nil {
		b.t.Fatalf("contact %s: %v", email, err)
	}
	return c
}

func importErrors(t *testing.T, imp queries.ContactImport) []contacts.ImportError {
	t.Helper()
	var errs []contacts.ImportError
	if err := json.Unmarshal(imp.Errors, &errs); err != nil {
		t.Fatal(err)
	}
	return errs
}

func wantCounts(t *testing.T, imp queries.ContactImport, total, created, updated, failed int64) {
	t.Helper()
	if imp.Status != contacts.ImportCompleted || imp.CompletedAt == nil || imp.Total != total || imp.Processed != total ||
		imp.Created != created || imp.Updated != updated || imp.Failed != failed {
		t.Fatalf("import %s: status %s total %d processed %d created %d updated %d failed %d; want completed %d/%d, %d created, %d updated, %d failed (errors %s)",
			imp.ID, imp.Status, imp.Total, imp.Processed, imp.Created, imp.Updated, imp.Failed, total, total, created, updated, failed, imp.Errors)
	}
}

func wantErrors(t *testing.T, imp queries.ContactImport, want ...string) {
	t.Helper()
	var got []string
	for _, e := range importErrors(t, imp) {
		got = append(got, fmt.Sprintf("%d: %s", e.Line, e.Message))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A CSV import: the email column is the email, every other non-empty cell
// a string property; rows merge into existing contacts as PUT does; bad
// rows fail by line (the header is line 1) and the others go on.
func TestImportCSV(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	if _, err := b.cts.Create(b.ctx, "ten_a", contacts.Input{Email: "old@example.com", Properties: contacts.Patch{
		Set: map[string]any{"plan": "free", "kept": "yes"}}}); err != nil {
		t.Fatal(err)
	}
	imp := b.run("ten_a", contacts.CSV, "Email,firstName,plan\n"+
		"ann@example.com,Ann,pro\n"+ // 2
		"not-an-email,Bob,pro\n"+ // 3
		"\n"+ // 4: blank
		" OLD@Example.com ,Olga,\n"+ // 5: merged into the existing contact; an empty cell changes nothing
		",Nobody,pro\n"+ // 6
		"cy@example.com,\"Cy, \"\"the\"\" third\",pro\n"+ // 7
		"dee@example.com,Dee\n") // 8: a field short
	wantCounts(t, imp, 6, 2, 1, 3)
	wantErrors(t, imp, "3: email must be a valid email address", "6: email is required", "8: row has 2 fields; the header has 3")
	if got := string(b.contact("ten_a", "ann@example.com").Properties); got != `{"plan": "pro", "firstName": "Ann"}` {
		t.Fatalf("ann: %s", got)
	}
	if got := string(b.contact("ten_a", "old@example.com").Properties); got != `{"kept": "yes", "plan": "free", "firstName": "Olga"}` {
		t.Fatalf("old: %s", got)
	}
	if got := string(b.contact("ten_a", "cy@example.com").Properties); !strings.Contains(got, `"firstName": "Cy, \"the\" third"`) {
		t.Fatalf("cy: %s", got)
	}
	st, err := b.cts.Stats(b.ctx, "ten_a")
	if err != nil || st.Total != 3 {
		t.Fatalf("contact count %d, %v; want 3", st.Total, err)
	}
}

// An NDJSON import: each line is a PUT /api/contacts body, judged as that
// route judges it (unknown fields refused, the property rules, topics of
// the tenant), with PUT's merge; the first object is line 1.
func TestImportNDJSON(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	b.exec(`INSERT INTO topics (tenant_id, id, name, default_mode) VALUES ('ten_a', 'news', 'News', 'opt_out')`)
	if _, err := b.cts.Create(b.ctx, "ten_a", contacts.Input{Email: "old@example.com", UserID: ptr("u-old"),
		Properties: contacts.Patch{Set: map[string]any{"drop": "me", "keep": 1}}}); err != nil {
		t.Fatal(err)
	}
	imp := b.run("ten_a", contacts.NDJSON, strings.Join([]string{
		`{"email": "ann@example.com", "userId": "u1", "properties": {"plan": "pro", "seats": 3}, "topics": {"news": false}}`, // 1
		`{"email": "old@example.com", "properties": {"drop": null, "new": [1, "two"]}}`,                                      // 2
		`{"emial": "bob@example.com"}`,                                    // 3
		`{"email": "cy@example.com", "properties": {"nested": {"a": 1}}}`, // 4
		`{"email": "dee@example.com",`,                                    // 5
		``,                                                                // 6
		`{"email": "eve@example.com", "topics": {"nope": true}}`, // 7
		`{"email": "fay@example.com", "subscribed": false}`,      // 8
		`[1, 2]`, // 9
	}, "\n"))
	wantCounts(t, imp, 8, 2, 1, 5)
	wantErrors(t, imp,
		"3: emial is not a known field; did you mean email?",
		"4: properties.nested must be a string, number, boolean or array of those; nested objects are not allowed",
		"5: line is not valid JSON: the body ends before the JSON does (column 29)",
		"7: topics.nope is not a topic of this tenant",
		"9: line must be a JSON object")
	ann := b.contact("ten_a", "ann@example.com")
	if *ann.UserID != "u1" || string(ann.Properties) != `{"plan": "pro", "seats": 3}` || string(ann.Topics) != `{"news": false}` {
		t.Fatalf("ann: %+v", ann)
	}
	old := b.contact("ten_a", "old@example.com")
	if *old.UserID != "u-old" || string(old.Properties) != `{"new": [1, "two"], "keep": 1}` {
		t.Fatalf("old: userId %v, properties %s", *old.UserID, old.Properties)
	}
	if fay := b.contact("ten_a", "fay@example.com"); fay.Subscribed {
		t.Fatal("fay was created subscribed")
	}
}

// subscribed:false on an existing contact unsubscribes it as PUT does
// (ApplyOptOut: its pending sends are cancelled); true resubscribes.
func TestImportOptOut(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	ann, err := b.cts.Create(b.ctx, "ten_a", contacts.Input{Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	no := false
	if _, err := b.cts.Create(b.ctx, "ten_a", contacts.Input{Email: "bob@example.com", Subscribed: &no}); err != nil {
		t.Fatal(err)
	}
	b.exec(`INSERT INTO sequences (tenant_id, id, name, content, trigger_event) VALUES ('ten_a', 'seq', 'Seq', '', 'e')`)
	b.exec(`INSERT INTO enrolments (tenant_id, id, sequence_id, contact_id, current_step, current_step_index)
		VALUES ('ten_a', 'enr_1', 'seq', $1, 'step-1', 1)`, ann.ID)
	imp := b.run("ten_a", contacts.NDJSON, `{"email": "ann@example.com", "subscribed": false}`+"\n"+
		`{"email": "bob@example.com", "subscribed": true}`)
	wantCounts(t, imp, 2, 0, 2, 0)
	if b.contact("ten_a", "ann@example.com").Subscribed || !b.contact("ten_a", "bob@example.com").Subscribed {
		t.Fatal("ann should be unsubscribed and bob subscribed again")
	}
	var status string
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT status FROM enrolments WHERE id = 'enr_1'`).Scan(&status); err != nil || status != "exited" {
		t.Fatalf("ann's enrolment %q, %v; want exited", status, err)
	}
}

// The plan limit stops new contacts only: updates go on, and each new row
// past the limit fails with a message naming it; two rows for one email
// are a create then an update, as two PUTs would be.
func TestImportPlanLimit(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 3, 2)
	for _, e := range []string{"a@example.com", "b@example.com"} {
		if _, err := b.cts.Create(b.ctx, "ten_a", contacts.Input{Email: e}); err != nil {
			t.Fatal(err)
		}
	}
	imp := b.run("ten_a", contacts.CSV, "email,n\n"+
		"new1@example.com,1\n"+ // 2: the last slot
		"a@example.com,2\n"+ // 3: update
		"new2@example.com,3\n"+ // 4: over
		"new1@example.com,4\n"+ // 5: update of line 2's contact
		"b@example.com,5\n"+ // 6: update
		"new3@example.com,6\n") // 7: over
	wantCounts(t, imp, 6, 1, 3, 2)
	if imp.Parts != 1 {
		t.Fatalf("an import under a plan limit has %d parts, want 1 (the first new rows by line take the room)", imp.Parts)
	}
	limitMsg := "plan free allows 3 contacts: a new contact is not imported past it (the operator's PLAN_FREE_CONTACTS)"
	wantErrors(t, imp, "4: "+limitMsg, "7: "+limitMsg)
	if imp.PlanRefused != 2 {
		t.Fatalf("plan refused %d, want 2", imp.PlanRefused)
	}
	if got := contacts.PlanLimitSummary(3, imp.PlanRefused); got != "plan free allows 3 contacts; 2 rows not imported; raise PLAN_FREE_CONTACTS or move the tenant to another plan" {
		t.Fatalf("summary %q", got)
	}
	// The second row for new1 is applied, and told.
	if imp.Duplicates != 1 || !strings.Contains(string(imp.Warnings), `"line": 5`) ||
		!strings.Contains(string(imp.Warnings), "duplicate of line 2") {
		t.Fatalf("duplicates %d, warnings %s", imp.Duplicates, imp.Warnings)
	}
	if got := string(b.contact("ten_a", "new1@example.com").Properties); got != `{"n": "4"}` {
		t.Fatalf("new1: %s", got)
	}
	st, _ := b.cts.Stats(b.ctx, "ten_a")
	if st.Total != 3 {
		t.Fatalf("contact count %d, want 3", st.Total)
	}
	// A paid plan has no limit.
	b.exec(`UPDATE tenants SET plan = 'pro' WHERE id = 'ten_a'`)
	imp = b.run("ten_a", contacts.CSV, "email\nnew2@example.com\nnew3@example.com\n")
	wantCounts(t, imp, 2, 2, 0, 0)
	if imp.Parts != contacts.DefaultImportParts {
		t.Fatalf("an import without a plan limit has %d parts, want %d", imp.Parts, contacts.DefaultImportParts)
	}
	if st, _ := b.cts.Stats(b.ctx, "ten_a"); st.Total != 5 {
		t.Fatalf("contact count %d, want 5", st.Total)
	}
}

// An import keeps the first 100 failed rows, by line, across chunks, and
// counts them all.
func TestImportErrorsCapped(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 1000, 7)
	var body strings.Builder
	body.WriteString("email\n")
	for i := range 250 {
		if i%2 == 0 {
			fmt.Fprintf(&body, "bad%d\n", i)
		} else {
			fmt.Fprintf(&body, "ok%d@example.com\n", i)
		}
	}
	imp := b.run("ten_a", contacts.CSV, body.String())
	wantCounts(t, imp, 250, 125, 0, 125)
	errs := importErrors(t, imp)
	if len(errs) != contacts.MaxImportErrors || errs[0].Line != 2 || errs[99].Line != 2+2*99 {
		t.Fatalf("%d errors, first line %d, last line %d", len(errs), errs[0].Line, errs[len(errs)-1].Line)
	}
	// Every failed row is kept, with the row as read, and read back by
	// line a page at a time.
	b.imp.FailurePage = 10
	var got []contacts.ImportFailure
	pages := 0
	if err := b.imp.Failures(b.ctx, "ten_a", imp.ID, func(f []contacts.ImportFailure) error {
		pages++
		got = append(got, f...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 125 || pages != 13 {
		t.Fatalf("%d failed rows in %d pages, want 125 in 13", len(got), pages)
	}
	for i, f := range got {
		if f.Line != 2+2*i || f.Warning || f.Code != contacts.ImportCodeInvalid ||
			len(f.Fields) != 1 || f.Fields[0] != fmt.Sprintf("bad%d", 2*i) || !strings.Contains(f.Message, "email") {
			t.Fatalf("failed row %d: %+v", i, f)
		}
	}
	// Another tenant's import is NOT_FOUND.
	err := b.imp.Failures(b.ctx, "ten_b", imp.ID, func([]contacts.ImportFailure) error { return nil })
	if !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("another tenant's failures: %v", err)
	}
}

// A row repeating an earlier row's email is applied (as a second PUT) and
// told as a warning naming the earlier line, across chunks and parts, and
// across a worker that died between chunks (the next run reads the
// processed rows' emails again).
func TestImportDuplicates(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 1000, 2)
	b.exec(`UPDATE tenants SET plan = 'pro' WHERE id = 'ten_a'`) // parts
	body := "email,n\n" +
		"a@example.com,1\n" + // 2
		"b@example.com,2\n" + // 3
		"c@example.com,3\n" + // 4
		"A@Example.com,4\n" + // 5: duplicate of 2
		"d@example.com,5\n" + // 6
		"b@example.com,6\n" + // 7: duplicate of 3
		"e@example.com,7\n" + // 8
		"a@example.com,8\n" // 9: duplicate of 2
	id := b.stage("ten_a", contacts.CSV, body)
	if _, err := b.imp.Step(b.ctx, "ten_a", id); err != nil { // one chunk of each part, then the worker "dies"
		t.Fatal(err)
	}
	if err := b.imp.Run(b.ctx, "ten_a", id); err != nil {
		t.Fatal(err)
	}
	imp := b.get("ten_a", id)
	wantCounts(t, imp, 8, 5, 3, 0)
	var warns []contacts.ImportError
	if err := json.Unmarshal(imp.Warnings, &warns); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range warns {
		got = append(got, fmt.Sprintf("%d %s %s", w.Line, w.Code, w.Message))
	}
	want := []string{
		"5 DUPLICATE_ROW duplicate of line 2 (same email): applied after it, as a second PUT would be",
		"7 DUPLICATE_ROW duplicate of line 3 (same email): applied after it, as a second PUT would be",
		"9 DUPLICATE_ROW duplicate of line 2 (same email): applied after it, as a second PUT would be",
	}
	if imp.Duplicates != 3 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("duplicates %d, warnings\n%s\nwant\n%s", imp.Duplicates, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := string(b.contact("ten_a", "a@example.com").Properties); got != `{"n": "8"}` {
		t.Fatalf("a: %s (the last row for it is line 9)", got)
	}
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM contact_import_errors WHERE warning`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("%d warnings kept, %v", n, err)
	}
}

// Merged properties over 64 KiB fail the row (the database's bound),
// not the chunk.
func TestImportPropertiesTooLarge(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	big := strings.Repeat("x", 4000)
	var props []string
	for i := range 17 {
		props = append(props, fmt.Sprintf(`"k%d": "%s"`, i, big))
	}
	imp := b.run("ten_a", contacts.NDJSON, `{"email": "a@example.com", "properties": {`+strings.Join(props, ", ")+`}}`+"\n"+
		`{"email": "b@example.com", "properties": {"k": "v"}}`)
	wantCounts(t, imp, 2, 1, 0, 1)
	wantErrors(t, imp, "1: properties must total at most 65536 bytes per contact (as stored JSON)")
}

// The suppression list and the webhook outbox see imported contacts as
// they see any other: a listed email is imported suppressed, and
// contact.created is written for each new contact.
func TestImportTriggers(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	b.exec(`INSERT INTO suppressions (tenant_id, email, reason) VALUES ('ten_a', 'gone@example.com', 'manual')`)
	b.exec(`INSERT INTO webhook_endpoints (tenant_id, id, url, events, secret) VALUES ('ten_a', 'whk_1', 'https://h.example.com', '{contact.created}', 'whsec_x')`)
	imp := b.run("ten_a", contacts.CSV, "email\ngone@example.com\nhere@example.com\n")
	wantCounts(t, imp, 2, 2, 0, 0)
	if !b.contact("ten_a", "gone@example.com").Suppressed || b.contact("ten_a", "here@example.com").Suppressed {
		t.Fatal("suppression not derived from the list")
	}
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM webhook_outbox WHERE tenant_id = 'ten_a' AND type = 'contact.created'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("contact.created outbox rows %d, %v; want 2", n, err)
	}
}

// A contact created by another writer after a chunk looked up which of its
// emails are new, before the chunk's insert: the insert waits for that
// writer, then the row merges into the contact it made (no unique
// violation fails the chunk, no second contact).
func TestImportChunkMeetsAConcurrentCreate(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	id := b.stage("ten_a", contacts.CSV, "email,name\nann@example.com,Ann\nbob@example.com,Bob\n")
	other, err := b.db.Pool.Begin(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(b.ctx) }()
	if _, err := other.Exec(b.ctx, `INSERT INTO contacts (tenant_id, id, email, properties)
		VALUES ('ten_a', 'cnt_other', 'ann@example.com', '{"city": "Oslo"}')`); err != nil {
		t.Fatal(err)
	}
	stepped := make(chan error, 1)
	go func() {
		_, err := b.imp.Step(b.ctx, "ten_a", id)
		stepped <- err
	}()
	// The chunk's lookup cannot see the uncommitted contact; its insert
	// waits on the contact's index entry.
	testenv.WaitForLockWait(t, b.db, "the chunk never waited for the other writer")
	if err := other.Commit(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stepped; err != nil {
		t.Fatalf("step: %v", err)
	}
	wantCounts(t, b.get("ten_a", id), 2, 1, 1, 0)
	ann := b.contact("ten_a", "ann@example.com")
	if ann.ID != "cnt_other" || string(ann.Properties) != `{"city": "Oslo", "name": "Ann"}` {
		t.Fatalf("ann: %s %s, want cnt_other with both properties", ann.ID, ann.Properties)
	}
	if bob := b.contact("ten_a", "bob@example.com"); string(bob.Properties) != `{"name": "Bob"}` {
		t.Fatalf("bob: %s", bob.Properties)
	}
}

// A worker that dies between chunks loses nothing and repeats nothing: the
// committed chunks stay, the next run takes the rows they left. Two runs at
// once take turns.
func TestImportResumesAndRunsOnce(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 1000, 3)
	var body strings.Builder
	body.WriteString("email,n\n")
	for i := range 20 {
		fmt.Fprintf(&body, "c%d@example.com,%d\n", i%15, i) // 15 new, 5 updates
	}
	b.exec(`UPDATE tenants SET plan = 'pro' WHERE id = 'ten_a'`) // no limit: the rows go in parts
	id := b.stage("ten_a", contacts.CSV, body.String())
	for range 2 { // two chunks of each part, then the worker "dies"
		if done, err := b.imp.Step(b.ctx, "ten_a", id); err != nil || done {
			t.Fatalf("Step: done %v, %v", done, err)
		}
	}
	if imp := b.get("ten_a", id); imp.Parts != contacts.DefaultImportParts || imp.Processed != 12 ||
		imp.Status != contacts.ImportRunning {
		t.Fatalf("after two chunks of each of two parts: %+v", imp)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() { errs <- b.imp.Run(b.ctx, "ten_a", id) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	wantCounts(t, b.get("ten_a", id), 20, 15, 5, 0)
	if got := string(b.contact("ten_a", "c3@example.com").Properties); got != `{"n": "18"}` {
		t.Fatalf("c3: %s (the last row for it is line 20)", got)
	}
	var left int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM contact_import_rows`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("staging rows left %d, %v", left, err)
	}
	// A finished import runs as a no-op.
	if err := b.imp.Run(b.ctx, "ten_a", id); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, b.get("ten_a", id), 20, 15, 5, 0)
}

// An import whose task keeps dying without a chunk committed is failed
// after MaxImportAttempts runs, and its rows go.
func TestImportFailsAfterAttempts(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	id := b.stage("ten_a", contacts.CSV, "email\na@example.com\n")
	b.exec(`UPDATE contact_imports SET attempts = $1 WHERE id = $2`, contacts.MaxImportAttempts, id)
	if err := b.imp.Run(b.ctx, "ten_a", id); err != nil {
		t.Fatal(err)
	}
	imp := b.get("ten_a", id)
	if imp.Status != contacts.ImportFailed || imp.CompletedAt == nil || imp.Processed != 0 {
		t.Fatalf("import %+v, want failed", imp)
	}
	var left int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM contact_import_rows`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("staging rows left %d, %v", left, err)
	}
}

// An import is its tenant's: another tenant's id is NOT_FOUND, and running
// it as another tenant does nothing.
func TestImportTenantScoped(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	id := b.stage("ten_a", contacts.CSV, "email\na@example.com\n")
	if _, err := b.imp.Get(b.ctx, "ten_b", id); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("other tenant's Get: %v", err)
	}
	if err := b.imp.Run(b.ctx, "ten_b", id); err != nil {
		t.Fatal(err)
	}
	if imp := b.get("ten_a", id); imp.Processed != 0 || imp.Attempts != 0 {
		t.Fatalf("another tenant's run touched the import: %+v", imp)
	}
}

// Create refuses what cannot start an import and stores nothing then; a
// BeforeCommit error rolls the staging back.
func TestImportCreateRefuses(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	for _, tc := range []struct {
		format contacts.ImportFormat
		body   string
	}{{contacts.CSV, ""}, {contacts.CSV, "name\nAnn\n"}, {contacts.NDJSON, "\n\n"}} {
		_, err := b.imp.Create(b.ctx, "ten_a", contacts.CreateImport{Format: tc.format, Body: strings.NewReader(tc.body)})
		if !apperr.IsCode(err, "VALIDATION_ERROR") {
			t.Fatalf("%q: %v", tc.body, err)
		}
	}
	refused := apperr.Conflict("IDEMPOTENCY_KEY_IN_USE", "busy")
	_, err := b.imp.Create(b.ctx, "ten_a", contacts.CreateImport{Format: contacts.CSV, Body: strings.NewReader("email\na@example.com\n"),
		BeforeCommit: func(context.Context) error { return refused }})
	if err != refused {
		t.Fatalf("BeforeCommit's error: %v", err)
	}
	var imports, rows int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT (SELECT count(*) FROM contact_imports), (SELECT count(*) FROM contact_import_rows)`).Scan(&imports, &rows); err != nil || imports+rows != 0 {
		t.Fatalf("%d imports, %d rows stored by refused creates (%v)", imports, rows, err)
	}
}

// An import running when schema 0029 (parts) is applied goes on as one
// part from where it was: the rows it had processed are not taken again.
func TestImportRunningAcrossPartsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DBAt(t, 28)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO tenants (id, name, plan) VALUES ('ten_m', 'M', 'pro')`)
	// Lines 2 and 3 were processed (next_line 3) before the upgrade.
	exec(`INSERT INTO contact_imports (tenant_id, id, format, columns, email_column, total, next_line, processed, created)
		VALUES ('ten_m', 'imp_1', 'csv', '{email}', 0, 4, 3, 2, 2)`)
	exec(`INSERT INTO contact_import_rows (import_seq, line, fields)
		SELECT seq, 1 + g, ARRAY[chr(96 + g) || '@example.com'] FROM contact_imports, generate_series(1, 4) g`)
	if err := db.Migrate(ctx, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	imps := &contacts.Imports{DB: db}
	if err := imps.Run(ctx, "ten_m", "imp_1"); err != nil {
		t.Fatal(err)
	}
	imp, err := imps.Get(ctx, "ten_m", "imp_1")
	if err != nil {
		t.Fatal(err)
	}
	wantCounts(t, imp, 4, 4, 0, 0)
	var emails []string
	if err := db.Pool.QueryRow(ctx, `SELECT array_agg(email ORDER BY email) FROM contacts`).Scan(&emails); err != nil {
		t.Fatal(err)
	}
	if strings.Join(emails, " ") != "c@example.com d@example.com" {
		t.Fatalf("contacts %v, want the two rows after line 3", emails)
	}
}
