// Command roles is the worker-roles isolation benchmark (`make
// bench-roles`, docs/benchmarks.md, ADDENDUM 26): does a segment compute
// over a large tenant make due sends late?
//
// One tenant has -contacts contacts (1,000,000 by default) and a segment
// over them; another tenant has sequence steps falling due, -rate a second
// for -window, each second's batch due at that whole second (their timers
// set as the engine sets them: one dispatch task a second). The same
// schedule runs three ways, -repeat times in alternation (alone,
// separate, one process, alone, ...: a noisy machine's slow minute then
// falls on every way alike), each on worker processes started from the
// built binaries (-bin), each against fresh rows:
//
//   - alone: bin/worker-sends drains; nothing computes (the baseline);
//   - separate: bin/worker-sends drains while bin/worker-segments computes
//     the big segment over and over (a new compute queued as soon as none
//     waits);
//   - one process: bin/worker with every role does both.
//
// A maintenance process (bin/worker, WORKER_ROLES=maintenance) runs beside
// the first two, as a deployment's would; the third has it inside. It
// prints each run's lateness (sends.sent_at − the step's due time, from
// the database: p50, p99, max), the computes finished and the CPU seconds
// each worker process used, and the ratios to the baseline's p99 of the
// same repetition; it exits 1 when the median of the separate runs' ratios
// is above -ceiling (1.2).
//
// The compute is two data-modifying SQL statements (INSERT ... SELECT,
// DELETE), which PostgreSQL never runs with parallel workers: its CPU is
// one database backend's, not the segments process's (which waits on
// them), and PostgreSQL is shared by every role. On one machine the OS
// shares its cores between the database's backends and every process, so
// what roles can isolate is their processes and queues, not the
// database's CPU. With -cap (the default) the separate segments process
// runs with GOMAXPROCS=1 under nice 10, as docs/operations.md recommends
// where it shares a host with the sends; the CPU column shows what that
// process uses (under a second a run).
//
// It uses a database of its own (created, migrated, dropped at the end
// unless -keep), a Redis database leased as the tests lease theirs, and a
// fake SendGrid on loopback.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"tidings/bench/benchenv"
	"tidings/internal/app"
	"tidings/internal/config"
	"tidings/internal/segments"
	"tidings/internal/sequences/definition"
	"tidings/internal/tasks"
	"tidings/internal/templates"
)

var (
	contacts = flag.Int("contacts", 1_000_000, "contacts of the tenant whose segment is computed")
	rate     = flag.Int("rate", 100, "sends falling due a second")
	window   = flag.Duration("window", 60*time.Second, "how long sends fall due in each run")
	repeat   = flag.Int("repeat", 3, "repetitions of the three runs, in alternation")
	capSeg   = flag.Bool("cap", true, "run the separate segments process with GOMAXPROCS=1 under nice 10")
	binDir   = flag.String("bin", "bin", "directory of the built worker binaries")
	pgAdmin  = flag.String("pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL admin URL")
	redisURL = flag.String("redis", "redis://127.0.0.1:6379", "Redis server (a database of it is leased)")
	dbName   = flag.String("db", "tidings_bench_roles", "the benchmark's database (dropped and created)")
	keep     = flag.Bool("keep", false, "keep the database and the process logs")
	ceiling  = flag.Float64("ceiling", 1.2, "highest allowed ratio of the separate run's p99 lateness to the baseline's")
	timeout  = flag.Duration("timeout", 60*time.Minute, "bound on the whole run")
)

const (
	segTenant  = "bench_segments"
	sendTenant = "bench_sends"
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "roles:", err)
		os.Exit(1)
	}
}

// result is one run's figures.
type result struct {
	name           string
	rep            int
	sends          int
	p50, p99, max  float64 // seconds
	computes       int64
	computeSeconds float64 // mean
	cpu            []string
}

