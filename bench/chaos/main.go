// Command chaos is the fault run of issues 15 and 35 (`make chaos`): a
// workload of drips, a windowed sequence, transactional and batch sends
// with Idempotency-Keys (and client retries of the same key), broadcasts
// paused, resumed and cancelled, topic opt-outs, suppressions and contacts
// deleted mid-flight, under a shared provider rate and a tenant frequency
// cap, against 2 api and several worker processes (bin/api, bin/worker)
// on one PostgreSQL and one Redis (or a Redis Cluster with -cluster), with
// a fake SendGrid in this process that answers at random (202, 429, 4xx,
// 5xx, a hang past PROVIDER_TIMEOUT, a cut connection), while it kills
// workers and api processes with SIGKILL, flushes Redis, cuts every
// PostgreSQL connection of the run and restarts PostgreSQL.
//
// Then it lets the system settle and hands the facts (what the fake
// received, the database's rows, what the clients were told) to the
// oracle (oracle.go), which judges by what the provider actually took;
// it prints each check's count and exits 1 when any check fails.
// `-check FILE` judges saved facts again; `-selftest` plants a duplicate,
// a loss and a lying status in a short run and exits 0 only if the oracle
// catches every one and passes the clean run (selftest.go).
//
// Everything runs on loopback, in a database of its own that is dropped at
// the end, on Redis database 13 (flushed; other tests use others),
// bounded by -timeout. Random choices (fault order and targets, workload
// picks, the provider's answers) come from -seed.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

const (
	jwtSecret = "chaos-dashboard-secret"
	org       = "org_chaos"
	// ratePerSecond is PROVIDER_RATE_PER_SECOND for the run: below what
	// the workload offers at its peaks, so the bucket is exercised.
	ratePerSecond = 40
	// capPerDay is the tenant's frequency cap: a drip (3) and a windowed
	// sequence (2) fit; the broadcasts past it are skipped.
	capPerDay = 8
	// grace is how long after an opt-out, or a window's end, a message
	// already past its last check may still reach the provider (its claim,
	// the rate's wait, a 429's hold).
	grace = 10 * time.Second
)

var (
	duration   = flag.Duration("d", 90*time.Second, "workload duration")
	timeout    = flag.Duration("timeout", 12*time.Minute, "hard bound on the whole run")
	seed       = flag.Int64("seed", 1, "seed of every random choice (faults, workload, the provider's answers)")
	pgRestart  = flag.Bool("pg-restart", true, "restart PostgreSQL once mid-run (pg_ctlcluster; disturbs anything else using it)")
	faultsOn   = flag.Bool("faults", true, "inject process, Redis and PostgreSQL faults (the provider's faults stay)")
	cluster    = flag.Bool("cluster", false, "run on a three-node Redis Cluster started on loopback (no Redis flush faults)")
	workers    = flag.Int("workers", 2, "all-role worker processes (ignored with -roles)")
	roles      = flag.String("roles", "", `worker processes by role group: comma between processes, + between roles of one (e.g. "sends,sends,webhooks+maintenance,segments+domains+imports"); each gets WORKER_ROLES`)
	optOuts    = flag.Bool("optouts", true, "opt contacts out mid-flight: topic opt-outs, suppressions, deletions (their messages race them)")
	nContacts  = flag.Int("contacts", 400, "contacts of the tenant")
	keep       = flag.Bool("keep", false, "keep the database and logs")
	failover   = flag.Bool("failover", true, "a pool of two providers (PROVIDERS=sendgrid,smtp: the fake SendGrid, then a fake SMTP server) and the fault provider-outage (SendGrid refuses everything for a while)")
	redisDB    = flag.Int("redis-db", 13, "the Redis database of the run (flushed at start and by its faults); runs side by side need one each, and -out each")
	outDir     = flag.String("out", "var/chaos", "logs of the processes and the facts")
	binDir     = flag.String("bin", "bin", "where bin/api and bin/worker are")
	pgAdmin    = flag.String("pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL admin URL")
	factsOut   = flag.String("facts", "", "write the run's facts as JSON here (default OUT/facts.json)")
	checkFile  = flag.String("check", "", "judge the facts in this file and exit (no run)")
	selfTestOn = flag.Bool("selftest", false, "run the oracle's self-test: a short clean run, then planted anomalies")
)

