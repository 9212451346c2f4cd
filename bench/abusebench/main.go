// Command abusebench is the slow-import abuse benchmark (`make
// bench-abuse`, docs/benchmarks.md; ADDENDUM 25, last bullet): one tenant
// opens -uploads imports that trickle a byte every -trickle and never end,
// more than the request pool has connections, and meanwhile another
// tenant's GET /api/contacts/{id} is timed at a fixed rate and /readyz
// asked every 200 ms: first idle, then with the uploads open, in one run.
// It prints the percentiles of both phases and the ratio of the p99s, and
// fails if the ratio passes -ceiling, if /readyz ever answers anything but
// ready, or if a probe fails.
//
// The api runs in this process on loopback, built as cmd/api builds it,
// with the import caps raised so that every upload is let in (what is
// measured is that an upload holds no connection, not that the caps refuse
// it). It uses a database of its own (created, migrated, dropped) and a
// Redis database leased as the tests lease theirs (tidings:testlease:N).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"tidings/api"
	"tidings/bench/benchenv"
	"tidings/internal/app"
	"tidings/internal/auth"
	"tidings/internal/config"
	"tidings/internal/ratelimit"
)

var (
	uploads  = flag.Int("uploads", 50, "slow imports the abusing tenant keeps open")
	trickle  = flag.Duration("trickle", 2*time.Second, "how often each slow import sends one more byte")
	probeHz  = flag.Int("probe-rate", 50, "GET requests a second of the other tenant")
	phase    = flag.Duration("phase", 20*time.Second, "how long each phase (idle, abuse) is measured")
	ceiling  = flag.Float64("ceiling", 2, "largest p99 under abuse over idle p99 that passes")
	pgAdmin  = flag.String("pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL admin URL")
	redisURL = flag.String("redis", "redis://127.0.0.1:6379", "Redis server (a database of it is leased)")
	dbName   = flag.String("db", "tidings_bench_abuse", "the benchmark's database (dropped and created)")
	timeout  = flag.Duration("timeout", 10*time.Minute, "bound on the whole run")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "abusebench:", err)
		os.Exit(1)
	}
}

