package testenv

import (
	"testing"

	"tidings/internal/page"
)

// Pages reads a whole list through list, limit items a page, following
// the cursors, and returns every item in the order the pages gave them.
func Pages[T any](t testing.TB, limit int, list func(page.Params) ([]T, *page.Cursor, error)) []T {
	t.Helper()
	var all []T
	p := page.Params{Limit: limit}
	for pages := 0; ; pages++ {
		items, next, err := list(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) > limit || pages > 10_000 {
			t.Fatalf("page of %d with limit %d, or paging does not end", len(items), limit)
		}
		all = append(all, items...)
		if next == nil {
			return all
		}
		p.After = next
	}
}
