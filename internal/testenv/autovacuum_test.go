package testenv

import (
	"context"
	"testing"
)

// TestAutovacuumPicksWhatTheDaemonWould: a table whose dead rows pass the
// default threshold is vacuumed and analyzed; one under it is left alone.
func TestAutovacuumPicksWhatTheDaemonWould(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := DB(t)
	// One connection, its statistics flushed after each step: a backend
	// otherwise reports its counts up to a second later, and inserts
	// reported after the ANALYZE would count as changes since it.
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE churned (x int)`,
		`CREATE TABLE calm (x int)`,
		`INSERT INTO churned SELECT generate_series(1, 2000)`,
		`INSERT INTO calm SELECT generate_series(1, 1000)`,
		`VACUUM ANALYZE calm`,
		`DELETE FROM churned`,
		`DELETE FROM calm WHERE x <= 10`, // 10 dead: under 50 + 20% of 1,000
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
	}
	conn.Release()

	vacuums, analyzes, err := autovacuumOnce(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	count := func(table string) (vacuums, analyzes int64, dead int64) {
		t.Helper()
		if err := db.Pool.QueryRow(ctx, `SELECT vacuum_count, analyze_count, n_dead_tup FROM pg_stat_user_tables
			WHERE relname = $1`, table).Scan(&vacuums, &analyzes, &dead); err != nil {
			t.Fatal(err)
		}
		return vacuums, analyzes, dead
	}
	if v, a, dead := count("churned"); v != 1 || a != 1 || dead != 0 {
		t.Errorf("churned: %d vacuums, %d analyzes, %d dead rows; want 1, 1, 0", v, a, dead)
	}
	if v, a, _ := count("calm"); v != 1 || a != 1 {
		t.Errorf("calm: %d vacuums, %d analyzes; want only the set-up's 1 and 1", v, a)
	}
	if vacuums < 1 || analyzes < 1 {
		t.Errorf("reported %d vacuums and %d analyzes", vacuums, analyzes)
	}
}
