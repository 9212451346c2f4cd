// Command importbench is the contact import benchmark (`make
// bench-import`, docs/benchmarks.md): it writes a CSV of -rows contacts,
// imports it end to end through the api (POST /api/contacts/import,
// streamed, to the progress resource saying completed; the import task
// runs on an asynq server with the worker's mux), then copies the same file
// with a bare COPY into an unindexed table of text columns, and prints both
// rates and their ratio. Meanwhile it asks for another tenant's contact at
// a fixed rate, idle and during the import, twice over: GET
// /api/contacts/{id} through the api, and its primary-key SELECT alone on
// a connection of its own; it prints the latency percentiles of each.
//
// It runs the api and the client in this process on loopback. The worker
// runs here too, or, with -worker-bin (what make bench-import passes), as
// its own process, as in production, so its garbage collector and
// goroutines are not the api's. It uses a database of its own (created,
// migrated, dropped at the end unless -keep) and a Redis database leased
// as the tests lease theirs (tidings:testlease:N), flushed before and
// after.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tidings/api"
	"tidings/bench/benchenv"
	"tidings/internal/app"
	"tidings/internal/auth"
	"tidings/internal/config"
	"tidings/internal/ratelimit"
	"tidings/worker"
)

var (
	rows      = flag.Int("rows", 1_000_000, "contacts in the file (at most 1,000,000, the import's limit)")
	probeHz   = flag.Int("probe-rate", 20, "GET requests a second of the other tenant")
	idleFor   = flag.Duration("idle", 10*time.Second, "how long the probe runs before the import (the idle latency)")
	pgAdmin   = flag.String("pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL admin URL")
	redisURL  = flag.String("redis", "redis://127.0.0.1:6379", "Redis server (a database of it is leased)")
	dbName    = flag.String("db", "tidings_bench_import", "the benchmark's database (dropped and created)")
	keep      = flag.Bool("keep", false, "keep the database and the file")
	timeout   = flag.Duration("timeout", 20*time.Minute, "bound on the whole run")
	chunk     = flag.Int("chunk", 0, "rows per chunk transaction (0: the service's default)")
	parts     = flag.Int("parts", 0, "parts an import's rows are processed in, side by side (0: the service's default)")
	cpuProf   = flag.String("cpuprofile", "", "write a CPU profile of the whole run (api, worker, client) to this file")
	workerBin = flag.String("worker-bin", "", "run the worker as this binary (bin/worker) in a process of its own, as production runs it, instead of in this process (-chunk, -parts and -cpuprofile then leave it alone)")
)

func main() {
	flag.Parse()
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "importbench:", err)
			os.Exit(1)
		}
	}
	err := run()
	pprof.StopCPUProfile() // a no-op without -cpuprofile
	if err != nil {
		fmt.Fprintln(os.Stderr, "importbench:", err)
		os.Exit(1)
	}
}

