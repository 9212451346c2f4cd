package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/config"
	"tidings/internal/events"
	"tidings/internal/provider"
	"tidings/internal/provider/providertest"
	"tidings/internal/sequences/definition"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/internal/templates"
	"tidings/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Benchmarks of issue 13 (docs/benchmarks.md, "Sequences (issue 13)").
// Each runs its scenario once per call, so run them with -benchtime 1x;
// the sizes come from the environment.

const (
	benchTenant      = "ten_seqbench"
	benchConcurrency = 10 // cmd/worker's
	benchEnqueuers   = 8  // concurrent writers enqueueing after their commits
)

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// seqBench is one tenant with contacts c1..cN, a verified domain, the small
// transactional template "reset", the fake SendGrid and a leased Redis DB.
type seqBench struct {
	b      testing.TB
	db     *store.DB
	cfg    *config.Config
	opt    asynq.RedisConnOpt
	client *asynq.Client
	sg     *providertest.SendGrid
	prov   provider.Provider
	log    *slog.Logger
	tasks  *tasks.Client
	// svc are the services as cmd/worker builds them.
	svc *app.Services
}

func newSeqBench(b testing.TB, contacts int) *seqBench {
	return newSeqBenchOn(b, contacts, nil)
}

// newSeqBenchOn is newSeqBench whose services use the pool svcDB makes on
// the bench's database (nil: the bench's own): a test counts what they
// run apart from its own queries.
func newSeqBenchOn(b testing.TB, contacts int, svcDB func(url string) *store.DB) *seqBench {
	ctx := context.Background()
	name, _ := testenv.NewDatabase(b)
	db, err := store.Open(ctx, testenv.DatabaseURL(name))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	s := &seqBench{b: b, db: db, log: slog.New(slog.DiscardHandler)}
	appDB := db
	if svcDB != nil {
		appDB = svcDB(testenv.DatabaseURL(name))
	}
	url, _ := testenv.RedisDB(b)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		b.Fatal(err)
	}
	s.opt, s.client = opt, asynq.NewClient(opt)
	b.Cleanup(func() { _ = s.client.Close() })
	s.sg = providertest.NewSendGrid(b)
	s.sg.KeepMessages(false)
	// The fake does not read the bodies it is sent: on this machine that
	// was a fifth of the benchmark process's CPU, work SendGrid does on
	// its own machines; what we send is checked by the tests.
	s.sg.TrustBodies(true)
	if s.cfg, err = config.FromLookup(func(string) (string, bool) { return "", false }); err != nil {
		b.Fatal(err)
	}
	s.sg.Configure(s.cfg)
	if s.prov, err = provider.New(s.cfg); err != nil {
		b.Fatal(err)
	}
	s.tasks = tasks.NewClient(s.client, nil, s.log)
	s.svc = apptest.Services(b, app.Infra{Config: s.cfg, DB: appDB, Provider: s.prov, Tasks: s.tasks, Log: s.log})
	s.exec(`INSERT INTO tenants (id, name, sending_status, default_from_address) VALUES ($1, 'Bench', 'enabled', 'News <news@bench.example>')`, benchTenant)
	s.exec(`INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
		VALUES ($1, 'bench.example', 'verified', true, 't', '{a,b,c}')`, benchTenant)
	s.exec(`INSERT INTO contacts (tenant_id, id, email, properties)
		SELECT $1, 'cnt_' || g, 'c' || g || '@example.com', jsonb_build_object('firstName', 'C' || g)
		FROM generate_series(1, $2::int) g`, benchTenant, contacts)
	ts := &templates.Store{DB: s.db, Compiler: templates.Prepare{MJML: testenv.MJML(b)}, FreeLimit: 100}
	// The transactional template of BenchmarkSend (internal/delivery).
	name, subject, content := "Reset", "Reset your password, {{ contact.properties.firstName }}", `<mjml><mj-body><mj-section><mj-column>
<mj-text font-size="20px">Hi {{ contact.properties.firstName }},</mj-text>
<mj-text>Someone asked to reset the password of {{ contact.email }}. If it was you, follow the link; it works for an hour.</mj-text>
<mj-button href="https://app.example.com/reset">Reset password</mj-button>
<mj-text font-size="12px">Not you? Ignore this email. <a href="{{ unsubscribeUrl }}">Unsubscribe</a></mj-text>
</mj-column></mj-section></mj-body></mjml>`
	if _, _, err := ts.Put(ctx, benchTenant, "reset", templates.Put{Name: &name, Subject: &subject, Content: &content}); err != nil {
		b.Fatal(err)
	}
	return s
}