func main() {
	flag.Parse()
	if *checkFile != "" {
		os.Exit(checkOnly(*checkFile))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r := &run{rng: rand.New(rand.NewPCG(uint64(*seed), 35))}
	code := 0
	var err error
	if *selfTestOn {
		err = r.selfTest(ctx)
	} else {
		err = r.main(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		code = 1
	}
	r.cleanup()
	os.Exit(code)
}

// checkOnly judges saved facts: 0 when every check passes, 1 otherwise.
func checkOnly(path string) int {
	raw, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	var f Facts
	if err := json.Unmarshal(raw, &f); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", path, err)
		return 2
	}
	fmt.Printf("chaos: judging %s (seed %d, %d provider requests)\n", path, f.Seed, len(f.Requests))
	if n := Report(printf, Check(&f)); n > 0 {
		fmt.Printf("chaos: %d checks failed\n", n)
		return 1
	}
	fmt.Println("chaos: every check passed")
	return 0
}

func printf(format string, args ...any) { fmt.Printf(format, args...) }

type run struct {
	dbName, dbURL, redisURL string
	leased                  string // the Redis lease key to give back (leaseRedisDB)
	fake                    *fakeSendGrid
	smtp                    *fakeSMTP // the pool's second provider (-failover)
	procs                   map[string]*proc
	workerNames             []string
	mu                      sync.Mutex
	rng                     *rand.Rand // guarded by mu
	key                     string
	segment                 string
	hooks                   *receiver
	apis                    []string // base URLs
	faults                  map[string]int
	// kills are the SIGKILLs sent, in order: the oracle's evidence.
	kills        []Kill
	clusterNodes []*exec.Cmd
	// contactIDs maps each contact's email to its id.
	contactIDs map[string]string
	window     *WindowFact
	// closing: cleanup has begun; nothing is started again.
	closing bool
}

type proc struct {
	name string
	bin  string
	env  []string
	cmd  *exec.Cmd
	log  *os.File
	// down: the process was stopped on purpose and is not to be
	// restarted until its hold ends.
	down bool
	// alive: cmd has not exited (set and cleared under run.mu), so two
	// faults on one process never start two of it.
	alive bool
}

// intn is a seeded random choice.
func (r *run) intn(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(n)
}

// boot starts the fake, the database, Redis and the processes, and sets up
// the tenant.
func (r *run) boot(ctx context.Context) error {
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	r.faults = map[string]int{}
	r.hooks = newReceiver()
	if err := r.hooks.start(); err != nil {
		return err
	}
	r.fake = newFake(*seed)
	fakeURL, err := r.fake.start()
	if err != nil {
		return err
	}
	var pool []string
	if *failover {
		r.smtp = &fakeSMTP{log: r.fake}
		addr, err := r.smtp.start()
		if err != nil {
			return err
		}
		// The circuit half-opens within the run's outages.
		pool = []string{"PROVIDERS=sendgrid,smtp", "SMTP_URL=smtp://" + addr + "?tls=none", "PROVIDER_RETRY_AFTER=3s"}
	}
	if err := r.freshDB(ctx); err != nil {
		return err
	}
	if *cluster {
		if r.redisURL, err = r.startCluster(ctx); err != nil {
			return err
		}
	} else {
		r.redisURL = fmt.Sprintf("redis://127.0.0.1:6379/%d", *redisDB)
		r.leaseRedisDB(ctx)
		if err := r.flushRedis(ctx); err != nil {
			return err
		}
	}
	env := []string{"DATABASE_URL=" + r.dbURL, "REDIS_URL=" + r.redisURL, fmt.Sprintf("REDIS_CLUSTER=%v", *cluster),
		"EMAIL_PROVIDER=sendgrid", "SENDGRID_API_KEY=SG.chaos", "SENDGRID_API_URL=" + fakeURL,
		"TRACKING_SECRET=chaos-tracking-secret", "DASHBOARD_JWT_SECRET=" + jwtSecret,
		// Public secrets and tokens without iss/aud: development only
		// (config.Secure); each api's admin listener on a port of its own.
		"DEV_MODE=true", "API_ADMIN_ADDR=127.0.0.1:0",
		"WEBHOOK_ALLOW_PRIVATE_TARGETS=true", "WEBHOOK_RETRY_SCHEDULE=1s,2s,5s,10s,10s,10s",
		"RATE_LIMIT_PER_MINUTE=1000000", "PROVIDER_TIMEOUT=3s", "SEND_ATTEMPT_TIMEOUT=8s", "SEND_CLAIM_TIMEOUT=30s", "LOG_LEVEL=warn",
		fmt.Sprintf("PROVIDER_RATE_PER_SECOND=%d", ratePerSecond),
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	env = append(env, pool...)
	r.procs = map[string]*proc{}
	for i := 1; i <= 2; i++ {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort())
		r.apis = append(r.apis, "http://"+addr)
		r.procs[fmt.Sprintf("api%d", i)] = &proc{name: fmt.Sprintf("api%d", i), bin: filepath.Join(*binDir, "api"),
			env: append(append([]string{}, env...), "HTTP_ADDR="+addr, fmt.Sprintf("MIGRATE=%v", i == 1))}
	}
	for name, rolesOf := range workerGroups(*roles, *workers) {
		e := append(append([]string{}, env...), fmt.Sprintf("WORKER_ADMIN_ADDR=127.0.0.1:%d", freePort()))
		if rolesOf != "" {
			e = append(e, "WORKER_ROLES="+rolesOf)
		}
		r.procs[name] = &proc{name: name, bin: filepath.Join(*binDir, "worker"), env: e}
		r.workerNames = append(r.workerNames, name)
	}
	sort.Strings(r.workerNames)
	for _, name := range append([]string{"api1", "api2"}, r.workerNames...) {
		if err := r.start(name); err != nil {
			return err
		}
		if strings.HasPrefix(name, "api") {
			if err := waitHTTP(ctx, r.apiURL(name)+"/readyz", 60*time.Second); err != nil {
				return fmt.Errorf("%s not ready: %w (see %s)", name, err, r.procs[name].log.Name())
			}
		}
	}
	if err := r.setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	fmt.Printf("chaos: seed %d, workload %v on 2 api + %d worker processes (%s), fake SendGrid %s\n",
		*seed, *duration, len(r.workerNames), r.redisURL, fakeURL)
	return nil
}

// workerGroups names the worker processes: with spec ("sends,webhooks+
// maintenance"), one per comma-separated group with WORKER_ROLES set to
// its roles; without, n all-role workers (WORKER_ROLES unset).
func workerGroups(spec string, n int) map[string]string {
	out := map[string]string{}
	if strings.TrimSpace(spec) == "" {
		for i := 1; i <= n; i++ {
			out[fmt.Sprintf("worker%d", i)] = ""
		}
		return out
	}
	count := map[string]int{}
	for _, g := range strings.Split(spec, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		label := strings.ReplaceAll(g, "+", "-")
		count[label]++
		out[fmt.Sprintf("worker-%s-%d", label, count[label])] = strings.ReplaceAll(g, "+", ",")
	}
	return out
}

// main is a whole fault run: boot, workload with faults, settle, judge.
func (r *run) main(ctx context.Context) error {
	if err := r.boot(ctx); err != nil {
		return err
	}
	w := r.runWorkload(ctx, *faultsOn)
	facts, err := r.settleAndGather(ctx, w)
	if err != nil {
		return err
	}
	if err := r.saveFacts(facts, r.factsPath("facts.json")); err != nil {
		return err
	}
	fmt.Println("chaos: reconciliation (the oracle over what the fake provider received)")
	results := Check(facts)
	failed := Report(printf, results)
	r.summary(w, facts)
	if failed > 0 {
		return fmt.Errorf("reconciliation failed: %d checks (facts in %s; judge again with -check)", failed, r.factsPath("facts.json"))
	}
	return nil
}

func (r *run) factsPath(name string) string {
	if *factsOut != "" && name == "facts.json" {
		return *factsOut
	}
	return filepath.Join(*outDir, name)
}

func (r *run) saveFacts(f *Facts, path string) error {
	raw, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// runWorkload runs the workload (and the faults) for -d and brings back
// every process for the settle.
func (r *run) runWorkload(ctx context.Context, faults bool) *workload {
	w := newWorkload(r)
	wctx, stopLoad := context.WithTimeout(ctx, *duration)
	defer stopLoad()
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { w.events(wctx, i) })
	}
	for i := range 2 {
		wg.Go(func() { w.sends(wctx, i) })
	}
	wg.Go(func() { w.batches(wctx) })
	wg.Go(func() { w.broadcasts(wctx) })
	if *optOuts {
		wg.Go(func() { w.consent(wctx) })
	}
	if faults {
		wg.Go(func() { r.inject(wctx) })
	}
	wg.Wait()
	r.mu.Lock()
	for _, p := range r.procs {
		p.down = false
	}
	r.mu.Unlock()
	for name := range r.procs { // a process killed at the very end comes back for the settle
		_ = r.start(name)
	}
	w.resumePaused(ctx)
	fmt.Printf("chaos: workload done: %d events, %d transactional and %d batch messages, %d broadcasts, %d opt-outs; %d requests failed (retried or given up)\n",
		len(w.eventIDs), w.txUnits, w.batchUnits, len(w.broadcastIDs), len(w.consentDone), w.failed.Load())
	return w
}

