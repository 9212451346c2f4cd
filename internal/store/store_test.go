package store_test

import (
	"context"
	"strings"
	"testing"

	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

// A savepoint whose work fails takes back that work only: the error comes
// back translated, the transaction goes on and commits what was written
// before and after it; a savepoint whose work succeeds keeps it.
func TestSavepoint(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t)
	ctx := context.Background()
	if _, err := db.TenantInsert(ctx, queries.TenantInsertParams{ID: "ten_a", Name: "A"}); err != nil {
		t.Fatal(err)
	}
	key := func(q *store.Tx, id string) error {
		_, err := q.APIKeyInsert(ctx, queries.APIKeyInsertParams{TenantID: "ten_a", ID: id, Name: id,
			KeyPrefix: "tdk_", KeyHash: []byte(id)})
		return err
	}
	err := db.InTx(ctx, func(q *store.Tx) error {
		if err := key(q, "key_before"); err != nil {
			return err
		}
		err := q.Savepoint(ctx, func() error {
			if err := key(q, "key_undone"); err != nil {
				return err
			}
			return key(q, "key_before") // a unique violation
		})
		if !store.IsUniqueViolation(err, "") {
			t.Errorf("savepoint: %v, want the unique violation", err)
		}
		if err := q.Savepoint(ctx, func() error { return key(q, "key_kept") }); err != nil {
			return err
		}
		return key(q, "key_after")
	})
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	for id, want := range map[string]bool{"key_before": true, "key_undone": false, "key_kept": true, "key_after": true} {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if (n == 1) != want {
			t.Errorf("%s: %d rows, want it stored: %v", id, n, want)
		}
	}
}

// DATABASE_URL's password never reaches the error (which cmd/api logs):
// pgx quotes url.Parse's error, which holds the whole string.
func TestOpenErrorHidesThePassword(t *testing.T) {
	t.Parallel()
	const pw = "hunter2-Pa55word"
	_, err := store.Open(context.Background(), "postgres://tidings:"+pw+"@db.example.com:notaport/tidings")
	if err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("%v", err)
	}
}
