package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"tidings/internal/config"
	"tidings/internal/testenv"
)

// BenchmarkEventFanoutHTTP: POST /api/events over HTTP (a real listener
// on loopback, Serve as cmd/api runs it, the group commit, authentication
// and the per-tenant rate limit in Redis), for an event that five enabled
// sequences trigger (five enrolments and five scheduled sends each, due an
// hour ahead: nothing sends) and for an event none triggers, on the same
// tenant, each event for a contact of its own (2 × b.N contacts), from 64
// concurrent clients. The two run in alternating slices of b.N/10, so a
// machine whose load changes weighs on both alike; reported: events/s of
// each and their ratio.
//
//	go test -run '^$' -bench EventFanoutHTTP -benchtime 5000x ./api/
func BenchmarkEventFanoutHTTP(b *testing.B) {
	const clients = 64
	bb := setup(b, func(c *config.Config) { c.RateLimitPerMinute = 100_000_000 })
	key := bb.apiKey(bb.tenant("org_fanout_http"))
	bb.expect("PUT", "/api/templates/welcome", key, map[string]any{"name": "Welcome", "subject": "Hi",
		"content": `<mjml><mj-body><mj-section><mj-column><mj-text>Hello <a href="{{ unsubscribeUrl }}">Unsubscribe</a></mj-text></mj-column></mj-section></mj-body></mjml>`}, 201)
	for i := range 5 {
		bb.expect("PUT", fmt.Sprintf("/api/sequences/onboard%d", i+1), key, map[string]any{
			"content": "name: Onboard\ntrigger: {event: signup}\nsteps: [{delay: 1h}, {send: welcome}]\n"}, 201)
	}
	var tenant string
	if err := bb.db.Pool.QueryRow(context.Background(), `SELECT tenant_id FROM api_keys LIMIT 1`).Scan(&tenant); err != nil {
		b.Fatal(err)
	}
	if _, err := bb.db.Pool.Exec(context.Background(), `INSERT INTO contacts (tenant_id, id, email)
		SELECT $1, 'cnt_f' || g, 'f' || g || '@example.com' FROM generate_series(1, $2::int) g`, tenant, 2*b.N); err != nil {
		b.Fatal(err)
	}
	if _, err := bb.db.Pool.Exec(context.Background(), `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, bb.app, ln, 30*time.Second, slog.New(slog.DiscardHandler)) }()
	defer func() { stop(); <-served; bb.svc.Ingest.Close() }()
	client := &fasthttp.HostClient{Addr: ln.Addr().String(), MaxConns: clients}

	type load struct {
		name, event string
		offset      int // its contacts are f<offset+1>...
		elapsed     time.Duration
		lat         []time.Duration
		enrolled    atomic.Int64
		self, pg    time.Duration // CPU: this process (client and api), PostgreSQL
	}
	loads := []*load{{name: "match5", event: "signup"}, {name: "none", event: "page_view", offset: b.N}}
	run := func(l *load, from, to int) {
		var next atomic.Int64
		next.Store(int64(from))
		lat := make([][]time.Duration, clients)
		self0, pg0 := testenv.CPU(b)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range clients {
			wg.Go(func() {
				req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(res)
				for {
					i := next.Add(1)
					if i > int64(to) {
						return
					}
					body, _ := json.Marshal(map[string]any{"email": fmt.Sprintf("f%d@example.com", l.offset+int(i)),
						"name": l.event, "properties": map[string]any{"plan": "pro"}})
					req.Reset()
					req.SetRequestURI("http://" + ln.Addr().String() + "/api/events")
					req.Header.SetMethod("POST")
					req.Header.SetContentType("application/json")
					req.Header.Set("Authorization", "Bearer "+key)
					req.SetBody(body)
					t0 := time.Now()
					if err := client.Do(req, res); err != nil || res.StatusCode() != 201 {
						b.Errorf("%v %d %s", err, res.StatusCode(), res.Body())
						return
					}
					lat[w] = append(lat[w], time.Since(t0))
					var out struct {
						Triggered []string `json:"triggeredSequences"`
					}
					_ = json.Unmarshal(res.Body(), &out)
					l.enrolled.Add(int64(len(out.Triggered)))
				}
			})
		}
		wg.Wait()
		l.elapsed += time.Since(start)
		self1, pg1 := testenv.CPU(b)
		l.self, l.pg = l.self+self1-self0, l.pg+pg1-pg0
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
		b.ReportMetric(float64(l.self.Microseconds())/float64(b.N), l.name+"-proc-cpu-µs/event")
		b.ReportMetric(float64(l.pg.Microseconds())/float64(b.N), l.name+"-pg-cpu-µs/event")
	}
	st := bb.svc.Ingest.Stats()
	b.ReportMetric(float64(st.Items.Load())/float64(max(st.Batches.Load(), 1)), "events/batch")
	b.ReportMetric(rates["match5"]/rates["none"], "ratio-match5/none")
}
