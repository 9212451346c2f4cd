// Package loadgen drives HTTP load at a Tidings API (or a baseline server)
// on the loopback interface and measures throughput and latency. A scenario
// (scenarios.go) provisions what its requests need through the API, then
// builds every request; the runner here sends them closed-loop (N workers
// back to back) or open-loop (a fixed arrival rate), always bounded in time
// and count.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Fill writes the n-th request of a run into req, which arrives reset. It
// sets the method, path and query, headers and body; the runner sets the
// host. Fill is called from many goroutines at once, and n lets a load
// spread requests over tenants or vary them deterministically.
type Fill func(req *fasthttp.Request, n uint64)

// Options bound and shape one run.
type Options struct {
	// Concurrency is the number of workers of a closed loop, and the most
	// requests in flight of an open loop.
	Concurrency int
	// Duration is the measured time of Run; Warmup is the time of Warm.
	Duration time.Duration
	Warmup   time.Duration
	// MaxRequests stops a phase early once that many requests were sent.
	MaxRequests uint64
	// Rate, when positive, makes the run open-loop at that many requests
	// per second; latency is then measured from each request's scheduled
	// time, so a slow server cannot hide its queueing (coordinated omission).
	Rate float64
	// Timeout bounds each request.
	Timeout time.Duration
}

// Result is what one measured run saw.
type Result struct {
	Requests  uint64 // completed, successful or not
	Errors    uint64 // transport errors and non-2xx answers
	Dropped   uint64 // open loop only: not sent because Concurrency were in flight
	Statuses  map[int]uint64
	FirstErr  string
	Elapsed   time.Duration
	Latencies []time.Duration // sorted
	ClientCPU time.Duration   // this process, during the measured phase
}

// Rate is completed requests per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of the
// latencies.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.Latencies))*p/100+0.999999) - 1
	i = max(0, min(i, len(r.Latencies)-1))
	return r.Latencies[i]
}

// Max is the slowest request.
func (r Result) Max() time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	return r.Latencies[len(r.Latencies)-1]
}

// LoopbackAddr parses an http base URL and returns the loopback host:port
// to dial. Anything that is not loopback is refused: this tool must never
// load someone else's server. A name is resolved once here and the address
// is dialled directly, so it cannot resolve elsewhere later.
func LoopbackAddr(ctx context.Context, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" || u.Host == "" {
		return "", fmt.Errorf("%q: want http://host:port", raw)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	ips := []net.IP{net.ParseIP(host)}
	if ips[0] == nil {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return "", err
		}
		ips = ips[:0]
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return "", fmt.Errorf("%q resolves to %s, which is not loopback; refusing to send load", raw, ip)
		}
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("%q: no address", raw)
	}
	return net.JoinHostPort(ips[0].String(), port), nil
}

// Runner sends one target its load.
type Runner struct {
	addr   string
	client *fasthttp.HostClient
}

// NewRunner prepares a keep-alive client for base (see LoopbackAddr) with
// room for concurrency connections.
func NewRunner(ctx context.Context, base string, concurrency int) (*Runner, error) {
	addr, err := LoopbackAddr(ctx, base)
	if err != nil {
		return nil, err
	}
	return &Runner{addr: addr, client: &fasthttp.HostClient{
		Addr:     addr,
		MaxConns: concurrency,
		// A retry would hide a failure and skew latency: one attempt only.
		MaxIdemponentCallAttempts: 1,
		MaxConnWaitTimeout:        time.Second,
		ReadBufferSize:            16 << 10,
	}}, nil
}

func (o Options) valid() error {
	if o.Concurrency < 1 || o.Duration <= 0 || o.MaxRequests == 0 || o.Timeout <= 0 || o.Rate < 0 {
		return errors.New("loadgen: concurrency, duration, max requests and timeout must be positive")
	}
	return nil
}

// Warm sends the load for o.Warmup without measuring it, so connections,
// pools and caches on both sides are in their steady state.
func (r *Runner) Warm(ctx context.Context, fill Fill, o Options) error {
	if err := o.valid(); err != nil || o.Warmup <= 0 {
		return err
	}
	o.Duration = o.Warmup
	r.phase(ctx, fill, o, false)
	return ctx.Err()
}

