package contacts_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
)

// begin takes an upload's place and fails the test if it cannot.
func (b *importBundle) begin(tenant string) *contacts.Upload {
	b.t.Helper()
	u, err := b.imp.BeginUpload(b.ctx, tenant)
	if err != nil {
		b.t.Fatalf("BeginUpload(%s): %v", tenant, err)
	}
	b.t.Cleanup(func() { _ = u.Close(b.ctx) })
	return u
}

// refusedWith checks an upload refused with code and a Retry-After.
func refusedWith(t *testing.T, err error, code string) {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok || e.Code != code || e.RetryAfter != contacts.UploadRetryAfter {
		t.Fatalf("want %s with Retry-After %d, got %v", code, contacts.UploadRetryAfter, err)
	}
}

// A tenant has at most MaxRunning imports uploading or running at once:
// places of uploads, freed by Close and taken over by the import they
// stage; expired places (their instance died) count no more; another
// tenant's places are its own.
func TestUploadPlacesPerTenant(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	b.imp.MaxRunning, b.imp.MaxUploads = 2, 100

	first, second := b.begin("ten_a"), b.begin("ten_a")
	_, err := b.imp.BeginUpload(b.ctx, "ten_a")
	refusedWith(t, err, "RATE_LIMITED")
	b.begin("ten_b") // another tenant's count

	// A place freed is free.
	if err := second.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	third := b.begin("ten_a")

	// A staged import takes its upload's place: it runs, and counts.
	if err := first.Receive(contacts.CSV, strings.NewReader("email\na@example.com\n")); err != nil {
		t.Fatal(err)
	}
	imp, err := first.Stage(b.ctx, nil)
	if err != nil || imp.ID != first.ID || imp.Status != contacts.ImportRunning || imp.Total != 1 {
		t.Fatalf("staged %+v %v", imp, err)
	}
	if err := first.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.imp.BeginUpload(b.ctx, "ten_a")
	refusedWith(t, err, "RATE_LIMITED")
	// Once it has run, the place is free.
	if err := b.imp.Run(b.ctx, "ten_a", imp.ID); err != nil {
		t.Fatal(err)
	}
	fourth := b.begin("ten_a")

	// The place of an upload whose process died expires, and the sweep
	// purges it.
	b.exec(`UPDATE contact_import_uploads SET expires_at = now() - interval '1 second' WHERE id = $1`, third.ID)
	b.begin("ten_a")
	_, err = b.imp.BeginUpload(b.ctx, "ten_a")
	refusedWith(t, err, "RATE_LIMITED")
	b.exec(`UPDATE contact_import_uploads SET expires_at = now() - interval '1 second' WHERE id = $1`, fourth.ID)
	if n, err := b.imp.PurgeUploads(b.ctx); err != nil || n != 1 {
		t.Fatalf("purged %d (%v), want the expired place", n, err)
	}
}

// A process receives at most MaxUploads bodies at once, whoever sends
// them; Close gives the place back.
func TestUploadPlacesPerInstance(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	b.imp.MaxRunning, b.imp.MaxUploads = 10, 2
	first := b.begin("ten_a")
	b.begin("ten_b")
	_, err := b.imp.BeginUpload(b.ctx, "ten_b")
	refusedWith(t, err, "SERVICE_UNAVAILABLE")
	if b.imp.Uploading() != 2 {
		t.Fatalf("uploading %d, want 2", b.imp.Uploading())
	}
	if err := first.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	b.begin("ten_b")
	var places int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM contact_import_uploads`).Scan(&places); err != nil || places != 2 {
		t.Fatalf("%d places, want 2 (a refused upload keeps none) %v", places, err)
	}
}

// failAfter is a body whose bytes after its text cannot be read.
type failAfter struct{ r io.Reader }

func (f *failAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errors.New("the rest never came")
	}
	return n, err
}

// Receive judges the header and the first row as they arrive, so a body
// that cannot start an import is refused without reading on; a body that
// stops arriving is VALIDATION_ERROR on body; nothing is stored then.
func TestUploadReceiveRefuses(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	b.imp.MaxRunning = 10
	for _, tc := range []struct {
		desc, body string
		cut        bool // the rest of the body fails to arrive
		want       string
	}{
		{desc: "no email column", body: "name\nAnn\n", cut: true, want: "must have an email column"},
		{desc: "no row", body: "email\n", want: "at least one row"},
		{desc: "cut off", body: "email\na@example.com\nb@exa", cut: true, want: "could not be read to its end"},
	} {
		u := b.begin("ten_a")
		var body io.Reader = strings.NewReader(tc.body)
		if tc.cut {
			body = &failAfter{r: body}
		}
		err := u.Receive(contacts.CSV, body)
		if !apperr.IsCode(err, "VALIDATION_ERROR") || !strings.Contains(fmtErr(err), tc.want) {
			t.Errorf("%s: %v", tc.desc, err)
		}
		if err := u.Close(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	var imports, places int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT (SELECT count(*) FROM contact_imports), (SELECT count(*) FROM contact_import_uploads)`).Scan(&imports, &places); err != nil || imports+places != 0 {
		t.Fatalf("%d imports, %d places left by refused uploads (%v)", imports, places, err)
	}
}

// fmtErr is an error's message with its field details.
func fmtErr(err error) string {
	if e, ok := apperr.As(err); ok {
		return fmt.Sprintf("%s %v", e.Message, e.Details)
	}
	return err.Error()
}

// Staging and processing take their connections from the imports' own
// pool (Work), the places and the progress from the requests' (DB): with
// Work closed, an upload still takes its place and is received, and its
// staging fails without touching DB's connections.
func TestUploadStagesOnTheImportsPool(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	work, err := b.db.Share(b.ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	work.Close()
	b.imp.Work = work
	u := b.begin("ten_a")
	if err := u.Receive(contacts.CSV, strings.NewReader("email\na@example.com\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Stage(b.ctx, nil); err == nil {
		t.Fatal("staged on a closed imports' pool: it used the requests' pool")
	}
	if err := b.imp.Run(b.ctx, "ten_a", u.ID); err == nil {
		t.Fatal("ran on a closed imports' pool: it used the requests' pool")
	}
	if _, err := b.imp.BeginUpload(b.ctx, "ten_b"); err != nil {
		t.Fatalf("a place on the requests' pool: %v", err)
	}
}
