package store_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"tidings/internal/store"
	"tidings/internal/testenv"
)

// Applying migrations again changes nothing.
func TestMigrateTwiceIsNoOp(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t) // already migrated from the template
	ctx := context.Background()
	var before int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM tidings_schema_migrations`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- db.Migrate(ctx, slog.New(slog.DiscardHandler))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var after int
	_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM tidings_schema_migrations`).Scan(&after)
	if after != before {
		t.Fatalf("migration rows %d -> %d", before, after)
	}
}

func TestMigrateFreshDatabase(t *testing.T) {
	t.Parallel()
	_, url := testenv.NewDatabase(t)
	ctx := context.Background()
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Start from nothing: drop what the template brought, then migrate from
	// three "processes" at once. Without the advisory lock they collide
	// (duplicate type names while creating the same tables).
	if _, err := db.Pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() { errs <- db.Migrate(ctx, slog.New(slog.DiscardHandler)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Migrate(ctx, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("again: %v", err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM tenants`).Scan(&n); err != nil {
		t.Fatal(err)
	}
}
