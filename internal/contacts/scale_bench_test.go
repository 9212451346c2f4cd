package contacts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"tidings/internal/page"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

// scaleDB is a database with one tenant of 1,000,000 contacts (plus a
// second, smaller tenant) and a contact with 10,000 events, built once per
// benchmark run.
func scaleDB(b *testing.B) (*store.DB, string) {
	b.Helper()
	ctx := context.Background()
	db := testenv.DB(b)
	start := time.Now()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO tenants (id, name, contact_count) VALUES ('big', 'Big', 1000000), ('small', 'Small', 1000);
		INSERT INTO contacts (tenant_id, id, email, properties, created_at)
		SELECT 'big', 'cnt_' || lpad(g::text, 8, '0'), 'c' || g || '@example.com',
		       jsonb_build_object('plan', CASE WHEN g % 3 = 0 THEN 'pro' ELSE 'free' END, 'n', g),
		       now() - (g || ' seconds')::interval
		FROM generate_series(1, 1000000) g;
		INSERT INTO contacts (tenant_id, id, email, created_at)
		SELECT 'small', 'cnt_s' || g, 's' || g || '@example.com', now() FROM generate_series(1, 1000) g;
		INSERT INTO events (tenant_id, id, contact_id, name, occurred_at)
		SELECT 'big', 'evt_' || lpad(g::text, 8, '0'), 'cnt_00000001', 'page_view', now() - (g || ' minutes')::interval
		FROM generate_series(1, 10000) g;
		INSERT INTO events (tenant_id, id, contact_id, name, occurred_at)
		SELECT 'big', 'evt_o' || g, 'cnt_' || lpad((g % 1000000 + 1)::text, 8, '0'), 'signup', now() - (g || ' seconds')::interval
		FROM generate_series(1, 200000) g;
		ANALYZE contacts; ANALYZE events;`)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("filled 1,000,000 contacts and 210,000 events in %v", time.Since(start).Round(time.Millisecond))
	return db, "big"
}

func explain(b *testing.B, db *store.DB, sql string, args ...any) {
	b.Helper()
	rows, err := db.Pool.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+sql, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		_ = rows.Scan(&l)
		lines = append(lines, l)
	}
	b.Logf("\n%s", strings.Join(lines, "\n"))
}

// BenchmarkScale1M pages contacts and a timeline in a tenant of 1,000,000
// contacts: first page, a page deep in the list, and a timeline page.
// Run: go test -run '^$' -bench Scale1M -benchtime 200x ./contacts/
func BenchmarkScale1M(b *testing.B) {
	db, tenant := scaleDB(b)
	ctx := context.Background()
	deep := time.Now().Add(-900000 * time.Second)
	explain(b, db, `SELECT * FROM contacts WHERE tenant_id = $1 AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT 21`,
		tenant, deep, "cnt_zzzz")
	b.Run("contacts_first_page", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rows, err := db.ContactList(ctx, queries.ContactListParams{TenantID: tenant, Lim: 21, BeforeTime: page.Far})
			if err != nil || len(rows) != 21 {
				b.Fatal(err, len(rows))
			}
		}
	})
	b.Run("contacts_page_at_900k", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rows, err := db.ContactList(ctx, queries.ContactListParams{TenantID: tenant, Lim: 21,
				BeforeTime: deep, BeforeID: "cnt_zzzz"})
			if err != nil || len(rows) != 21 {
				b.Fatal(err, len(rows))
			}
		}
	})
	b.Run("timeline_page_of_10k_events", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			rows, err := db.Timeline(ctx, queries.TimelineParams{TenantID: tenant, ContactID: "cnt_00000001", Lim: 51,
				FromTime: time.Time{}, BeforeTime: time.Now().Add(-5000 * time.Minute), BeforeID: "evt_z"})
			if err != nil || len(rows) != 51 {
				b.Fatal(err, len(rows))
			}
		}
	})
	b.Run("stats", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := db.ContactStats(ctx, tenant); err != nil {
				b.Fatal(err)
			}
		}
	})
}