func run() error {
	if *rows < 1 || *rows > 1_000_000 {
		return errors.New("-rows must be 1-1000000")
	}
	if *workerBin != "" && (*chunk != 0 || *parts != 0) {
		return errors.New("-chunk and -parts set the worker of this process: add -worker-bin= to run it here")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The database and the Redis database.
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
	if !*keep {
		defer admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)") //nolint:errcheck
	}
	dbURL := strings.Replace(*pgAdmin, "/postgres?", "/"+*dbName+"?", 1)
	redisDB, release, err := benchenv.LeaseRedis(ctx, *redisURL, "importbench", time.Hour)
	if err != nil {
		return err
	}
	defer release()

	// The api and the worker, as cmd/api and cmd/worker build them.
	env := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisDB, "RATE_LIMIT_PER_MINUTE": "100000000",
		"DASHBOARD_JWT_SECRET": "bench-dashboard-secret", "TRACKING_SECRET": "bench-tracking-secret",
		"OUTBOX_DIR": os.TempDir()}
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
	svc.Imports.Chunk = *chunk
	svc.Imports.Parts = *parts
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
	if *workerBin == "" {
		srv := worker.NewServer(infra.AsynqOpt, log, cfg.WorkerConcurrency, worker.AllRoles)
		if err := srv.Start(worker.NewMux(svc)); err != nil {
			return err
		}
		defer srv.Shutdown()
	} else {
		stop, err := startWorker(*workerBin, env)
		if err != nil {
			return err
		}
		defer stop()
	}
	base := "http://" + ln.Addr().String()

	// The importing tenant (a paid plan: no contact limit) and another one
	// whose contact the probe reads.
	for _, t := range []string{"bench_importer", "bench_other"} {
		if _, err := svc.DB.Pool.Exec(ctx, `INSERT INTO tenants (id, name, plan) VALUES ($1, $1, 'pro')`, t); err != nil {
			return err
		}
	}
	impKey, err := svc.APIKeys.Create(ctx, "bench_importer", "bench")
	if err != nil {
		return err
	}
	otherKey, err := svc.APIKeys.Create(ctx, "bench_other", "bench")
	if err != nil {
		return err
	}
	var otherContact string
	if err := svc.DB.Pool.QueryRow(ctx, `INSERT INTO contacts (tenant_id, id, email) VALUES ('bench_other', 'cnt_probe', 'probe@example.com') RETURNING id`).Scan(&otherContact); err != nil {
		return err
	}

	// The file.
	dir, err := os.MkdirTemp("", "importbench")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	file := filepath.Join(dir, "contacts.csv")
	size, err := writeCSV(file, *rows)
	if err != nil {
		return err
	}
	fmt.Printf("file: %d rows, %.1f MiB (email,firstName,lastName,plan,city)\n", *rows, float64(size)/(1<<20))
	fmt.Printf("load average before: %s\n", loadAvg())

	// Two probes of the other tenant's contact: over HTTP through the api,
	// and the primary-key SELECT alone on a pool of its own (no HTTP, no
	// api), which tells a wait in PostgreSQL or for a core from one in the
	// service.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	sqlPool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer sqlPool.Close()
	asks := []func(context.Context) bool{
		getAnswers(client, base+"/api/contacts/"+otherContact, otherKey.Raw),
		func(ctx context.Context) bool {
			var id string
			return sqlPool.QueryRow(ctx, `SELECT id FROM contacts WHERE tenant_id = 'bench_other' AND id = $1`,
				otherContact).Scan(&id) == nil
		},
	}
	probe := func(d time.Duration, stop <-chan struct{}) [][]sample {
		out := make([][]sample, len(asks))
		var wg sync.WaitGroup
		for i, ask := range asks {
			wg.Go(func() { out[i] = probeLatency(ctx, *probeHz, d, stop, ask) })
		}
		wg.Wait()
		return out
	}

	// Idle latency, then the import with the probes running beside it.
	idle := probe(*idleFor, nil)
	stop := make(chan struct{})
	var during [][]sample
	var wg sync.WaitGroup
	wg.Go(func() { during = probe(*timeout, stop) })
	began := time.Now()
	upload, total, res, err := importFile(ctx, client, base, impKey.Raw, file)
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	if res.Status != "completed" || res.Created != int64(*rows) || res.Failed != 0 {
		return fmt.Errorf("import ended %+v", res)
	}
	fmt.Printf("load average after the import: %s\n", loadAvg())

	// The baseline: the same file, COPY into an unindexed table.
	copyTime, copied, err := bareCopy(ctx, dbURL, file)
	if err != nil {
		return err
	}
	importRate := float64(*rows) / total.Seconds()
	copyRate := float64(copied) / copyTime.Seconds()
	fmt.Println()
	fmt.Printf("import end to end (POST to completed): %d rows in %.2f s = %.0f rows/s (upload and staging %.2f s, processing %.2f s)\n",
		*rows, total.Seconds(), importRate, upload.Seconds(), (total - upload).Seconds())
	fmt.Printf("bare COPY of the same file into an unindexed table: %d rows in %.2f s = %.0f rows/s\n",
		copied, copyTime.Seconds(), copyRate)
	fmt.Printf("ratio import/COPY: %.3f\n", importRate/copyRate)
	staged, ended := began.Add(upload), began.Add(total)
	for i, name := range []string{"GET /api/contacts/{id} of another tenant", "its SELECT by primary key alone"} {
		fmt.Printf("%s at %d/s: idle %s; during the import %s\n", name, *probeHz,
			percentiles(latencies(idle[i], time.Time{}, began)), percentiles(latencies(during[i], began, ended)))
		fmt.Printf("  of which during the upload and staging %s; during the processing %s\n",
			percentiles(latencies(during[i], began, staged)), percentiles(latencies(during[i], staged, ended)))
	}
	return nil
}

