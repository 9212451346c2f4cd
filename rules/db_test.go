package rules

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The tests that compare Go with SQL run against a real PostgreSQL, in a
// database of their own that is created for the run and dropped after it.
// RULES_TEST_DATABASE_URL points at a database to connect to for creating
// it; the default is the local development server.
const defaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// testSchema mirrors the contacts and events tables of the real migrations.
const testSchema = `
CREATE TABLE contacts (
  tenant_id text NOT NULL, id text NOT NULL, email text NOT NULL, user_id text,
  properties jsonb NOT NULL DEFAULT '{}', subscribed boolean NOT NULL DEFAULT true,
  suppressed boolean NOT NULL DEFAULT false, total_sends bigint NOT NULL DEFAULT 0,
  total_opens bigint NOT NULL DEFAULT 0, total_clicks bigint NOT NULL DEFAULT 0,
  last_event_at timestamptz, created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (tenant_id, id));
CREATE TABLE events (
  tenant_id text NOT NULL, id text NOT NULL, contact_id text NOT NULL, name text NOT NULL,
  properties jsonb NOT NULL DEFAULT '{}', occurred_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (tenant_id, id));
CREATE INDEX ON events (tenant_id, contact_id, name, occurred_at);
`

var (
	testPool  *pgxpool.Pool
	testDBErr error // why testPool is nil
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if testing.Short() {
		testDBErr = errors.New("-short: PostgreSQL tests skipped")
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	drop, err := createTestDB(ctx)
	cancel()
	if err != nil {
		testDBErr = err
		return m.Run() // pure tests still run; database tests fail with the reason
	}
	code := m.Run()
	testPool.Close()
	if err := drop(); err != nil {
		fmt.Fprintln(os.Stderr, "rules tests: dropping the test database:", err)
	}
	return code
}

// createTestDB creates rules_test_<random>, connects testPool to it and
// returns the function that drops it.
func createTestDB(ctx context.Context) (drop func() error, err error) {
	adminURL := os.Getenv("RULES_TEST_DATABASE_URL")
	if adminURL == "" {
		adminURL = defaultAdminURL
	}
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL at %s: %w", adminURL, err)
	}
	defer admin.Close(context.Background())
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "rules_test_" + hex.EncodeToString(suffix)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("creating %s: %w", name, err)
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		return err
	}
	// A session time zone far from UTC, with daylight saving, shows that no
	// predicate depends on it.
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" SET timezone TO 'Pacific/Chatham'"); err != nil {
		return nil, errors.Join(err, drop())
	}
	cfg, err := pgxpool.ParseConfig(adminURL)
	if err != nil {
		return nil, errors.Join(err, drop())
	}
	cfg.ConnConfig.Database = name
	cfg.MaxConns = 8
	testPool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		_, err = testPool.Exec(ctx, testSchema)
	}
	if err != nil {
		if testPool != nil {
			testPool.Close()
		}
		testPool = nil
		return nil, errors.Join(err, drop())
	}
	return drop, nil
}

// needDB returns the test database's pool, or stops the test when there is
// none.
func needDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	if testPool == nil {
		if testing.Short() {
			t.Skip(testDBErr)
		}
		t.Fatalf("PostgreSQL needed: %v", testDBErr)
	}
	return testPool
}
