// Command pgxevents is the baseline of the events benchmark: it records the
// same custom events that POST /api/events records, one event per
// transaction, on a pool opened as the api opens its own (store.Open), with
// no HTTP, authentication or rate limiting. It prints the rate and latency
// percentiles. Run by bench/run-events.sh beside the HTTP load.
//
// -work fair (the default) does exactly the work the api does per event:
// the recorder the services are built with (internal/app), so the record
// (contact looked up by email, lastEventAt moved, event inserted) and the
// sequence engine's hook in the same transaction (the trigger lookup, the
// enrolments of the sequences it triggers, the exit check of the
// contact's open enrolments), committed, and the timers it scheduled set
// after the commit. -work record is the baseline of earlier runs: the
// record statement alone, no transaction, no hook (less than the api did).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"tidings/bench/loadgen"
	"tidings/internal/app"
	"tidings/internal/config"
	"tidings/internal/events"
	"tidings/internal/store"
	"tidings/internal/tasks"
)

func main() {
	url := flag.String("db", "postgres://postgres@127.0.0.1:5432/tidings_bench_events?sslmode=disable", "database already holding the events scenario's tenants and contacts")
	org := flag.String("org", "evbench", "organisation prefix the events scenario used (tenants <org>_0, <org>_1, ...)")
	workers := flag.Int("c", 32, "concurrent recorders")
	dur := flag.Duration("d", 10*time.Second, "measured time (at most 2m)")
	warmup := flag.Duration("warmup", 2*time.Second, "unmeasured load first (opens the pool's connections)")
	work := flag.String("work", "fair", "fair: the api's work per event (record and the engine's hook, one transaction); record: the record statement alone")
	flag.Parse()
	*dur, *warmup = min(*dur, 2*time.Minute), min(*warmup, time.Minute)
	if *work != "fair" && *work != "record" {
		fmt.Fprintln(os.Stderr, "pgxevents: -work must be fair or record")
		os.Exit(2)
	}
	if err := run(*url, *org, *work, *workers, *dur, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "pgxevents:", err)
		os.Exit(1)
	}
}

func run(url, org, work string, workers int, dur, warmup time.Duration) error {
	ctx := context.Background()
	db, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close()

	// The contacts the HTTP scenario posts events for, in the same order of
	// tenants first.
	type target struct{ tenant, email string }
	var targets []target
	rows, err := db.Pool.Query(ctx, `SELECT tenant_id, email FROM contacts WHERE starts_with(tenant_id, $1 || '_') ORDER BY 1, 2`, org)
	if err != nil {
		return err
	}
	for rows.Next() {
		var t target
		if err := rows.Scan(&t.tenant, &t.email); err != nil {
			return err
		}
		targets = append(targets, t)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(targets) == 0 {
		return fmt.Errorf("no contacts under tenants %s_*: run the events loadgen scenario first", org)
	}
	props, _ := json.Marshal(map[string]any{"path": "/pricing", "n": 1})
	rec := &events.Recorder{DB: db}
	if work == "fair" {
		if rec, err = apiRecorder(ctx, db); err != nil {
			return err
		}
	}

	load := func(d time.Duration) ([]time.Duration, time.Duration, error) {
		var n atomic.Uint64
		var mu sync.Mutex
		var lat []time.Duration
		var firstErr error
		deadline := time.Now().Add(d)
		start := time.Now()
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				var mine []time.Duration
				for time.Now().Before(deadline) {
					t := targets[n.Add(1)%uint64(len(targets))]
					t0 := time.Now()
					_, err := rec.RecordCustom(ctx, events.Custom{TenantID: t.tenant, Email: t.email, Name: "page_view",
						Properties: props, Timestamp: t0, UpdateContact: true})
					if err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		return lat, time.Since(start), firstErr
	}
	if _, _, err := load(warmup); err != nil {
		return err
	}
	lat, elapsed, err := load(dur)
	if err != nil {
		return err
	}
	slices.Sort(lat)
	r := loadgen.Result{Requests: uint64(len(lat)), Elapsed: elapsed, Latencies: lat}
	fmt.Printf("pgx-%s: %d events in %v: %.0f rows/s  p50 %v  p99 %v  max %v\n", work,
		r.Requests, elapsed.Round(time.Millisecond), r.Rate(),
		r.Percentile(50).Round(time.Microsecond), r.Percentile(99).Round(time.Microsecond), r.Max().Round(time.Microsecond))
	return nil
}

// apiRecorder is the events recorder exactly as the api builds it
// (internal/app, from the same environment), with its own task client so
// the timers a transaction schedules are set after its commit as the api
// sets them.
func apiRecorder(ctx context.Context, db *store.DB) (*events.Recorder, error) {
	cfg, err := config.Load()
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.DiscardHandler)
	rdb, err := cfg.OpenRedis(ctx)
	if err != nil {
		return nil, err
	}
	opt, err := cfg.AsynqRedisOpt()
	if err != nil {
		return nil, err
	}
	svc, err := app.New(app.Infra{Config: cfg, DB: db, Redis: rdb, RedisPrefix: app.RedisPrefix, Log: log,
		Tasks: tasks.NewClient(asynq.NewClient(opt), asynq.NewInspector(opt), log)})
	if err != nil {
		return nil, err
	}
	return svc.Events, nil
}
