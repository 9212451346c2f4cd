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

// The events table of an existing install becomes the first partition of
// the partitioned table (schemas 0018, 0019) with every row kept, and
// events after the partitions start land in their month's partition.
func TestMigrateEventsToPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DBAt(t, 17)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	exec(`INSERT INTO tenants (id, name) VALUES ('ten_m', 'M')`)
	exec(`INSERT INTO contacts (tenant_id, id, email) VALUES ('ten_m', 'cnt_1', 'a@example.com')`)
	exec(`INSERT INTO events (tenant_id, id, contact_id, name, occurred_at)
		SELECT 'ten_m', 'evt_' || g, 'cnt_1', 'e', now() - g * interval '1 day' FROM generate_series(0, 999) g`)
	if err := db.Migrate(ctx, quiet); err != nil {
		t.Fatal(err)
	}
	var n, before, parts int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM events_before),
		(SELECT count(*) FROM pg_inherits WHERE inhparent = 'events'::regclass)`).Scan(&n, &before, &parts); err != nil {
		t.Fatal(err)
	}
	if n != 1000 || before != 1000 || parts < 3 {
		t.Fatalf("%d events, %d in the first partition, %d partitions", n, before, parts)
	}
	// An event in a month after the start goes to that month's partition;
	// the contact's deletion still cascades to every partition.
	exec(`INSERT INTO events (tenant_id, id, contact_id, name, occurred_at)
		SELECT 'ten_m', 'evt_late', 'cnt_1', 'e', starts_at + interval '1 hour' FROM event_partition_start`)
	var part string
	if err := db.Pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM events WHERE id = 'evt_late'`).Scan(&part); err != nil {
		t.Fatal(err)
	}
	if part == "events_before" {
		t.Fatalf("a later event went to %s", part)
	}
	exec(`DELETE FROM contacts WHERE id = 'cnt_1'`)
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d events after the contact's deletion (%v)", n, err)
	}
}