// proc is one worker process of a run: its binary, WORKER_ROLES, and
// whether it runs the segments role.
type proc struct {
	binary, roles string
	segments      bool
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, b := range []string{"worker", "worker-sends", "worker-segments"} {
		if _, err := os.Stat(filepath.Join(*binDir, b)); err != nil {
			return fmt.Errorf("%v: make build first (or -bin DIR)", err)
		}
	}

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
	redisDB, release, err := benchenv.LeaseRedis(ctx, *redisURL, "bench-roles", 2*time.Hour)
	if err != nil {
		return err
	}
	defer release()
	sg := fakeSendGrid()
	defer sg.Close()
	logs, err := os.MkdirTemp("", "bench-roles")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(logs)
	}

	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	env := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisDB, "EMAIL_PROVIDER": "sendgrid",
		"SENDGRID_API_URL": sg.URL, "SENDGRID_API_KEY": "SG.bench", "TRACKING_SECRET": hex.EncodeToString(secret),
		"SEGMENT_COMPUTE_INTERVAL": "1ms", "LOG_LEVEL": "warn", "OUTBOX_DIR": logs}
	cfg, err := config.FromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return err
	}
	// This process migrates the database (as the api does) and writes the
	// fixtures; the workers are the binaries.
	infra, err := app.Open(ctx, cfg, log, app.RoleAPI)
	if err != nil {
		return err
	}
	defer infra.Close()
	svc, err := app.New(infra.Infra)
	if err != nil {
		return err
	}
	b := &bench{ctx: ctx, svc: svc, env: env, logs: logs}
	segID, err := b.setup()
	if err != nil {
		return err
	}

	ways := []struct {
		name    string
		procs   []proc
		compute bool
	}{
		{"alone", []proc{{"worker-sends", "", false}, {"worker", "maintenance", false}}, false},
		{"separate", []proc{{"worker-sends", "", false}, {"worker-segments", "", true}, {"worker", "maintenance", false}}, true},
		{"one process", []proc{{"worker", "all", true}}, true},
	}
	var results []result
	ratios := map[string][]float64{}
	for rep := 1; rep <= *repeat; rep++ {
		var base float64
		for _, w := range ways {
			res, err := b.round(len(results)+1, w.name, w.procs, w.compute, segID)
			if err != nil {
				return fmt.Errorf("%s: %w (process logs in %s)", w.name, err, logs)
			}
			res.rep = rep
			if w.compute {
				ratios[w.name] = append(ratios[w.name], res.p99/base)
			} else {
				base = res.p99
			}
			results = append(results, res)
			fmt.Fprintf(os.Stderr, "%d %s: %d sends, p50 %.0f ms, p99 %.0f ms, max %.0f ms, %d computes, cpu %s\n",
				rep, res.name, res.sends, res.p50*1000, res.p99*1000, res.max*1000, res.computes, strings.Join(res.cpu, " "))
		}
	}

	fmt.Printf("\nroles benchmark: %d contacts computed, %d sends/s due for %v, each second's batch at its whole second, "+
		"%d repetitions, cap %v\n\n", *contacts, *rate, *window, *repeat, *capSeg)
	fmt.Println("| rep | run | sends | p50 late ms | p99 late ms | max late ms | p99 / alone | computes finished (s apart) | worker CPU s |")
	fmt.Println("|---:|---|---:|---:|---:|---:|---:|---:|---|")
	var base float64
	for _, r := range results {
		if r.name == "alone" {
			base = r.p99
		}
		fmt.Printf("| %d | %s | %d | %.0f | %.0f | %.0f | %.2f | %d (%.1f) | %s |\n", r.rep, r.name, r.sends, r.p50*1000,
			r.p99*1000, r.max*1000, r.p99/base, r.computes, r.computeSeconds, strings.Join(r.cpu, ", "))
	}
	for _, name := range []string{"separate", "one process"} {
		fmt.Printf("\n%s: p99 / alone by repetition %s, median %.2fx", name, fmtRatios(ratios[name]), median(ratios[name]))
	}
	sep := median(ratios["separate"])
	fmt.Printf("\n\nseparate processes: median p99 lateness %.2fx the drain alone (ceiling %.2fx): ", sep, *ceiling)
	if sep > *ceiling {
		fmt.Println("ABOVE THE CEILING")
		return errors.New("the separate runs' p99 lateness is above the ceiling")
	}
	fmt.Println("within")
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

type bench struct {
	ctx  context.Context
	svc  *app.Services
	env  map[string]string
	logs string
	step string // the drain sequence's one step
}

func (b *bench) exec(sql string, args ...any) error {
	_, err := b.svc.DB.Pool.Exec(b.ctx, sql, args...)
	return err
}