func (r *run) summary(w *workload, f *Facts) {
	faults, kinds := 0, []string{}
	r.mu.Lock()
	for k, n := range r.faults {
		faults += n
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	r.mu.Unlock()
	sort.Strings(kinds)
	answers := map[string]int{}
	for _, q := range f.Requests {
		answers[q.Answer]++
	}
	var as []string
	for k, n := range answers {
		as = append(as, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(as)
	fmt.Printf("chaos: seed %d; %d faults injected (%s)\n", *seed, faults, strings.Join(kinds, ", "))
	fmt.Printf("chaos: provider: %d requests (%s)\n", len(f.Requests), strings.Join(as, ", "))
	fmt.Printf("chaos: workload: %d events, %d transactional + %d batch messages (%d batches), %d broadcasts (%d A/B, %d paused, %d cancelled), %d scheduled sends, %d recipients, opt-outs %v\n",
		len(w.eventIDs), w.txUnits, w.batchUnits, w.batchCount, len(w.broadcastIDs), w.abTests, w.paused, w.cancelled,
		len(f.Scheduled), len(f.Recipients), w.consentKinds())
}

func (r *run) apiURL(name string) string {
	if name == "api2" {
		return r.apis[1]
	}
	return r.apis[0]
}

func (r *run) freshDB(ctx context.Context) error {
	r.dbName = fmt.Sprintf("tidings_chaos_%d_%d", time.Now().Unix(), os.Getpid())
	c, err := pgx.Connect(ctx, *pgAdmin)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+r.dbName); err != nil {
		return err
	}
	r.dbURL = strings.Replace(*pgAdmin, "/postgres?", "/"+r.dbName+"?", 1)
	return nil
}

func (r *run) flushRedis(ctx context.Context) error {
	opt, err := redis.ParseURL(r.redisURL)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	return c.FlushDB(ctx).Err()
}

func (r *run) start(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.procs[name]
	if p.down || p.alive || r.closing {
		return nil
	}
	if p.log == nil {
		f, err := os.Create(filepath.Join(*outDir, name+".log"))
		if err != nil {
			return err
		}
		p.log = f
	}
	cmd := exec.Command(p.bin)
	cmd.Env, cmd.Stdout, cmd.Stderr = p.env, p.log, p.log
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd, p.alive = cmd, true
	go func() {
		_ = cmd.Wait()
		r.mu.Lock()
		if p.cmd == cmd {
			p.alive = false
		}
		r.mu.Unlock()
	}()
	return nil
}

// kill sends SIGKILL to the named process and, unless hold, starts it
// again after a moment; with hold it stays down for that long (a role with
// no process running, ADDENDUM 26).
func (r *run) kill(ctx context.Context, name string, hold time.Duration) {
	r.mu.Lock()
	p := r.procs[name]
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		r.kills = append(r.kills, Kill{Process: name, At: time.Now()})
	}
	if hold > 0 {
		p.down = true
	}
	r.mu.Unlock()
	sleep(ctx, 700*time.Millisecond+hold)
	if hold > 0 {
		r.mu.Lock()
		p.down = false
		r.mu.Unlock()
	}
	if err := r.start(name); err != nil {
		fmt.Fprintln(os.Stderr, "restart", name, err)
	}
}

func (r *run) killsSoFar() []Kill {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Kill(nil), r.kills...)
}

