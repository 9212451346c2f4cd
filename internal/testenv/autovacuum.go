package testenv

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Autovacuum stands in, while ctx lives, for the autovacuum daemon that
// this machine's PostgreSQL runs without (autovacuum = off): every check
// it vacuums or analyzes each table of the pool's database that
// autovacuum's default thresholds would pick, at autovacuum's default
// cost limits, one table at a time, as one autovacuum worker would. A
// benchmark whose rate counts vacuum ("vacuum included") runs beside it,
// so it pays for the vacuuming a server would do, neither none nor a full
// VACUUM ANALYZE of its busiest tables every few seconds (what these
// benchmarks did until session 15: at 1,000,000 contacts that was a whole
// pass of the table and its five indexes every 10 s). The defaults:
//
//   - vacuum when dead rows pass 50 + 20% of the table's rows, or rows
//     inserted since the last vacuum pass 1,000 + 20%;
//   - analyze when rows changed since the last analyze pass 50 + 10%;
//   - vacuum_cost_limit 200 with a 2 ms delay (autovacuum_vacuum_cost_*).
//
// It checks every interval (autovacuum's naptime is a minute; a shorter
// one only vacuums sooner). It returns a function that stops it and
// waits, and reports how many vacuums and analyzes it ran.
func Autovacuum(ctx context.Context, pool *pgxpool.Pool, interval time.Duration, logf func(string, ...any)) (stop func() (vacuums, analyzes int)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var vacuums, analyzes int
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
			v, a, err := autovacuumOnce(ctx, pool)
			vacuums, analyzes = vacuums+v, analyzes+a
			if err != nil && ctx.Err() == nil {
				logf("autovacuum stand-in: %v", err)
			}
		}
	}()
	return func() (int, int) {
		cancel()
		<-done
		return vacuums, analyzes
	}
}

// autovacuumOnce is one check: the tables over a threshold, each vacuumed
// and/or analyzed on one connection at the cost limits.
func autovacuumOnce(ctx context.Context, pool *pgxpool.Pool) (vacuums, analyzes int, err error) {
	rows, err := pool.Query(ctx, `SELECT s.schemaname, s.relname,
			s.n_dead_tup > 50 + 0.2 * greatest(c.reltuples, 0)
				OR s.n_ins_since_vacuum > 1000 + 0.2 * greatest(c.reltuples, 0) AS vacuum,
			s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0) AS analyze
		FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
		WHERE c.relkind = 'r'`)
	if err != nil {
		return 0, 0, err
	}
	type job struct {
		name              string
		vacuum, doAnalyze bool
	}
	var jobs []job
	for rows.Next() {
		var schema, rel string
		var j job
		if err := rows.Scan(&schema, &rel, &j.vacuum, &j.doAnalyze); err != nil {
			rows.Close()
			return 0, 0, err
		}
		if j.vacuum || j.doAnalyze {
			j.name = pgx.Identifier{schema, rel}.Sanitize()
			jobs = append(jobs, j)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	if len(jobs) == 0 {
		return 0, 0, nil
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET vacuum_cost_limit = 200; SET vacuum_cost_delay = '2ms'`); err != nil {
		return 0, 0, err
	}
	defer func() { _, _ = conn.Exec(context.Background(), `RESET vacuum_cost_limit; RESET vacuum_cost_delay`) }()
	for _, j := range jobs {
		stmt := "ANALYZE " + j.name
		switch {
		case j.vacuum && j.doAnalyze:
			stmt = "VACUUM (ANALYZE) " + j.name
		case j.vacuum:
			stmt = "VACUUM " + j.name
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return vacuums, analyzes, fmt.Errorf("%s: %w", stmt, err)
		}
		if j.vacuum {
			vacuums++
		}
		if j.doAnalyze {
			analyzes++
		}
	}
	return vacuums, analyzes, nil
}
