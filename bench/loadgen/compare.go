package loadgen

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// Target is one server to load. PID, when set, is the server's process id,
// so its CPU time per request can be read from /proc.
type Target struct {
	Name string
	URL  string
	PID  int
}

// run is one measured run of one target.
type run struct {
	round  int
	target int
	res    Result
	srvCPU time.Duration // 0 when unknown
}

// Compare loads each target in turn for rounds rounds and prints every run,
// then each target's medians and the ratio of every target's rate to the
// last target's (the baseline). Runs of one round are back to back and the
// order flips every round (A B, B A, A B...), so a drift in the machine's
// background load biases no target.
func Compare(ctx context.Context, w io.Writer, targets []Target, fill Fill, o Options, rounds int) error {
	runners := make([]*Runner, len(targets))
	for i, t := range targets {
		r, err := NewRunner(ctx, t.URL, o.Concurrency)
		if err != nil {
			return fmt.Errorf("target %s: %w", t.Name, err)
		}
		runners[i] = r
	}
	fmt.Fprintf(w, rowFormat, "target", "round", "req/s", "errors", "p50", "p90", "p99", "max", "srv cpu/req", "gen cpu/req")
	var runs []run
	for round := 1; round <= rounds; round++ {
		order := make([]int, len(targets))
		for i := range order {
			order[i] = i
		}
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, i := range order {
			rn, err := measure(ctx, runners[i], targets[i], fill, o)
			if err != nil {
				return fmt.Errorf("target %s: %w", targets[i].Name, err)
			}
			rn.round, rn.target = round, i
			runs = append(runs, rn)
			fmt.Fprint(w, row(targets[i].Name, fmt.Sprint(round), rn))
			fmt.Fprintf(w, "statuses: 2xx=%d %s\n", rn.res.Requests-rn.res.Errors, fmtStatuses(rn.res.Statuses))
			if rn.res.Errors > 0 {
				fmt.Fprintf(w, "  %s: %d errors %v, first: %s\n", targets[i].Name, rn.res.Errors, rn.res.Statuses, rn.res.FirstErr)
			}
			if rn.res.Dropped > 0 {
				fmt.Fprintf(w, "  %s: %d requests dropped (concurrency limit reached at the offered rate)\n", targets[i].Name, rn.res.Dropped)
			}
		}
	}
	for i, t := range targets {
		fmt.Fprint(w, medianRow(t.Name, runsOf(runs, i)))
	}
	base := len(targets) - 1
	for i := 0; i < base; i++ {
		var perRound []float64
		for round := 1; round <= rounds; round++ {
			a, b := rateOf(runs, round, i), rateOf(runs, round, base)
			if b > 0 {
				perRound = append(perRound, a/b)
			}
		}
		fmt.Fprintf(w, "ratio %s/%s: %.3f (median of %d back-to-back rounds: %s; ratio of median rates %.3f)\n",
			targets[i].Name, targets[base].Name, median(perRound), len(perRound), fmtFloats(perRound),
			medianRate(runsOf(runs, i))/medianRate(runsOf(runs, base)))
	}
	return nil
}

func measure(ctx context.Context, r *Runner, t Target, fill Fill, o Options) (run, error) {
	if err := r.Warm(ctx, fill, o); err != nil {
		return run{}, err
	}
	var before time.Duration
	if t.PID > 0 {
		var err error
		if before, err = ProcCPU(t.PID); err != nil {
			return run{}, err
		}
	}
	res, err := r.Run(ctx, fill, o)
	if err != nil {
		return run{}, err
	}
	rn := run{res: res}
	if t.PID > 0 {
		after, err := ProcCPU(t.PID)
		if err != nil {
			return run{}, err
		}
		rn.srvCPU = after - before
	}
	return rn, nil
}

// rowFormat lays out the table; a run's columns are all strings by then.
const rowFormat = "%-8s %6s %8s %7s %8s %8s %8s %9s %12s %12s\n"

func row(name, round string, rn run) string {
	r := rn.res
	return fmt.Sprintf(rowFormat, name, round, fmt.Sprintf("%.0f", r.Rate()), fmt.Sprint(r.Errors),
		ms(r.Percentile(50)), ms(r.Percentile(90)), ms(r.Percentile(99)), ms(r.Max()),
		perReq(rn.srvCPU, r.Requests), perReq(r.ClientCPU, r.Requests))
}

// medianRow takes the median of each column separately.
func medianRow(name string, runs []run) string {
	col := func(f func(run) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return median(v)
	}
	d := func(f func(Result) time.Duration) string {
		return ms(time.Duration(col(func(r run) float64 { return float64(f(r.res)) })))
	}
	srv := "-"
	if runs[0].srvCPU > 0 {
		srv = fmt.Sprintf("%.0fµs", col(func(r run) float64 { return us(r.srvCPU, r.res.Requests) }))
	}
	return fmt.Sprintf(rowFormat, name, "median", fmt.Sprintf("%.0f", col(func(r run) float64 { return r.res.Rate() })),
		fmt.Sprintf("%.0f", col(func(r run) float64 { return float64(r.res.Errors) })),
		d(func(r Result) time.Duration { return r.Percentile(50) }), d(func(r Result) time.Duration { return r.Percentile(90) }),
		d(func(r Result) time.Duration { return r.Percentile(99) }), d(Result.Max), srv,
		fmt.Sprintf("%.0fµs", col(func(r run) float64 { return us(r.res.ClientCPU, r.res.Requests) })))
}

func runsOf(runs []run, target int) []run {
	var out []run
	for _, r := range runs {
		if r.target == target {
			out = append(out, r)
		}
	}
	return out
}

func rateOf(runs []run, round, target int) float64 {
	for _, r := range runs {
		if r.round == round && r.target == target {
			return r.res.Rate()
		}
	}
	return 0
}

func medianRate(runs []run) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = r.res.Rate()
	}
	return median(v)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtFloats(v []float64) string {
	parts := make([]string, len(v))
	for i, f := range v {
		parts[i] = fmt.Sprintf("%.3f", f)
	}
	return strings.Join(parts, " ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func us(d time.Duration, n uint64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d) / float64(time.Microsecond) / float64(n)
}

func perReq(d time.Duration, n uint64) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", us(d, n))
}

// fmtStatuses is "429=27000 500=1", the statuses of the answers that
// were not 2xx, ascending (0 stands for transport errors).
func fmtStatuses(m map[int]uint64) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