func (s *seqBench) exec(sql string, args ...any) {
	s.b.Helper()
	if _, err := s.db.Pool.Exec(context.Background(), sql, args...); err != nil {
		s.b.Fatal(err)
	}
}

// putSequence stores an enabled sequence as the definitions API does.
func (s *seqBench) putSequence(id, src string) *definition.Definition {
	def, err := definition.Parse([]byte(src), definition.Options{})
	if err != nil {
		s.b.Fatal(err)
	}
	j, _ := json.Marshal(def)
	s.exec(`INSERT INTO sequences (tenant_id, id, name, content, definition, trigger_event, enabled, version)
		VALUES ($1, $2, $2, $3, $4, $5, true, 1)`, benchTenant, id, src, j, def.Trigger.Event)
	return def
}

// enqueueAll enqueues the timers from benchEnqueuers goroutines, as many
// api requests and worker tasks do after their commits.
func enqueueAll(c *tasks.Client, timers []tasks.Timer) {
	var wg sync.WaitGroup
	per := (len(timers) + benchEnqueuers - 1) / benchEnqueuers
	for chunk := range slices.Chunk(timers, max(per, 1)) {
		wg.Go(func() { c.ScheduledSends(context.Background(), chunk) })
	}
	wg.Wait()
}

const noopType = "bench:noop"

// enqueueNoops enqueues n no-op tasks due at t from benchEnqueuers
// goroutines, each with its own task id, as per-row timers were.
func enqueueNoops(c *asynq.Client, n int, t time.Time) {
	var wg sync.WaitGroup
	per := (n + benchEnqueuers - 1) / benchEnqueuers
	for w := range benchEnqueuers {
		wg.Go(func() {
			for i := w * per; i < min(n, (w+1)*per); i++ {
				_, _ = c.Enqueue(asynq.NewTask(noopType, nil), asynq.TaskID(fmt.Sprintf("noop_%d", i+1)),
					asynq.ProcessAt(t), asynq.Queue(tasks.QueueSends), asynq.MaxRetry(0))
			}
		})
	}
	wg.Wait()
}

// enqueueLead is how far ahead of the enqueue the sends are due: enough to
// enqueue them all first on a loaded machine (reported if not).
func enqueueLead(n int) time.Duration { return 3*time.Second + time.Duration(n)*200*time.Microsecond }

// dueAt is the instant the sends (or no-op tasks) are due: a whole second,
// because asynq keeps process times in whole seconds and releases a task
// once its second has begun; at a fraction the no-op tasks would run up to
// a second before it and the two drains would not compare.
func dueAt(n int) time.Time {
	return time.Now().Add(enqueueLead(n)).Truncate(time.Second).Add(time.Second)
}

func ms(seconds float64) float64 { return seconds * 1000 }

