package contacts_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"tidings/internal/contacts"
	"tidings/internal/page"
)

// Concurrent adds of one email: the insert decides, so exactly one is
// created (201) and every other finds the entry (200). Deciding by a read
// before the insert let two adds both answer created.
func TestSuppressionAddConcurrent(t *testing.T) {
	t.Parallel()
	ctx, s := setup(t)
	if _, err := s.Create(ctx, "ten_a", contacts.Input{Email: "ann@example.com"}); err != nil {
		t.Fatal(err)
	}
	sup := &contacts.Suppressions{DB: s.DB}
	const n = 8
	var wg sync.WaitGroup
	created := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, created[i], errs[i] = sup.Add(ctx, "ten_a", "Ann@Example.com", nil)
		})
	}
	wg.Wait()
	count := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if created[i] {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("%d adds answered created, want 1", count)
	}
	c, err := s.GetByEmail(ctx, "ten_a", "ann@example.com")
	if err != nil || !c.Suppressed {
		t.Fatalf("contact not suppressed: %+v %v", c, err)
	}
	// Filtered by reason (its own query and index), and scoped by tenant.
	p := page.Params{Limit: 10}
	rows, _, err := sup.List(ctx, "ten_a", contacts.SuppressManual, p)
	if err != nil || len(rows) != 1 || rows[0].Email != "ann@example.com" {
		t.Fatalf("%+v %v", rows, err)
	}
	if rows, _, err := sup.List(ctx, "ten_a", contacts.SuppressComplaint, p); err != nil || len(rows) != 0 {
		t.Fatalf("%+v %v", rows, err)
	}
	if rows, _, err := sup.List(ctx, "ten_b", "", p); err != nil || len(rows) != 0 {
		t.Fatalf("other tenant sees %+v %v", rows, err)
	}
}

// A contact created with an email on the suppression list is suppressed,
// by PUT's path and by an import's; schema 0028 moved that rule from a
// row trigger into the two statements that insert contacts.
func TestSuppressedAtInsert(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	sup := &contacts.Suppressions{DB: b.db}
	for _, email := range []string{"ann@example.com", "bob@example.com"} {
		if _, _, err := sup.Add(b.ctx, "ten_a", email, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.cts.Create(b.ctx, "ten_a", contacts.Input{Email: "ann@example.com"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.cts.Upsert(b.ctx, "ten_b", contacts.Input{Email: "ann@example.com"}); err != nil {
		t.Fatal(err)
	}
	b.run("ten_a", contacts.CSV, "email\nbob@example.com\ncy@example.com\n")
	for email, want := range map[string]bool{"ann@example.com": true, "bob@example.com": true, "cy@example.com": false} {
		if got := b.contact("ten_a", email).Suppressed; got != want {
			t.Errorf("%s suppressed %v, want %v", email, got, want)
		}
	}
	if b.contact("ten_b", "ann@example.com").Suppressed {
		t.Error("ten_a's suppression list suppressed ten_b's contact")
	}
}

// Every statement that inserts contacts applies the suppression list: no
// trigger does it for them any more (schema 0028).
func TestEveryContactInsertReadsSuppressions(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("queries: %v %v", files, err)
	}
	found := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range strings.Split(string(src), "-- name: ") {
			if !strings.Contains(stmt, "INSERT INTO contacts ") {
				continue
			}
			found++
			if !strings.Contains(stmt, "FROM suppressions") {
				t.Errorf("%s: %s inserts contacts without applying the suppression list", filepath.Base(f),
					strings.Fields(stmt)[0])
			}
		}
	}
	if found < 2 {
		t.Fatalf("found %d statements inserting contacts, want at least 2 (ContactInsert, ContactImportCreate)", found)
	}
}

// A tenant's deletion still takes its contacts, and what hangs off them,
// with it (a trigger since schema 0028, a foreign key before).
func TestTenantDeletionTakesContacts(t *testing.T) {
	t.Parallel()
	b := setupImports(t, 100, 0)
	for _, tenant := range []string{"ten_a", "ten_b"} {
		if _, err := b.cts.Create(b.ctx, tenant, contacts.Input{Email: "ann@example.com"}); err != nil {
			t.Fatal(err)
		}
	}
	b.exec(`DELETE FROM tenants WHERE id = 'ten_a'`)
	var n int
	if err := b.db.Pool.QueryRow(b.ctx, `SELECT count(*) FROM contacts WHERE tenant_id = 'ten_a'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d contacts of the deleted tenant left (%v)", n, err)
	}
	b.contact("ten_b", "ann@example.com")
	// A tenant that is gone takes no new contact.
	if _, err := b.cts.Create(b.ctx, "ten_a", contacts.Input{Email: "bob@example.com"}); err == nil {
		t.Fatal("a contact was created for a deleted tenant")
	}
}
