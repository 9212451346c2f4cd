package rules

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"tidings/internal/testenv"
)

// needDB returns a pool on a fresh, migrated database of the test's own
// (testenv): the tests that compare Go with SQL run against the real
// schema, indexes and constraints. Its session time zone is far from UTC,
// with daylight saving, which shows that no predicate depends on it.
func needDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	name, url := testenv.NewDatabase(t)
	admin, err := pgx.Connect(ctx, testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET timezone TO 'Pacific/Chatham'`, name)); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ensureTenant adds the tenant row that contacts belong to (a foreign key).
func ensureTenant(t testing.TB, db execer, tenant string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `INSERT INTO tenants (id, name) VALUES ($1, $1) ON CONFLICT DO NOTHING`, tenant); err != nil {
		t.Fatal(err)
	}
}