// inject runs the faults, one every 2-3 s, in a seeded order, until the
// workload ends.
func (r *run) inject(ctx context.Context) {
	kinds := []string{"kill-worker", "kill-worker", "flush-redis", "kill-api", "pg-terminate", "kill-worker", "kill-api"}
	if *cluster {
		kinds = []string{"kill-worker", "kill-api", "kill-worker", "pg-terminate"}
	}
	if *roles != "" {
		kinds = append(kinds, "kill-role", "absent-role")
	}
	if *failover {
		kinds = append(kinds, "provider-outage")
	}
	pgAt := time.Now().Add(*duration / 2)
	for ctx.Err() == nil {
		if !sleep(ctx, 2*time.Second+time.Duration(r.intn(1000))*time.Millisecond) {
			return
		}
		if *pgRestart && time.Now().After(pgAt) && r.faults["restart-postgres"] == 0 {
			if err := exec.CommandContext(ctx, "pg_ctlcluster", "15", "main", "restart").Run(); err != nil {
				fmt.Fprintln(os.Stderr, "restart postgres:", err)
			} else {
				r.count("restart-postgres")
			}
			continue
		}
		switch k := kinds[r.intn(len(kinds))]; k {
		case "kill-worker", "kill-role":
			// With -roles every worker is one role group: killing one
			// kills that role (or those roles) alone.
			r.kill(ctx, r.workerNames[r.intn(len(r.workerNames))], 0)
			r.count(k)
		case "absent-role":
			// A role group left with no process for a while: its tasks
			// wait in its queues. Killed in the background, so the other
			// faults go on meanwhile.
			name := r.workerNames[r.intn(len(r.workerNames))]
			r.count(k)
			go r.kill(ctx, name, 10*time.Second)
		case "kill-api":
			r.kill(ctx, fmt.Sprintf("api%d", 1+r.intn(2)), 0)
			r.count(k)
		case "flush-redis":
			if err := r.flushRedis(ctx); err == nil {
				r.count(k)
			}
		case "provider-outage":
			// SendGrid refuses everything for a few seconds: the pool's
			// circuits move messages to SMTP at once, and back once the
			// circuit half-opens after the outage. Nothing may be lost or
			// sent by both.
			if r.fake.outage.CompareAndSwap(false, true) {
				r.count(k)
				d := time.Duration(4+r.intn(6)) * time.Second
				go func() {
					sleep(ctx, d)
					r.fake.outage.Store(false)
				}()
			}
		case "pg-terminate":
			// PostgreSQL briefly unreachable: every connection of the run's
			// database is cut, mid-transaction or not.
			if err := r.terminateBackends(ctx); err == nil {
				r.count(k)
			}
		}
	}
}

