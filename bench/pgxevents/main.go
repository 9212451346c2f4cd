// Command pgxevents is the baseline of the events benchmark: it inserts the
// same event rows that POST /api/events writes, straight through pgx with
// no HTTP, authentication or rate limiting, and prints the rate and
// latency percentiles. Run by bench/run-events.sh beside the HTTP load.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
)

func main() {
	url := flag.String("db", "postgres://postgres@127.0.0.1:5432/tidings_bench?sslmode=disable", "database (already holding the loadgen tenants and contacts)")
	org := flag.String("org", "evbench", "tenant id prefix used by the events scenario")
	tenants := flag.Int("tenants", 50, "tenants")
	contacts := flag.Int("contacts", 20, "contacts per tenant")
	workers := flag.Int("c", 64, "concurrent inserters")
	dur := flag.Duration("d", 10*time.Second, "duration (at most 2m)")
	flag.Parse()
	if *dur > 2*time.Minute {
		*dur = 2 * time.Minute
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, *url)
	if err != nil {
		fail(err)
	}
	defer pool.Close()

	// The contact ids the HTTP scenario posts events for.
	type target struct{ tenant, contact string }
	var targets []target
	rows, err := pool.Query(ctx, `SELECT tenant_id, id FROM contacts WHERE tenant_id LIKE $1 || '_%' ORDER BY 1, 2`, *org)
	if err != nil {
		fail(err)
	}
	for rows.Next() {
		var t target
		if err := rows.Scan(&t.tenant, &t.contact); err != nil {
			fail(err)
		}
		targets = append(targets, t)
	}
	if len(targets) == 0 {
		fail(fmt.Errorf("no contacts under tenants %s_*: run the events loadgen scenario first (%d x %d)", *org, *tenants, *contacts))
	}

	var n atomic.Uint64
	var mu sync.Mutex
	var lat []time.Duration
	deadline := time.Now().Add(*dur)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				i := n.Add(1)
				t := targets[i%uint64(len(targets))]
				t0 := time.Now()
				_, err := pool.Exec(ctx, `INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
					VALUES ($1, $2, $3, 'page_view', '{"path":"/pricing","n":1}', now())`,
					t.tenant, "evt_"+ulid.Make().String(), t.contact)
				if err != nil {
					fail(err)
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	fmt.Printf("pgx-insert: %d rows in %v: %.0f rows/s  p50 %v  p99 %v  max %v\n",
		len(lat), el.Round(time.Millisecond), float64(len(lat))/el.Seconds(),
		p(0.5).Round(time.Microsecond), p(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "pgxevents:", err)
	os.Exit(1)
}