// setup writes both tenants and computes the segment once, so every run
// computes the same steady membership.
func (b *bench) setup() (string, error) {
	start := time.Now()
	if err := b.exec(`INSERT INTO tenants (id, name, plan) VALUES ($1, 'Segments', 'pro')`, segTenant); err != nil {
		return "", err
	}
	if err := b.exec(`INSERT INTO contacts (tenant_id, id, email, properties)
		SELECT $1, 'cnt_' || g, 'c' || g || '@example.com',
			jsonb_build_object('plan', CASE WHEN g % 3 = 0 THEN 'pro' ELSE 'free' END, 'score', g % 100)
		FROM generate_series(1, $2::int) g`, segTenant, *contacts); err != nil {
		return "", err
	}
	if err := b.exec(`ANALYZE contacts`); err != nil {
		return "", err
	}
	name := "Engaged pro"
	seg, err := b.svc.Segments.Create(b.ctx, segTenant, segments.Input{Name: &name, Rules: json.RawMessage(
		`{"operator": "and", "conditions": [{"type": "property", "field": "plan", "operator": "equals", "value": "pro"},
		{"type": "property", "field": "score", "operator": "greaterThan", "value": 10}]}`)})
	if err != nil {
		return "", err
	}
	res, err := b.svc.Segments.Compute(b.ctx, segTenant, seg.ID)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "setup: %d contacts, first compute %d members changed, %v\n", *contacts, res.Changed,
		time.Since(start).Round(time.Second))

	if err := b.exec(`INSERT INTO tenants (id, name, sending_status, default_from_address, plan)
		VALUES ($1, 'Sends', 'enabled', 'News <news@bench.example>', 'pro')`, sendTenant); err != nil {
		return "", err
	}
	if err := b.exec(`INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
		VALUES ($1, 'bench.example', 'verified', true, 't', '{a,b,c}')`, sendTenant); err != nil {
		return "", err
	}
	tname, subject, content := "Reset", "Reset your password, {{ contact.properties.firstName }}", `<mjml><mj-body><mj-section><mj-column>
<mj-text font-size="20px">Hi {{ contact.properties.firstName }},</mj-text>
<mj-text>Someone asked to reset the password of {{ contact.email }}. If it was you, follow the link; it works for an hour.</mj-text>
<mj-button href="https://app.example.com/reset">Reset password</mj-button>
<mj-text font-size="12px">Not you? Ignore this email. <a href="{{ unsubscribeUrl }}">Unsubscribe</a></mj-text>
</mj-column></mj-section></mj-body></mjml>`
	if _, _, err := b.svc.Templates.Put(b.ctx, sendTenant, "reset", templates.Put{Name: &tname, Subject: &subject, Content: &content}); err != nil {
		return "", err
	}
	src := "name: Drain\ntrigger: {event: go}\nsteps: [{send: reset}]\n"
	def, err := definition.Parse([]byte(src), definition.Options{})
	if err != nil {
		return "", err
	}
	b.step = def.Steps[0].ID
	j, _ := json.Marshal(def)
	if err := b.exec(`INSERT INTO sequences (tenant_id, id, name, content, definition, trigger_event, enabled, version)
		VALUES ($1, 'drain', 'Drain', $2, $3, 'go', true, 1)`, sendTenant, src, j); err != nil {
		return "", err
	}
	return seg.ID, nil
}

