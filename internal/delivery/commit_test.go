package delivery

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Which record-write errors may hide a COMMIT that committed.
func TestRolledBack(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Severity: "ERROR", Code: "23505"}, true},                            // the server refused a statement
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Severity: "ERROR", Code: "40001"}), true}, // serialization failure
		{&pgconn.PgError{Severity: "FATAL", Code: "57P01"}, false},                           // terminated: the COMMIT may have run
		{&pgconn.PgError{Severity: "ERROR", Code: "57P01"}, false},
		{&pgconn.PgError{Severity: "FATAL", Code: "08006"}, false},
		{errors.New("conn closed"), false},
		{errors.New("unexpected EOF"), false},
	}
	for _, c := range cases {
		if got := rolledBack(c.err); got != c.want {
			t.Errorf("rolledBack(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