// Run performs the measured phase (without warm-up; see Warm).
func (r *Runner) Run(ctx context.Context, fill Fill, o Options) (Result, error) {
	if err := o.valid(); err != nil {
		return Result{}, err
	}
	before, err := selfCPU()
	if err != nil {
		return Result{}, err
	}
	res := r.phase(ctx, fill, o, true)
	after, err := selfCPU()
	if err != nil {
		return Result{}, err
	}
	res.ClientCPU = after - before
	return res, ctx.Err()
}

// recorder is one worker's tally; workers never share one, so the hot path
// takes no lock.
type recorder struct {
	lat      []time.Duration
	errors   uint64
	statuses map[int]uint64
	firstErr string
}

func (rec *recorder) add(d time.Duration, status int, err error) {
	rec.lat = append(rec.lat, d)
	if err == nil && status >= 200 && status < 300 {
		return
	}
	rec.errors++
	if err != nil {
		status = 0
		if rec.firstErr == "" {
			rec.firstErr = err.Error()
		}
	} else if rec.firstErr == "" {
		rec.firstErr = "HTTP " + strconv.Itoa(status)
	}
	rec.statuses[status]++
}

func (r *Runner) do(fill Fill, n uint64, timeout time.Duration, req *fasthttp.Request, resp *fasthttp.Response) (int, error) {
	req.Reset()
	resp.Reset()
	fill(req, n)
	req.URI().SetHost(r.addr)
	if err := r.client.DoTimeout(req, resp, timeout); err != nil {
		return 0, err
	}
	return resp.StatusCode(), nil
}

func (r *Runner) phase(ctx context.Context, fill Fill, o Options, measure bool) Result {
	start := time.Now()
	deadline := start.Add(o.Duration)
	recs := make([]*recorder, o.Concurrency)
	for i := range recs {
		recs[i] = &recorder{statuses: map[int]uint64{}}
	}
	var dropped atomic.Uint64
	var wg sync.WaitGroup
	if o.Rate > 0 {
		dropped.Store(r.openLoop(ctx, fill, o, start, deadline, recs, &wg))
	} else {
		var issued atomic.Uint64
		for _, rec := range recs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				for ctx.Err() == nil {
					t0 := time.Now()
					if !t0.Before(deadline) {
						return
					}
					n := issued.Add(1)
					if n > o.MaxRequests {
						return
					}
					status, err := r.do(fill, n-1, o.Timeout, req, resp)
					rec.add(time.Since(t0), status, err)
				}
			}()
		}
		wg.Wait()
	}
	res := Result{Elapsed: time.Since(start), Statuses: map[int]uint64{}, Dropped: dropped.Load()}
	if !measure {
		return res
	}
	for _, rec := range recs {
		res.Latencies = append(res.Latencies, rec.lat...)
		res.Errors += rec.errors
		for s, c := range rec.statuses {
			res.Statuses[s] += c
		}
		if res.FirstErr == "" {
			res.FirstErr = rec.firstErr
		}
	}
	res.Requests = uint64(len(res.Latencies))
	slices.Sort(res.Latencies)
	return res
}

// openLoop schedules requests at o.Rate and hands them to o.Concurrency
// workers. A request that finds every worker busy and the queue full is
// dropped and counted rather than delayed, so the offered rate stays fixed.
func (r *Runner) openLoop(ctx context.Context, fill Fill, o Options, start, deadline time.Time, recs []*recorder, wg *sync.WaitGroup) uint64 {
	type job struct {
		n  uint64
		at time.Time
	}
	jobs := make(chan job, o.Concurrency)
	for _, rec := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for j := range jobs {
				status, err := r.do(fill, j.n, o.Timeout, req, resp)
				rec.add(time.Since(j.at), status, err)
			}
		}()
	}
	interval := time.Duration(float64(time.Second) / o.Rate)
	var dropped uint64
	for n := uint64(0); n < o.MaxRequests && ctx.Err() == nil; n++ {
		at := start.Add(time.Duration(n) * interval)
		if !at.Before(deadline) {
			break
		}
		// Behind schedule, send at once: sleeping would lower the rate.
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		select {
		case jobs <- job{n: n, at: at}:
		default:
			dropped++
		}
	}
	close(jobs)
	wg.Wait()
	return dropped
}
