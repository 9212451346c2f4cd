package worker

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/testenv"
)

// BenchmarkProviderRate: PROVIDER_RATE_PER_SECOND=RATE (default 500) with
// two worker processes (two asynq servers on two sets of services, each
// with its own Redis connection, sharing the bucket) draining a broadcast
// of RATE × (RATE_SECONDS + 10) recipients against the fake SendGrid.
// Reported: the rate the provider saw over RATE_SECONDS (default 60) from
// 2 s after the first message, and its deviation from RATE.
//
//	go test -run '^$' -bench ProviderRate -benchtime 1x -timeout 30m ./worker/
func BenchmarkProviderRate(b *testing.B) {
	rate := envInt(b, "RATE", 500)
	secs := envInt(b, "RATE_SECONDS", 60)
	n := rate * (secs + 10)
	ctx := context.Background()
	s := newSeqBench(b, n)
	s.exec(`UPDATE contacts SET created_at = now() - interval '1 hour' WHERE tenant_id = $1`, benchTenant)
	s.exec(`INSERT INTO segments (tenant_id, id, name, rules) VALUES ($1, 'seg_all', 'All', '{"operator":"and","conditions":[]}')`, benchTenant)
	rdb, prefix := testenv.Redis(b)
	s.cfg.ProviderRatePerSecond = rate
	var servers []func()
	for range 2 {
		c := redis.NewClient(rdb.Options())
		b.Cleanup(func() { _ = c.Close() })
		svc := apptest.Services(b, app.Infra{Config: s.cfg, DB: s.db, Provider: s.prov, Tasks: s.tasks, Log: s.log,
			Redis: c, RedisPrefix: prefix})
		srv := NewServer(s.opt, s.log, benchConcurrency, AllRoles)
		if err := srv.Start(NewMux(svc)); err != nil {
			b.Fatal(err)
		}
		servers = append(servers, srv.Shutdown)
	}
	sctx, stopSched := context.WithCancel(ctx)
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		ins := asynq.NewInspector(s.opt)
		defer ins.Close()
		NewScheduler(s.client, ins, nil, PeriodicTasks(), s.log).Run(sctx)
	}()
	s.exec(`INSERT INTO broadcasts (tenant_id, id, name, template_id, segment_id, status, starts_at)
		VALUES ($1, 'brd_rate', 'Rate', 'reset', 'seg_all', 'scheduled', now())`, benchTenant)
	s.tasks.BroadcastStart(ctx, benchTenant, "brd_rate", time.Now())

	// The provider's own count: from 2 s after its first message, over
	// the window.
	for s.sg.Count() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	c0, t0 := s.sg.Count(), time.Now()
	time.Sleep(time.Duration(secs) * time.Second)
	c1, t1 := s.sg.Count(), time.Now()
	stopSched()
	<-schedDone
	for _, stop := range servers {
		stop()
	}
	if c1 >= n {
		b.Fatalf("the broadcast ran out (%d of %d) inside the window", c1, n)
	}
	inWindow := c1 - c0
	window := t1.Sub(t0).Seconds()
	got := float64(inWindow) / window
	b.ReportMetric(got, "sends/s")
	b.ReportMetric(100*math.Abs(got-float64(rate))/float64(rate), "deviation-%")
}