// BenchmarkScheduledDrain: SEQ_DRAIN_N (default 10,000) scheduled sends of
// one tenant, one per contact, all due at the same instant T0, written
// directly (enrolments and scheduled_sends by generate_series, one email
// step of the small transactional template), their timers set after
// "commit" as the engine's writers do (tasks.Client.ScheduledSends: one
// dispatch task at T0's second), then drained by the worker's own asynq
// server (NewServer, NewMux, cmd/worker's concurrency) with the periodic
// sweep running, through the batch pipeline (engine.Runner.Dispatch, the
// fan-out) against the fake SendGrid.
// SEQ_DRAIN_CONCURRENCY (default 10, cmd/worker's) sets both servers'
// concurrency. Reported: sends/s (N over T0 → last row finished), p50/p99
// lateness (sends.sent_at − scheduled_for, from the database). Then, on the same Redis with the
// same server configuration, the ceiling: N no-op tasks (one per send, as
// the per-row timers of earlier versions were) due at one instant;
// noop-tasks/s and the ratio.
//
//	SEQ_DRAIN_N=10000 go test -run '^$' -bench ScheduledDrain -benchtime 1x -timeout 30m ./worker/
func BenchmarkScheduledDrain(b *testing.B) {
	n := envInt(b, "SEQ_DRAIN_N", 10000)
	conc := envInt(b, "SEQ_DRAIN_CONCURRENCY", benchConcurrency)
	ctx := context.Background()
	s := newSeqBench(b, n)
	def := s.putSequence("drain", "name: Drain\ntrigger: {event: go}\nsteps: [{send: reset}]\n")
	step := def.Steps[0].ID
	// Far in the future until everything is in place.
	s.exec(`INSERT INTO enrolments (tenant_id, id, sequence_id, contact_id, current_step, current_step_index)
		SELECT $1, 'enr_' || g, 'drain', 'cnt_' || g, $2, 1 FROM generate_series(1, $3::int) g`, benchTenant, step, n)
	s.exec(`INSERT INTO scheduled_sends (tenant_id, id, contact_id, enrolment_id, sequence_id, sequence_version, step_id, template_id, scheduled_for)
		SELECT $1, 'sch_' || g, 'cnt_' || g, 'enr_' || g, 'drain', 1, $2, 'reset', now() + interval '1 day'
		FROM generate_series(1, $3::int) g`, benchTenant, step, n)
	s.exec(`ANALYZE scheduled_sends`)
	s.exec(`ANALYZE enrolments`)

	deps := s.svc
	srv := NewServer(s.opt, s.log, conc, AllRoles)
	if err := srv.Start(NewMux(deps)); err != nil {
		b.Fatal(err)
	}
	sctx, stopSched := context.WithCancel(ctx)
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		ins := asynq.NewInspector(s.opt)
		defer ins.Close()
		NewScheduler(s.client, ins, nil, PeriodicTasks(), s.log).Run(sctx)
	}()

	t0 := dueAt(n)
	s.exec(`UPDATE scheduled_sends SET scheduled_for = $2 WHERE tenant_id = $1`, benchTenant, t0)
	timers := make([]tasks.Timer, n)
	for i := range n {
		timers[i] = tasks.Timer{TenantID: benchTenant, ID: fmt.Sprintf("sch_%d", i+1), At: t0}
	}
	enqStart := time.Now()
	enqueueAll(s.tasks, timers)
	enqDone := time.Now()
	if enqDone.After(t0) {
		b.Logf("enqueue finished %v after T0: lateness includes it", enqDone.Sub(t0))
	}
	b.Logf("drain: %d sends enqueued in %v; due at T0, %v after the enqueue ended", n, enqDone.Sub(enqStart), t0.Sub(enqDone))

	// The machine's PostgreSQL runs with autovacuum off (SHOW autovacuum);
	// a production one vacuums tables this churned (two non-HOT updates of
	// scheduled_sends and one of enrolments per send) as it goes. Without
	// that a drain of 100,000 crawls through dead tuples, so the benchmark
	// vacuums them every vacuumEvery, as autovacuum would, when it is off.
	var autovacuum string
	if err := s.db.Pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&autovacuum); err != nil {
		b.Fatal(err)
	}
	vctx, stopVacuum := context.WithCancel(ctx)
	defer stopVacuum()
	if autovacuum == "off" {
		go func() {
			const vacuumEvery = 10 * time.Second
			for {
				select {
				case <-vctx.Done():
					return
				case <-time.After(vacuumEvery):
				}
				if _, err := s.db.Pool.Exec(vctx, `VACUUM (ANALYZE) scheduled_sends, enrolments, contacts`); err != nil && vctx.Err() == nil {
					b.Logf("vacuum: %v", err)
				}
			}
		}()
	}
	selfCPU0, pgCPU0 := testenv.CPU(b)
	deadline := t0.Add(time.Duration(n)*20*time.Millisecond + time.Minute)
	// The poll must cost the database next to nothing (a count over N rows
	// ten times a second is a load of its own at 100,000): two index
	// probes every 100 ms, and a count every 10 s for the progress log.
	lastLog, lastSent := time.Now(), 0
	for {
		var open, failed bool
		if err := s.db.Pool.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM scheduled_sends WHERE tenant_id = $1 AND status IN ('pending', 'claimed', 'failed')),
			EXISTS (SELECT 1 FROM scheduled_sends WHERE tenant_id = $1 AND status IN ('cancelled', 'dead'))`,
			benchTenant).Scan(&open, &failed); err != nil {
			b.Fatal(err)
		}
		if failed {
			b.Fatal("scheduled sends cancelled or dead")
		}
		if !open {
			break
		}
		if time.Since(lastLog) >= 10*time.Second {
			var sent int
			if err := s.db.Pool.QueryRow(ctx, `SELECT count(*) FROM scheduled_sends WHERE tenant_id = $1 AND status = 'sent'`,
				benchTenant).Scan(&sent); err != nil {
				b.Fatal(err)
			}
			b.Logf("drain: %d sent, %.0f/s over the last %v", sent, float64(sent-lastSent)/time.Since(lastLog).Seconds(),
				time.Since(lastLog).Round(time.Second))
			lastLog, lastSent = time.Now(), sent
		}
		if time.Now().After(deadline) {
			b.Fatalf("not all %d sent by the deadline", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	selfCPU1, pgCPU1 := testenv.CPU(b)
	stopSched()
	stopVacuum()
	<-schedDone
	srv.Shutdown()

	var drain, p50, p99, first float64
	var failedOnce int
	if err := s.db.Pool.QueryRow(ctx, `SELECT
			extract(epoch FROM max(ss.finished_at) - $2::timestamptz),
			extract(epoch FROM min(s.sent_at) - $2::timestamptz),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM s.sent_at - ss.scheduled_for)),
			percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM s.sent_at - ss.scheduled_for)),
			count(*) FILTER (WHERE ss.attempts > 1)
		FROM scheduled_sends ss JOIN sends s ON s.tenant_id = ss.tenant_id AND s.scheduled_send_id = ss.id
		WHERE ss.tenant_id = $1`, benchTenant, t0).Scan(&drain, &first, &p50, &p99, &failedOnce); err != nil {
		b.Fatal(err)
	}
	if got := s.sg.Count(); got != n {
		b.Fatalf("fake SendGrid accepted %d messages, want %d", got, n)
	}
	b.Logf("drain: first send %.0f ms after T0, last row finished %.2f s after T0; %d rows took more than one attempt", ms(first), drain, failedOnce)
	sendsPerS := float64(n) / drain
	b.ReportMetric(sendsPerS, "sends/s")
	b.ReportMetric(ms(p50), "p50-late-ms")
	b.ReportMetric(ms(p99), "p99-late-ms")
	// CPU per send: this process (the worker's server and the fake
	// SendGrid) and every PostgreSQL process, from the enqueue to the end of
	// the drain.
	b.ReportMetric(float64((selfCPU1-selfCPU0).Microseconds())/float64(n), "proc-cpu-µs/send")
	b.ReportMetric(float64((pgCPU1-pgCPU0).Microseconds())/float64(n), "pg-cpu-µs/send")

	// The ceiling: the same server configuration draining no-op tasks.
	var done atomic.Int64
	late := make([]time.Duration, n)
	var t1 time.Time
	finished := make(chan struct{})
	mux := asynq.NewServeMux()
	mux.Use(logTasks(s.log))
	mux.HandleFunc(noopType, func(context.Context, *asynq.Task) error {
		l := time.Since(t1)
		i := done.Add(1)
		if int(i) <= n {
			late[i-1] = l
		}
		if int(i) == n {
			close(finished)
		}
		return nil
	})
	noop := NewServer(s.opt, s.log, conc, AllRoles)
	if err := noop.Start(mux); err != nil {
		b.Fatal(err)
	}
	defer noop.Shutdown()
	t1 = dueAt(n)
	enqStart = time.Now()
	enqueueNoops(s.client, n, t1)
	enqDone = time.Now()
	if enqDone.After(t1) {
		b.Logf("no-op enqueue finished %v after T1: lateness includes it", enqDone.Sub(t1))
	}
	b.Logf("no-op: %d tasks enqueued in %v", n, enqDone.Sub(enqStart))
	select {
	case <-finished:
	case <-time.After(time.Until(t1) + time.Duration(n)*5*time.Millisecond + time.Minute):
		b.Fatalf("no-op: %d of %d tasks ran", done.Load(), n)
	}
	slices.Sort(late)
	noopDrain := late[n-1]
	noopPerS := float64(n) / noopDrain.Seconds()
	b.ReportMetric(noopPerS, "noop-tasks/s")
	b.ReportMetric(float64(late[n/2].Microseconds())/1000, "noop-p50-late-ms")
	b.ReportMetric(float64(late[n*99/100].Microseconds())/1000, "noop-p99-late-ms")
	b.ReportMetric(sendsPerS/noopPerS, "ratio")
}

// BenchmarkEventFanout: what POST /api/events does past HTTP and
// authentication, for an event that five enabled sequences trigger (each
// enrols the contact and schedules its first email an hour ahead: nothing
// sends) and for an event no sequence triggers (same tenant setup: the
// trigger lookup and the exit check still run), each event for a
// different contact (b.N contacts each), recorded two ways:
//
//   - single: the services' events.Recorder, one transaction per event
//     (RecordCustom: the record and the engine's hook; its timers set after
//     the commit), from 16 goroutines, as the api did before group commit;
//   - grouped: the services' events.Ingest, as the api does now (group
//     commit: batches of events and their enrolments in one transaction,
//     each caller answered after its batch committed), from 64 goroutines,
//     the callers the api's open requests would be.
//
// The two events run in alternating slices of b.N/10 (match5, none,
// match5, ...), each on a database of its own, so a machine whose load
// changes during the run weighs on both alike; the ratio match5/none is
// of the two rates over all slices:
//
//	go test -run '^$' -bench EventFanout -benchtime 2000x ./worker/
func BenchmarkEventFanout(b *testing.B) {
	for _, path := range []struct {
		name    string
		workers int
	}{{"single", 16}, {"grouped", 64}} {
		b.Run(path.name, func(b *testing.B) {
			type load struct {
				name, event string
				s           *seqBench
				record      func(context.Context, events.Custom) (*events.Recorded, error)
				enrolled    atomic.Int64
				elapsed     time.Duration
				lat         []time.Duration
			}
			loads := []*load{{name: "match5", event: "signup"}, {name: "none", event: "page_view"}}
			for _, l := range loads {
				l.s = newSeqBench(b, b.N)
				for i := range 5 {
					l.s.putSequence(fmt.Sprintf("onboard%d", i+1), "name: Onboard\ntrigger: {event: signup}\nsteps: [{delay: 1h}, {send: reset}]\n")
				}
				l.record = l.s.svc.Events.RecordCustom
				if path.name == "grouped" {
					l.record = l.s.svc.Ingest.Record
					defer l.s.svc.Ingest.Close()
				}
			}
			// run records events from..to-1 of l from path.workers goroutines.
			run := func(l *load, from, to int) {
				var next atomic.Int64
				next.Store(int64(from))
				lat := make([][]time.Duration, path.workers)
				start := time.Now()
				var wg sync.WaitGroup
				for w := range path.workers {
					wg.Go(func() {
						for {
							i := next.Add(1)
							if i > int64(to) {
								return
							}
							t0 := time.Now()
							r, err := l.record(context.Background(), events.Custom{TenantID: benchTenant, Email: fmt.Sprintf("c%d@example.com", i),
								Name: l.event, Properties: []byte(`{"plan":"pro","source":"bench"}`), Timestamp: time.Now()})
							if err != nil {
								b.Error(err)
								return
							}
							l.enrolled.Add(int64(len(r.TriggeredSequences)))
							lat[w] = append(lat[w], time.Since(t0))
						}
					})
				}
				wg.Wait()
				l.elapsed += time.Since(start)
				l.lat = append(l.lat, slices.Concat(lat...)...)
			}
			slice := max(b.N/10, 1)
			b.ResetTimer()
			for from := 0; from < b.N; from += slice {
				for _, l := range loads {
					run(l, from, min(from+slice, b.N))
				}
			}
			b.StopTimer()
			rates := map[string]float64{}
			for _, l := range loads {
				if want := map[string]int64{"match5": 5, "none": 0}[l.name] * int64(b.N); l.enrolled.Load() != want {
					b.Fatalf("%s: %d enrolments, want %d", l.name, l.enrolled.Load(), want)
				}
				slices.Sort(l.lat)
				rates[l.name] = float64(len(l.lat)) / l.elapsed.Seconds()
				b.ReportMetric(rates[l.name], l.name+"-events/s")
				b.ReportMetric(float64(l.lat[len(l.lat)/2].Microseconds())/1000, l.name+"-p50-ms")
				b.ReportMetric(float64(l.lat[len(l.lat)*99/100].Microseconds())/1000, l.name+"-p99-ms")
				if path.name == "grouped" {
					st := l.s.svc.Ingest.Stats()
					b.ReportMetric(float64(st.Items.Load())/float64(max(st.Batches.Load(), 1)), l.name+"-events/batch")
				}
			}
			b.ReportMetric(rates["match5"]/rates["none"], "ratio-match5/none")
		})
	}
}
