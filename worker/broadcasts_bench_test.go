package worker

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/testenv"
)

// BenchmarkBroadcastDrain: a broadcast of the small transactional template
// to BROADCAST_N (default 10,000) contacts, started at T0 by its start
// task (the audience snapshot) and drained by the worker's own asynq
// server (NewServer, NewMux, cmd/worker's concurrency, the periodic sweep
// running) through the batch pipeline against the fake SendGrid, no rate
// limit. Reported: sends/s (N over T0 → completedAt), the snapshot's time,
// p50/p99 lateness, this process's peak RSS, and the PostgreSQL bytes per
// recipient of broadcast_recipients and of sends (tables and indexes).
//
//	BROADCAST_N=100000 go test -run '^$' -bench BroadcastDrain -benchtime 1x -timeout 60m ./worker/
func BenchmarkBroadcastDrain(b *testing.B) {
	n := envInt(b, "BROADCAST_N", 10000)
	conc := envInt(b, "SEQ_DRAIN_CONCURRENCY", benchConcurrency)
	ctx := context.Background()
	s := newSeqBench(b, n)
	s.exec(`UPDATE contacts SET created_at = now() - interval '1 hour' WHERE tenant_id = $1`, benchTenant)
	s.exec(`INSERT INTO segments (tenant_id, id, name, rules) VALUES ($1, 'seg_all', 'All', '{"operator":"and","conditions":[]}')`, benchTenant)
	s.exec(`ANALYZE contacts`)
	run := drainBroadcast(b, s, "brd_bench", conc, time.Duration(n)*20*time.Millisecond+time.Minute)
	t0 := run.t0

	var drain, p50, p99, first float64
	var sent, recipients int64
	if err := s.db.Pool.QueryRow(ctx, `SELECT extract(epoch FROM b.completed_at - $2::timestamptz),
			(SELECT sum(c.sent)::bigint FROM broadcast_counts c WHERE c.tenant_id = $1 AND c.broadcast_id = b.id), b.recipients,
			(SELECT extract(epoch FROM min(s.sent_at) - $2::timestamptz) FROM sends s WHERE s.tenant_id = $1 AND s.broadcast_id = b.id),
			(SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM s.sent_at - $2::timestamptz)) FROM sends s WHERE s.tenant_id = $1 AND s.broadcast_id = b.id),
			(SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM s.sent_at - $2::timestamptz)) FROM sends s WHERE s.tenant_id = $1 AND s.broadcast_id = b.id)
		FROM broadcasts b WHERE b.tenant_id = $1 AND b.id = 'brd_bench'`, benchTenant, t0).Scan(&drain, &sent, &recipients, &first, &p50, &p99); err != nil {
		b.Fatal(err)
	}
	if int(sent) != n || int(recipients) != n || s.sg.Count() != n {
		b.Fatalf("sent %d of %d recipients (%d wanted), provider %d", sent, recipients, n, s.sg.Count())
	}
	var recBytes, sendBytes int64
	if err := s.db.Pool.QueryRow(ctx, `SELECT pg_total_relation_size('broadcast_recipients'), pg_total_relation_size('sends')`).
		Scan(&recBytes, &sendBytes); err != nil {
		b.Fatal(err)
	}
	b.Logf("broadcast: first send %.0f ms after T0, completed %.2f s after T0", ms(first), drain)
	b.ReportMetric(float64(n)/drain, "sends/s")
	b.ReportMetric(ms(first), "first-send-ms")
	b.ReportMetric(ms(p50), "p50-late-ms")
	b.ReportMetric(ms(p99), "p99-late-ms")
	b.ReportMetric(float64(run.selfCPU.Microseconds())/float64(n), "proc-cpu-µs/send")
	b.ReportMetric(float64(run.pgCPU.Microseconds())/float64(n), "pg-cpu-µs/send")
	b.ReportMetric(float64(recBytes)/float64(n), "recipient-B")
	b.ReportMetric(float64(sendBytes)/float64(n), "send-B")
	b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak-RSS-MiB")
}

// drained is what drainBroadcast measured: the broadcast's start (T0)
// and the CPU this process and PostgreSQL spent until it was sent.
type drained struct {
	t0             time.Time
	selfCPU, pgCPU time.Duration
}

// drainBroadcast is the drain both broadcast benchmarks share: the
// broadcast id of the template "reset" to segment seg_all (both set up by
// the caller) starts at T0 by its start task (the audience snapshot) and
// is drained by the worker's own asynq server (NewServer, NewMux, conc
// slots) with the periodic sweep running, and, where autovacuum is off
// (this machine), testenv.Autovacuum doing what it would. It
// returns once the broadcast is sent (fails past T0 + timeout).
func drainBroadcast(b *testing.B, s *seqBench, id string, conc int, timeout time.Duration) drained {
	ctx := context.Background()
	srv := NewServer(s.opt, s.log, conc, AllRoles)
	if err := srv.Start(NewMux(s.svc)); err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown()
	sctx, stopSched := context.WithCancel(ctx)
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		ins := asynq.NewInspector(s.opt)
		defer ins.Close()
		NewScheduler(s.client, ins, nil, PeriodicTasks(), s.log).Run(sctx)
	}()
	defer func() { stopSched(); <-schedDone }()

	t0 := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	s.exec(`INSERT INTO broadcasts (tenant_id, id, name, template_id, segment_id, status, starts_at)
		VALUES ($1, $2, 'Bench', 'reset', 'seg_all', 'scheduled', $3)`, benchTenant, id, t0)
	s.tasks.BroadcastStart(ctx, benchTenant, id, t0)
	var autovacuum string
	if err := s.db.Pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&autovacuum); err != nil {
		b.Fatal(err)
	}
	if autovacuum == "off" {
		stop := testenv.Autovacuum(ctx, s.db.Pool, 10*time.Second, b.Logf)
		defer func() {
			v, a := stop()
			b.Logf("autovacuum stand-in: %d vacuums, %d analyzes", v, a)
		}()
	}
	selfCPU0, pgCPU0 := testenv.CPU(b)
	deadline := t0.Add(timeout)
	for {
		var status string
		if err := s.db.Pool.QueryRow(ctx, `SELECT status FROM broadcasts WHERE tenant_id = $1 AND id = $2`,
			benchTenant, id).Scan(&status); err != nil {
			b.Fatal(err)
		}
		if status == "sent" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("broadcast still %s at the deadline", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	selfCPU1, pgCPU1 := testenv.CPU(b)
	return drained{t0: t0, selfCPU: selfCPU1 - selfCPU0, pgCPU: pgCPU1 - pgCPU0}
}

// peakRSS is this process's peak resident set (VmHWM), in bytes.
func peakRSS(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
