package store

import (
	"context"
	"fmt"
	"log/slog"
	"math"

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
		goose.WithSessionLocker(locker), goose.WithTableName("tidings_schema_migrations"))
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