func (r *run) terminateBackends(ctx context.Context) error {
	db, err := pgx.Connect(ctx, *pgAdmin)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	_, err = db.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()`, r.dbName)
	return err
}

func (r *run) count(kind string) {
	r.mu.Lock()
	r.faults[kind]++
	r.mu.Unlock()
}

// call makes an API request to base with the tenant's key. The answer's
// body is decoded into out for a 2xx and returned raw in the error
// otherwise.
func (r *run) call(ctx context.Context, base, method, path string, body any, hdr map[string]string, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	tok := r.key
	if v, ok := hdr["Authorization"]; ok {
		tok = v
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range hdr {
		if k != "Authorization" {
			req.Header.Set(k, v)
		}
	}
	res, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode < 300 {
		_ = json.Unmarshal(raw, out)
	}
	if res.StatusCode >= 300 {
		return res.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return res.StatusCode, nil
}

var httpClient = &http.Client{Timeout: 15 * time.Second}

// inDoubtSendID is the send a 502 in doubt names, "" for any other error.
func inDoubtSendID(err error) string {
	msg := err.Error()
	i := strings.Index(msg, "{")
	if i < 0 || !strings.Contains(msg, ": 502 ") {
		return ""
	}
	var body struct {
		Error struct {
			Details struct {
				SendID  string `json:"sendId"`
				InDoubt bool   `json:"inDoubt"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(msg[i:]), &body) != nil || !body.Error.Details.InDoubt {
		return ""
	}
	return body.Error.Details.SendID
}

