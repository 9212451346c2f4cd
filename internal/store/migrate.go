package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"tidings/schema"
)

// Migrate applies pending migrations. A Postgres session advisory lock makes
// concurrent starts of several api processes safe: one migrates, the others
// wait and then find nothing to do.
func (db *DB) Migrate(ctx context.Context, log *slog.Logger) error {
	return db.MigrateTo(ctx, log, math.MaxInt64)
}

// MigrateTo applies the pending migrations up to version (a test of an
// upgrade stops before the migration it tests).
func (db *DB) MigrateTo(ctx context.Context, log *slog.Logger, version int64) error {
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	defer sqlDB.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, schema.FS,
		goose.WithSessionLocker(locker), goose.WithTableName(migrationsTable))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	results, err := p.UpTo(ctx, version)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	for _, r := range results {
		log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	return nil
}

// migrationsTable is where goose records the applied migrations.
const migrationsTable = "tidings_schema_migrations"

// LatestVersion is the highest migration this binary carries.
func LatestVersion() (int64, error) {
	files, err := fs.Glob(schema.FS, "*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, f := range files {
		num, _, ok := strings.Cut(f, "_")
		if !ok {
			continue
		}
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %s: %w", f, err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// SchemaVersion is the highest migration applied to the database: 0 on a
// database no api has migrated yet (no migrations table).
func (db *DB) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	err := db.Pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM `+migrationsTable+` WHERE is_applied`).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return 0, nil
	}
	return v, err
}

// WaitForSchema returns once the database has every migration this
// binary carries (LatestVersion), asking every interval. Only the api
// migrates (cmd/api at start); a worker started beside it on a fresh
// install waits here rather than run tasks on tables that do not exist
// yet, which would log failures and archive tasks on a new install. It
// says once that it waits, and once that the schema is there.
func (db *DB) WaitForSchema(ctx context.Context, log *slog.Logger, interval time.Duration) error {
	want, err := LatestVersion()
	if err != nil {
		return err
	}
	waited := false
	for {
		have, err := db.SchemaVersion(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("reading the schema version: %w", err)
		case have >= want:
			if waited {
				log.Info("database schema ready", "version", have)
			}
			return nil
		case !waited:
			log.Info("waiting for the database schema (the api applies migrations)", "have", have, "want", want)
			waited = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