// round runs one schedule of sends on procs, computing the segment over
// and over meanwhile when compute is set.
func (b *bench) round(n int, name string, procs []proc, compute bool, segID string) (result, error) {
	res := result{name: name}
	var stops []func() string
	stopAll := func() {
		for i, stop := range stops {
			if cpu := stop(); cpu != "" {
				label := procs[i].binary
				if procs[i].roles != "" {
					label += "(" + procs[i].roles + ")"
				}
				res.cpu = append(res.cpu, label+" "+cpu)
			}
		}
		stops = nil
	}
	defer stopAll()
	for i, p := range procs {
		stop, err := b.start(fmt.Sprintf("run%d-%d-%s", n, i, p.binary), p)
		if err != nil {
			return res, err
		}
		stops = append(stops, stop)
	}

	// The run's contacts, enrolments and steps, due from t0 on: each
	// second's batch at that whole second.
	total := *rate * int(window.Seconds())
	prefix := fmt.Sprintf("r%d_", n)
	if err := b.exec(`INSERT INTO contacts (tenant_id, id, email, properties)
		SELECT $1, 'cnt_' || $2 || g, $2 || g || '@example.com', jsonb_build_object('firstName', 'C' || g)
		FROM generate_series(1, $3::int) g`, sendTenant, prefix, total); err != nil {
		return res, err
	}
	if err := b.exec(`INSERT INTO enrolments (tenant_id, id, sequence_id, contact_id, current_step, current_step_index)
		SELECT $1, 'enr_' || $2 || g, 'drain', 'cnt_' || $2 || g, $4, 1 FROM generate_series(1, $3::int) g`,
		sendTenant, prefix, total, b.step); err != nil {
		return res, err
	}
	t0 := time.Now().Add(5 * time.Second).Truncate(time.Second).Add(time.Second)
	if err := b.exec(`INSERT INTO scheduled_sends (tenant_id, id, contact_id, enrolment_id, sequence_id, sequence_version, step_id, template_id, scheduled_for)
		SELECT $1, 'sch_' || $2 || g, 'cnt_' || $2 || g, 'enr_' || $2 || g, 'drain', 1, $6, 'reset',
			$4::timestamptz + make_interval(secs => (g - 1) / $5::int)
		FROM generate_series(1, $3::int) g`, sendTenant, prefix, total, t0, *rate, b.step); err != nil {
		return res, err
	}
	if err := b.exec(`ANALYZE scheduled_sends`); err != nil {
		return res, err
	}
	var timers []tasks.Timer
	for s := range int(window.Seconds()) {
		timers = append(timers, tasks.Timer{TenantID: sendTenant, ID: fmt.Sprintf("sch_%s%d", prefix, s**rate+1),
			At: t0.Add(time.Duration(s) * time.Second)})
	}
	b.svc.Tasks.ScheduledSends(b.ctx, timers)

	// The compute loop: a new compute queued whenever none waits.
	loopCtx, stopLoop := context.WithCancel(b.ctx)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for compute && loopCtx.Err() == nil {
			_, _ = b.svc.Tasks.SegmentCompute(loopCtx, segTenant, segID)
			select {
			case <-loopCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	// Computes finished: each moves lastComputedAt (polled twice a
	// second; a compute of a large tenant takes seconds).
	first, err := b.lastComputed(segID)
	if err != nil {
		stopLoop()
		return res, err
	}
	last, firstChange := first, time.Time{}

	deadline := t0.Add(*window + 5*time.Minute)
	for {
		var open int
		if err := b.svc.DB.Pool.QueryRow(b.ctx, `SELECT count(*) FROM scheduled_sends
			WHERE tenant_id = $1 AND id LIKE 'sch_' || $2 || '%' AND status <> 'sent'`, sendTenant, prefix).Scan(&open); err != nil {
			stopLoop()
			return res, err
		}
		if at, err := b.lastComputed(segID); err == nil && at.After(last) {
			res.computes++
			last = at
			if res.computes == 1 {
				firstChange = at
			}
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			stopLoop()
			return res, fmt.Errorf("%d of %d sends not sent by the deadline", open, total)
		}
		time.Sleep(500 * time.Millisecond)
	}
	stopLoop()
	<-loopDone
	stopAll()
	if res.computes > 1 {
		res.computeSeconds = last.Sub(firstChange).Seconds() / float64(res.computes-1)
	}
	err = b.svc.DB.Pool.QueryRow(b.ctx, `SELECT count(*),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM s.sent_at - ss.scheduled_for)),
			percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM s.sent_at - ss.scheduled_for)),
			max(extract(epoch FROM s.sent_at - ss.scheduled_for))
		FROM scheduled_sends ss JOIN sends s ON s.tenant_id = ss.tenant_id AND s.scheduled_send_id = ss.id
		WHERE ss.tenant_id = $1 AND ss.id LIKE 'sch_' || $2 || '%'`, sendTenant, prefix).Scan(&res.sends, &res.p50, &res.p99, &res.max)
	return res, err
}

func (b *bench) lastComputed(segID string) (time.Time, error) {
	var at *time.Time
	err := b.svc.DB.Pool.QueryRow(b.ctx, `SELECT last_computed_at FROM segments WHERE tenant_id = $1 AND id = $2`,
		segTenant, segID).Scan(&at)
	if at == nil {
		return time.Time{}, err
	}
	return *at, err
}

// start runs a worker binary with the benchmark's environment (roles, when
// given, as WORKER_ROLES; capped as -cap says when it is the separate
// segments process) and waits for its /healthz; stop ends it with SIGTERM, waits, and
// returns the CPU time it used.
func (b *bench) start(logName string, p proc) (func() string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	binary := p.binary
	path := filepath.Join(*binDir, binary)
	cmd := exec.Command(path)
	separateSegments := *capSeg && p.segments && p.binary == "worker-segments"
	if separateSegments {
		cmd = exec.Command("nice", "-n", "10", path)
	}
	cmd.Env = append(os.Environ(), "WORKER_ADMIN_ADDR="+addr)
	for k, v := range b.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if separateSegments {
		cmd.Env = append(cmd.Env, "GOMAXPROCS=1")
	}
	if p.roles != "" {
		cmd.Env = append(cmd.Env, "WORKER_ROLES="+p.roles)
	}
	out, err := os.Create(filepath.Join(b.logs, logName+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	stopped := false
	stop := func() string {
		if stopped {
			return ""
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		out.Close()
		if st := cmd.ProcessState; st != nil {
			return fmt.Sprintf("%.1f", (st.UserTime() + st.SystemTime()).Seconds())
		}
		return ""
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		res, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
		if time.Now().After(deadline) {
			_ = stop()
			return nil, fmt.Errorf("%s did not answer /healthz (log %s)", binary, out.Name())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// fakeSendGrid accepts every message at once, as SendGrid's Mail Send
// answers 202 with an X-Message-Id: the benchmark measures the service.
func fakeSendGrid() *httptest.Server {
	var seq atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Message-Id", fmt.Sprintf("bench-%d", seq.Add(1)))
		w.WriteHeader(http.StatusAccepted)
	}))
}