// startWorker runs the worker binary with the api's environment (its
// admin listener on a free port, its log on this process's stderr) and
// returns what stops it: SIGTERM, then a wait for its drain.
func startWorker(bin string, env map[string]string) (func(), error) {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "WORKER_ADMIN_ADDR=127.0.0.1:0", "LOG_LEVEL=warn")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}, nil
}

// writeCSV writes n contacts with four properties.
func writeCSV(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	plans := []string{"free", "pro", "team"}
	cities := []string{"Paris", "Lyon", "Berlin", "Lisbon", "Oslo"}
	fmt.Fprintln(w, "email,firstName,lastName,plan,city")
	for i := range n {
		fmt.Fprintf(w, "user%07d@example.com,First%d,Last%d,%s,%s\n", i, i, i%9973, plans[i%3], cities[i%5])
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	return st.Size(), f.Close()
}

type progress struct {
	Status    string `json:"status"`
	Total     int64  `json:"total"`
	Processed int64  `json:"processed"`
	Created   int64  `json:"created"`
	Failed    int64  `json:"failed"`
}

// importFile posts the file (streamed from the disk) and asks for the
// import's progress every 100 ms until it has ended. It returns the time
// to the 202 and the time to the answer that says completed.
func importFile(ctx context.Context, client *http.Client, base, key, path string) (upload, total time.Duration, res progress, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, res, err
	}
	defer f.Close()
	st, _ := f.Stat()
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/contacts/import", f)
	req.ContentLength = st.Size()
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, res, err
	}
	var accepted struct {
		ImportID string `json:"importId"`
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &accepted) != nil {
		return 0, 0, res, fmt.Errorf("POST /api/contacts/import: %d %s", resp.StatusCode, raw)
	}
	upload = time.Since(start)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/contacts/import/"+accepted.ImportID, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return 0, 0, res, err
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(raw, &res); err != nil {
			return 0, 0, res, fmt.Errorf("progress: %d %s", resp.StatusCode, raw)
		}
		if res.Status != "running" {
			return upload, time.Since(start), res, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, res, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sample is one probe request: when it was sent, how long its answer took.
type sample struct {
	at time.Time
	d  time.Duration
}

// latencies are the samples' durations, of those sent in [from, to).
func latencies(ss []sample, from, to time.Time) []time.Duration {
	var out []time.Duration
	for _, s := range ss {
		if !s.at.Before(from) && s.at.Before(to) {
			out = append(out, s.d)
		}
	}
	return out
}

// probeLatency calls ask at hz calls a second (open loop: each at its
// scheduled time, its latency from then) for d or until stop closes, and
// returns the samples of the calls that answered as they should.
func probeLatency(ctx context.Context, hz int, d time.Duration, stop <-chan struct{}, ask func(context.Context) bool) []sample {
	var mu sync.Mutex
	var out []sample
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(hz))
	defer tick.Stop()
	end := time.After(d)
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return out
		case <-stop:
			wg.Wait()
			return out
		case <-end:
			wg.Wait()
			return out
		case at := <-tick.C:
			wg.Go(func() {
				if ask(ctx) {
					mu.Lock()
					out = append(out, sample{at, time.Since(at)})
					mu.Unlock()
				}
			})
		}
	}
}

// getAnswers is a probe's call: GET target with the key, answered 200.
func getAnswers(client *http.Client, target, key string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no answers"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	p := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return fmt.Sprintf("n=%d p50 %.1f ms, p99 %.1f ms, max %.1f ms", len(s), ms(p(0.5)), ms(p(0.99)), ms(s[len(s)-1]))
}

// bareCopy copies the file with COPY ... FROM STDIN (CSV, HEADER) into a
// new table of five text columns without an index or key: the fastest way
// the same rows get into PostgreSQL.
func bareCopy(ctx context.Context, dbURL, path string) (time.Duration, int64, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE TABLE bare_import (email text, first_name text, last_name text, plan text, city text)`); err != nil {
		return 0, 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	start := time.Now()
	tag, err := conn.PgConn().CopyFrom(ctx, f, `COPY bare_import FROM STDIN WITH (FORMAT csv, HEADER true)`)
	if err != nil {
		return 0, 0, err
	}
	return time.Since(start), tag.RowsAffected(), nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
