package store

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"tidings/internal/apperr"
	"tidings/queries"
)

// SQLSTATE codes the store translates.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
	checkViolation      = "23514"
	dataExceptionClass  = "22"
)

// SQLState is the SQLSTATE of the database error inside err, or "" when
// there is none. It holds before and after Translate.
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Translate turns a driver error into an apperr.Error, keeping the driver
// error as its cause (errors.Is(err, pgx.ErrNoRows) and errors.As for
// *pgconn.PgError still hold):
//   - no rows: KindNotFound, code NOT_FOUND;
//   - unique violation (23505): KindConflict, code CONFLICT;
//   - foreign key violation (23503): KindInvalid, code VALIDATION_ERROR
//     (the row names something that does not exist, or is still named);
//   - check violation (23514): KindInvalid, code VALIDATION_ERROR (a bound
//     only the database can see, such as a contact's total properties);
//   - any data exception (class 22: bad encoding 22021, numeric overflow
//     22003, invalid text 22P02, datetime overflow 22008...): KindInvalid,
//     code VALIDATION_ERROR. This is the last line of defence: the API
//     validates input before it gets here (storable) so that the error names
//     the field; one that still arrives names none, and the HTTP layer logs
//     its SQLSTATE (SQLState) so the gap can be closed.
//
// Callers that know what was not found or clashed replace the generic
// error with their own (apperr.Specific). Anything else, and errors that
// are already *apperr.Error, pass unchanged. It decides by error value and
// SQLSTATE, never by message text (river's interpretError does the same).
func Translate(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := apperr.As(err); ok {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &apperr.Error{Kind: apperr.KindNotFound, Code: "NOT_FOUND", Message: "not found", Err: err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case uniqueViolation:
			return &apperr.Error{Kind: apperr.KindConflict, Code: "CONFLICT", Message: "already exists", Err: err}
		case foreignKeyViolation:
			return &apperr.Error{Kind: apperr.KindInvalid, Code: "VALIDATION_ERROR",
				Message: "invalid request: refers to something that does not exist", Err: err}
		case checkViolation:
			return &apperr.Error{Kind: apperr.KindInvalid, Code: "VALIDATION_ERROR",
				Message: "invalid request: a stored limit would be exceeded", Err: err}
		}
		if strings.HasPrefix(pgErr.Code, dataExceptionClass) {
			return &apperr.Error{Kind: apperr.KindInvalid, Code: "VALIDATION_ERROR",
				Message: "invalid request: a value cannot be stored", Err: err}
		}
	}
	return err
}

// IsNoRows reports whether err means the query matched no row: for an
// INSERT ... ON CONFLICT DO NOTHING or a guarded UPDATE, that nothing was
// written. It holds before and after Translate.
func IsNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// IsUniqueViolation reports whether err is SQLSTATE 23505, optionally on a
// specific constraint. It holds before and after Translate.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != uniqueViolation {
		return false
	}
	return constraint == "" || pgErr.ConstraintName == constraint
}

// IsCheckViolation reports whether err is SQLSTATE 23514 on the named
// constraint. It holds before and after Translate.
func IsCheckViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == checkViolation && pgErr.ConstraintName == constraint
}

// translating is the connection every generated query runs on: it passes
// each statement to the pool or transaction and translates what fails, so
// no caller sees a raw driver error for a missing row or a violated key.
type translating struct{ db queries.DBTX }

func translated(db queries.DBTX) *queries.Queries { return queries.New(translating{db}) }

func (t translating) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.db.Exec(ctx, sql, args...)
	return tag, Translate(err)
}

func (t translating) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := t.db.Query(ctx, sql, args...)
	if err != nil {
		return rows, Translate(err)
	}
	return translatingRows{rows}, nil
}

func (t translating) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return translatingRow{t.db.QueryRow(ctx, sql, args...)}
}

func (t translating) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	n, err := t.db.CopyFrom(ctx, table, cols, src)
	return n, Translate(err)
}

type translatingRow struct{ pgx.Row }

func (r translatingRow) Scan(dest ...any) error { return Translate(r.Row.Scan(dest...)) }

type translatingRows struct{ pgx.Rows }

func (r translatingRows) Scan(dest ...any) error { return Translate(r.Rows.Scan(dest...)) }
func (r translatingRows) Err() error             { return Translate(r.Rows.Err()) }