func run() error {
	if *uploads < 1 || *probeHz < 1 || *phase <= 0 || *trickle <= 0 {
		return errors.New("-uploads, -probe-rate, -phase and -trickle must be positive")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	admin, err := pgx.Connect(ctx, *pgAdmin)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	ident := pgx.Identifier{*dbName}.Sanitize()
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return err
	}
	defer admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)") //nolint:errcheck
	dbURL := strings.Replace(*pgAdmin, "/postgres?", "/"+*dbName+"?", 1)
	redisDB, release, err := benchenv.LeaseRedis(ctx, *redisURL, "abusebench", time.Hour)
	if err != nil {
		return err
	}
	defer release()

	caps := fmt.Sprint(*uploads + 8)
	env := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisDB, "RATE_LIMIT_PER_MINUTE": "100000000",
		"DASHBOARD_JWT_SECRET": "bench-dashboard-secret", "TRACKING_SECRET": "bench-tracking-secret",
		"OUTBOX_DIR": os.TempDir(), "IMPORT_MAX_RUNNING": caps, "IMPORT_MAX_UPLOADS": caps}
	cfg, err := config.FromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return err
	}
	infra, err := app.Open(ctx, cfg, log, app.RoleAPI)
	if err != nil {
		return err
	}
	defer infra.Close()
	svc, err := app.New(infra.Infra)
	if err != nil {
		return err
	}
	web, err := api.New(api.Deps{Services: svc, Limiter: ratelimit.New(infra.Redis, cfg.RateLimitPerMinute, app.RedisPrefix),
		Sessions: auth.NewSessionVerifier(cfg.DashboardJWTSecret, "", "")})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = web.Listener(ln) }()
	defer web.Shutdown() //nolint:errcheck
	addr := ln.Addr().String()

	// The abusing tenant (free, as in the finding) and the other one.
	if _, err := svc.DB.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ('bench_abuser', 'abuser'), ('bench_other', 'other')`); err != nil {
		return err
	}
	abuserKey, err := svc.APIKeys.Create(ctx, "bench_abuser", "bench")
	if err != nil {
		return err
	}
	otherKey, err := svc.APIKeys.Create(ctx, "bench_other", "bench")
	if err != nil {
		return err
	}
	if _, err := svc.DB.Pool.Exec(ctx, `INSERT INTO contacts (tenant_id, id, email) VALUES ('bench_other', 'cnt_probe', 'probe@example.com')`); err != nil {
		return err
	}
	poolSize := svc.DB.Pool.Config().MaxConns
	fmt.Printf("request pool: %d connections; import pool: %d; slow uploads: %d, a byte every %v each\n",
		poolSize, cfg.ImportDBConns, *uploads, *trickle)
	fmt.Printf("load average before: %s\n", loadAvg())

	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	get := getAnswers(client, "http://"+addr+"/api/contacts/cnt_probe", otherKey.Raw)
	ready := getAnswers(client, "http://"+addr+"/readyz", "")
	measure := func() ([]time.Duration, int, int, int) {
		var lat []time.Duration
		var failed, readyOK, readyBad int
		var wg sync.WaitGroup
		wg.Go(func() { lat, failed = probe(ctx, *probeHz, *phase, get) })
		wg.Go(func() {
			ok, bad := probe(ctx, 5, *phase, ready)
			readyOK, readyBad = len(ok), bad
		})
		wg.Wait()
		return lat, failed, readyOK, readyBad
	}

	idle, idleFailed, idleReady, idleNotReady := measure()

	// The abuse: every upload open, each past its place (its handler is
	// receiving), before the measure starts.
	open := make([]net.Conn, 0, *uploads)
	stop := make(chan struct{})
	var trickling sync.WaitGroup
	defer func() {
		close(stop)
		trickling.Wait()
		for _, c := range open {
			c.Close()
		}
	}()
	for range *uploads {
		c, err := openSlowUpload(addr, abuserKey.Raw)
		if err != nil {
			return err
		}
		open = append(open, c)
		trickling.Go(func() { drip(c, *trickle, stop) })
	}
	places := func() (int, error) {
		var n int
		err := svc.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM contact_import_uploads WHERE tenant_id = 'bench_abuser'`).Scan(&n)
		return n, err
	}
	for {
		n, err := places()
		if err != nil {
			return err
		}
		if n == *uploads {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d uploads open: %w", n, *uploads, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Printf("%d slow uploads open (their places taken); request pool connections in use: %d\n",
		*uploads, svc.DB.Pool.Stat().AcquiredConns())
	abuse, abuseFailed, abuseReady, abuseNotReady := measure()
	still, err := places()
	if err != nil {
		return err
	}

	fmt.Println()
	fmt.Printf("GET /api/contacts/{id} of another tenant at %d/s, %v per phase:\n", *probeHz, *phase)
	fmt.Printf("  idle:                    %s, failed %d\n", percentiles(idle), idleFailed)
	fmt.Printf("  with %d slow uploads:    %s, failed %d\n", *uploads, percentiles(abuse), abuseFailed)
	fmt.Printf("/readyz at 5/s: idle %d ready, %d not; under abuse %d ready, %d not\n",
		idleReady, idleNotReady, abuseReady, abuseNotReady)
	fmt.Printf("slow uploads still open at the end: %d of %d\n", still, *uploads)
	fmt.Printf("load average after: %s\n", loadAvg())
	if len(idle) == 0 || len(abuse) == 0 {
		return errors.New("a phase had no answers")
	}
	ratio := float64(p99(abuse)) / float64(p99(idle))
	fmt.Printf("p99 ratio abuse/idle: %.2f (ceiling %.2f)\n", ratio, *ceiling)
	var errs []error
	if ratio > *ceiling {
		errs = append(errs, fmt.Errorf("p99 under abuse is %.2fx idle, above the ceiling %.2f", ratio, *ceiling))
	}
	if idleFailed+abuseFailed+idleNotReady+abuseNotReady > 0 {
		errs = append(errs, errors.New("a probe failed or /readyz was not ready"))
	}
	if still != *uploads {
		errs = append(errs, fmt.Errorf("%d slow uploads were cut during the measure: it did not measure %d", *uploads-still, *uploads))
	}
	return errors.Join(errs...)
}

// openSlowUpload sends an import's request head, a CSV header and a row,
// declaring a body of 1 MiB it will never send whole.
func openSlowUpload(addr, key string) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	head := "email\nslow@example.com\n"
	if _, err := fmt.Fprintf(c, "POST /api/contacts/import HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: text/csv\r\nContent-Length: %d\r\n\r\n%s", key, 1<<20, head); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// drip sends a byte every tick until stop closes.
func drip(c net.Conn, tick time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}
}

// probe calls ask at hz calls a second (open loop: each at its scheduled
// time, its latency from then) for d; it returns the latencies of the
// calls that answered as they should and how many did not.
func probe(ctx context.Context, hz int, d time.Duration, ask func(context.Context) bool) ([]time.Duration, int) {
	var mu sync.Mutex
	var out []time.Duration
	failed := 0
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(hz))
	defer tick.Stop()
	end := time.After(d)
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return out, failed
		case <-end:
			wg.Wait()
			return out, failed
		case at := <-tick.C:
			wg.Go(func() {
				ok := ask(ctx)
				mu.Lock()
				defer mu.Unlock()
				if ok {
					out = append(out, time.Since(at))
				} else {
					failed++
				}
			})
		}
	}
}

// getAnswers is a probe's call: GET target (with the key, if any),
// answered 200.
func getAnswers(client *http.Client, target, key string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

func p99(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(0.99*float64(len(s))))]
}

func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no answers"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	p := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return fmt.Sprintf("n=%d p50 %.2f ms, p99 %.2f ms, max %.2f ms", len(s), ms(p(0.5)), ms(p(0.99)), ms(s[len(s)-1]))
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
