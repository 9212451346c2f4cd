package contacts_test

import (
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
