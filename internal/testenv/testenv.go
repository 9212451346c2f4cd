// Package testenv gives each test isolated real infrastructure: its own
// PostgreSQL database cloned from a migrated template, and its own Redis key
// prefix or Redis database index, so tests run in parallel against the real
// services.
package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"tidings/internal/store"
	"tidings/schema"
)

// AdminURL is the maintenance connection used to create test databases.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// RedisURL is the Redis server tests use.
func RedisURL() string {
	if u := os.Getenv("TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// DatabaseURL returns the URL of database name on the admin server.
func DatabaseURL(name string) string {
	u, _ := url.Parse(AdminURL())
	u.Path = "/" + name
	return u.String()
}

// DB returns a fresh, migrated database for this test, dropped afterwards.
func DB(t testing.TB) *store.DB {
	t.Helper()
	name, _ := NewDatabase(t)
	db, err := store.Open(context.Background(), DatabaseURL(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// DBAt is a database of its own migrated up to version only, to test a
// later migration on rows written before it (store.Migrate takes it the
// rest of the way).
func DBAt(t testing.TB, version int64) *store.DB {
	t.Helper()
	ctx := context.Background()
	db := DB(t)
	if _, err := db.Pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	if err := db.MigrateTo(ctx, slog.New(slog.DiscardHandler), version); err != nil {
		t.Fatal(err)
	}
	return db
}

// NewDatabase creates a migrated database and returns its name and URL.
func NewDatabase(t testing.TB) (string, string) {
	t.Helper()
	ctx := context.Background()
	tpl := ensureTemplate(t)
	name := "tidings_test_" + randomSuffix()
	admin := adminConn(t)
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, name, tpl)); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		// A database left behind is a leak, not a test failure: say so.
		c, err := pgx.Connect(ctx, AdminURL())
		if err != nil {
			t.Logf("testenv: database %s left behind: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name)); err != nil {
			t.Logf("testenv: database %s left behind: %v", name, err)
		}
	})
	return name, DatabaseURL(name)
}

func adminConn(t testing.TB) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), AdminURL())
	if err != nil {
		t.Fatalf("connect to postgres at %s (is it running?): %v", AdminURL(), err)
	}
	return c
}

// ensureTemplate builds, once per migration set, a template database with
// every migration applied. An advisory lock keeps parallel test binaries
// from building it twice; the template flag marks it complete.
func ensureTemplate(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	sum := migrationsHash()
	name := "tidings_tpl_" + sum[:16]
	admin := adminConn(t)
	defer admin.Close(ctx)
	lockID := int64(binary.BigEndian.Uint64([]byte(sum[:8])))
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockID); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lockID) //nolint:errcheck
	var isTemplate *bool
	err := admin.QueryRow(ctx, `SELECT datistemplate FROM pg_database WHERE datname = $1`, name).Scan(&isTemplate)
	if err == nil && isTemplate != nil && *isTemplate {
		return name
	}
	if err == nil {
		if _, err := admin.Exec(ctx, fmt.Sprintf(`DROP DATABASE %s WITH (FORCE)`, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s`, name)); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, DatabaseURL(name))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Migrate(ctx, slog.New(slog.DiscardHandler))
	db.Close()
	if err != nil {
		t.Fatalf("migrate template: %v", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s IS_TEMPLATE true`, name)); err != nil {
		t.Fatal(err)
	}
	return name
}

func migrationsHash() string {
	h := sha256.New()
	entries, _ := fs.ReadDir(schema.FS, ".")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(schema.FS, n)
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Redis returns a client and a key prefix private to this test; keys under
// the prefix are deleted afterwards.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	opt, err := redis.ParseURL(RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("connect to redis at %s (is it running?): %v", RedisURL(), err)
	}
	prefix := "test:" + randomSuffix() + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		// go-redis/redis_rate puts its own "rate:" before our keys.
		for _, pattern := range []string{prefix + "*", "rate:" + prefix + "*"} {
			iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
			for iter.Next(ctx) {
				rdb.Del(ctx, iter.Val())
			}
		}
		_ = rdb.Close()
	})
	return rdb, prefix
}

// RedisDB leases a whole Redis database index (1-15) for tests of code that
// cannot prefix its keys, such as asynq. It returns the URL of that
// database, flushed, and a client on it.
func RedisDB(t testing.TB) (string, *redis.Client) {
	t.Helper()
	ctx := context.Background()
	opt, err := redis.ParseURL(RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	ctl := redis.NewClient(opt)
	defer ctl.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		for n := 1; n <= 15; n++ {
			key := fmt.Sprintf("tidings:testlease:%d", n)
			ok, err := ctl.SetNX(ctx, key, "1", 10*time.Minute).Result()
			if err != nil {
				t.Fatalf("connect to redis at %s (is it running?): %v", RedisURL(), err)
			}
			if !ok {
				continue
			}
			o := *opt
			o.DB = n
			rdb := redis.NewClient(&o)
			rdb.FlushDB(ctx)
			u, _ := url.Parse(RedisURL())
			u.Path = fmt.Sprintf("/%d", n)
			t.Cleanup(func() {
				rdb.FlushDB(context.Background())
				_ = rdb.Close()
				c := redis.NewClient(opt)
				c.Del(context.Background(), key)
				_ = c.Close()
			})
			return u.String(), rdb
		}
		if time.Now().After(deadline) {
			t.Fatal("no free Redis database index for the test")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitForLockWait returns once a session of the test's database waits on
// a lock (a row or an index entry another transaction holds), and fails
// the test with msg after 30 seconds without one: how a test knows the
// statement it started in a goroutine has reached the lock it means to
// hold it at.
func WaitForLockWait(t testing.TB, db *store.DB, msg string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting bool
		if err := db.Pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
	}
}
