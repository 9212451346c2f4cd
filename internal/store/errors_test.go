package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"tidings/internal/apperr"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

// Every generated query's driver errors arrive translated, in and out of
// transactions, with the driver error kept as the cause.
func TestQueriesReturnTranslatedErrors(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t)
	ctx := context.Background()
	if _, err := db.TenantInsert(ctx, queries.TenantInsertParams{ID: "ten_a", Name: "A"}); err != nil {
		t.Fatal(err)
	}
	key := func(tenant, id string, hash byte) func(q *queries.Queries) error {
		return func(q *queries.Queries) error {
			_, err := q.APIKeyInsert(ctx, queries.APIKeyInsertParams{TenantID: tenant, ID: id, Name: "k",
				KeyPrefix: "tdk_", KeyHash: []byte{hash}})
			return err
		}
	}
	if err := key("ten_a", "key_1", 1)(db.Queries); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc     string
		run      func(q *queries.Queries) error
		wantKind apperr.Kind
		wantCode string
		cause    func(error) bool
	}{
		{desc: "no rows", run: func(q *queries.Queries) error { _, err := q.TenantGet(ctx, "ten_missing"); return err },
			wantKind: apperr.KindNotFound, wantCode: "NOT_FOUND", cause: store.IsNoRows},
		{desc: "unique violation", run: key("ten_a", "key_2", 1),
			wantKind: apperr.KindConflict, wantCode: "CONFLICT",
			cause: func(err error) bool { return store.IsUniqueViolation(err, "") }},
		{desc: "foreign key violation", run: key("ten_missing", "key_3", 3),
			wantKind: apperr.KindInvalid, wantCode: "VALIDATION_ERROR"},
		// Class 22 (data exception) is the client's input, the last line of
		// defence behind validation: never a 500.
		{desc: "NUL in text (22021)", run: func(q *queries.Queries) error { _, err := q.TenantGet(ctx, "ten_\x00"); return err },
			wantKind: apperr.KindInvalid, wantCode: "VALIDATION_ERROR", cause: sqlState("22021")},
		{desc: "invalid UTF-8 (22021)", run: func(q *queries.Queries) error {
			_, err := q.TenantInsert(ctx, queries.TenantInsertParams{ID: "ten_b", Name: "\xff"})
			return err
		}, wantKind: apperr.KindInvalid, wantCode: "VALIDATION_ERROR", cause: sqlState("22021")},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			check := func(where string, err error) {
				e, ok := apperr.As(err)
				if !ok || e.Kind != tt.wantKind || e.Code != tt.wantCode {
					t.Fatalf("%s: got %v, want %s %s", where, err, tt.wantKind, tt.wantCode)
				}
				if tt.cause != nil && !tt.cause(err) {
					t.Fatalf("%s: the driver error is lost: %v", where, err)
				}
			}
			check("pool", tt.run(db.Queries))
			check("transaction", db.Tx(ctx, tt.run))
		})
	}
}

func sqlState(code string) func(error) bool {
	return func(err error) bool { return store.SQLState(err) == code }
}

func TestTranslate(t *testing.T) {
	t.Parallel()
	plain := errors.New("connection refused")
	if store.Translate(plain) != plain || store.Translate(nil) != nil {
		t.Fatal("other errors and nil pass unchanged")
	}
	specific := apperr.NotFound("CONTACT_NOT_FOUND", "contact")
	if store.Translate(specific) != specific {
		t.Fatal("an apperr.Error passes unchanged")
	}
	if err := store.Translate(pgx.ErrNoRows); !apperr.IsKind(err, apperr.KindNotFound) || !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("got %v", err)
	}
}