// cleanup stops every process, the fake and the cluster, and drops the
// run's database unless -keep.
func (r *run) cleanup() {
	r.mu.Lock()
	r.closing = true
	for _, p := range r.procs {
		if p.cmd != nil && p.cmd.Process != nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	r.mu.Unlock()
	time.Sleep(2 * time.Second)
	r.mu.Lock()
	for _, p := range r.procs {
		if p.cmd != nil && p.cmd.Process != nil {
			_ = p.cmd.Process.Kill()
		}
		if p.log != nil {
			_ = p.log.Close()
		}
	}
	r.mu.Unlock()
	for _, c := range r.clusterNodes {
		_ = c.Process.Kill()
	}
	if r.fake != nil {
		r.fake.stop()
	}
	if r.smtp != nil {
		r.smtp.stop()
	}
	if r.leased != "" {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
		c.Del(context.Background(), r.leased)
		_ = c.Close()
	}
	if r.dbName != "" && !*keep {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, *pgAdmin); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+r.dbName+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	}
}

var errGaveUp = errors.New("gave up")

// startCluster starts three redis-server nodes in cluster mode on loopback
// and joins them (as testenv.RedisCluster does for the tests).
func (r *run) startCluster(ctx context.Context) (string, error) {
	dir, err := os.MkdirTemp("", "tidings-chaos-cluster")
	if err != nil {
		return "", err
	}
	var addrs []string
	for range 3 {
		port := freePort()
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", fmt.Sprintf("nodes-%d.conf", port), "--save", "", "--appendonly", "no", "--dir", dir)
		if err := cmd.Start(); err != nil {
			return "", err
		}
		r.clusterNodes = append(r.clusterNodes, cmd)
		addrs = append(addrs, addr)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for i := 0; c.Ping(ctx).Err() != nil; i++ {
			if i > 100 {
				return "", fmt.Errorf("redis node %s did not start", a)
			}
			sleep(ctx, 100*time.Millisecond)
		}
		_ = c.Close()
	}
	if out, err := exec.CommandContext(ctx, "redis-cli", append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for i := 0; ; i++ {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if i > 200 {
				return "", fmt.Errorf("cluster not ok at %s", a)
			}
			sleep(ctx, 100*time.Millisecond)
		}
		_ = c.Close()
	}
	return "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2], nil
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitHTTP(ctx context.Context, url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready within %v", url, d)
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// sleep waits d unless ctx ends first; it reports whether it slept.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// leaseRedisDB takes the run's Redis database from the tests' pool of
// databases (testenv.RedisDB leases 1-15 with tidings:testlease:N in
// database 0), so that a test running beside the fault run never shares
// the database the run flushes. It waits up to a minute for a test to
// give it back, then goes on with a warning; the lease lasts the run.
func (r *run) leaseRedisDB(ctx context.Context) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	key := fmt.Sprintf("tidings:testlease:%d", *redisDB)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		ok, err := c.SetNX(ctx, key, "chaos", *timeout+5*time.Minute).Result()
		if ok {
			r.leased = key
		}
		if err != nil || ok {
			return
		}
		if time.Now().After(deadline) {
			fmt.Printf("chaos: Redis database %d is leased by a test; using it anyway\n", *redisDB)
			return
		}
	}
}
