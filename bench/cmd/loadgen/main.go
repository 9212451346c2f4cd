// Command loadgen sends HTTP load at a Tidings API, and optionally at
// baseline servers, on the loopback interface, and prints requests/s, errors
// and latency percentiles per run, medians, and rate ratios against the last
// target. See docs/benchmarks.md.
//
//	loadgen -scenario apikeys -api http://127.0.0.1:18080 -secret s -org bench \
//	        -target api=http://127.0.0.1:18080 -target bare=http://127.0.0.1:18081
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"tidings/bench/loadgen"
)

// Hard bounds, whatever the flags say: this is a measuring tool, not a
// flood.
const (
	maxDuration    = 10 * time.Minute
	maxConcurrency = 1024
	maxRate        = 200000
	maxRequests    = 50_000_000
	maxRounds      = 20
	maxTenants     = 1000
)

// targetsFlag collects repeated -target name=url[,pid=N] values.
type targetsFlag []loadgen.Target

func (t *targetsFlag) String() string { return fmt.Sprint(*t) }

func (t *targetsFlag) Set(v string) error {
	name, rest, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want name=url[,pid=N]")
	}
	u, pidPart, hasPID := strings.Cut(rest, ",pid=")
	tg := loadgen.Target{Name: name, URL: u}
	if hasPID {
		pid, err := strconv.Atoi(pidPart)
		if err != nil {
			return fmt.Errorf("pid: %w", err)
		}
		tg.PID = pid
	}
	*t = append(*t, tg)
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run() error {
	var targets targetsFlag
	scenario := flag.String("scenario", "", "scenario: "+strings.Join(loadgen.ScenarioNames(), ", "))
	api := flag.String("api", "http://127.0.0.1:8080", "base URL of the Tidings API used for setup (loopback only)")
	secret := flag.String("secret", os.Getenv("DASHBOARD_JWT_SECRET"), "the API's DASHBOARD_JWT_SECRET (default from the environment)")
	org := flag.String("org", "", "organisation id for setup (default loadgen_<unix time>)")
	tenants := flag.Int("tenants", 1, "tenants of a many-tenant scenario")
	flag.Var(&targets, "target", "name=url[,pid=N] to load; repeat to compare, the last is the baseline of the ratios (default: the -api URL)")
	conc := flag.Int("c", 16, "closed loop: workers; open loop: most requests in flight")
	rate := flag.Float64("rate", 0, "open loop at this many requests/s (0: closed loop)")
	dur := flag.Duration("d", 10*time.Second, "measured time per run")
	warmup := flag.Duration("warmup", 2*time.Second, "unmeasured load before each run")
	maxReq := flag.Uint64("n", 5_000_000, "stop a run after this many requests")
	rounds := flag.Int("rounds", 3, "runs per target, interleaved")
	timeout := flag.Duration("timeout", 5*time.Second, "per-request timeout")
	flag.Parse()

	sc, ok := loadgen.Scenarios[*scenario]
	if !ok {
		return fmt.Errorf("-scenario must be one of %s", strings.Join(loadgen.ScenarioNames(), ", "))
	}
	switch {
	case *dur <= 0 || *dur > maxDuration || *warmup < 0 || *warmup > maxDuration:
		return fmt.Errorf("-d and -warmup must be within 0-%s", maxDuration)
	case *conc < 1 || *conc > maxConcurrency:
		return fmt.Errorf("-c must be within 1-%d", maxConcurrency)
	case *rate < 0 || *rate > maxRate:
		return fmt.Errorf("-rate must be within 0-%d", maxRate)
	case *maxReq < 1 || *maxReq > maxRequests:
		return fmt.Errorf("-n must be within 1-%d", maxRequests)
	case *rounds < 1 || *rounds > maxRounds:
		return fmt.Errorf("-rounds must be within 1-%d", maxRounds)
	case *tenants < 1 || *tenants > maxTenants:
		return fmt.Errorf("-tenants must be within 1-%d", maxTenants)
	}
	if *org == "" {
		*org = fmt.Sprintf("loadgen_%d", time.Now().Unix())
	}
	if len(targets) == 0 {
		targets = targetsFlag{{Name: "api", URL: *api}}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	env, err := loadgen.NewEnv(ctx, *api, *secret, *org, *tenants)
	if err != nil {
		return err
	}
	fill, err := sc.Setup(ctx, env)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	mode := fmt.Sprintf("closed loop, %d workers", *conc)
	if *rate > 0 {
		mode = fmt.Sprintf("open loop at %.0f req/s, at most %d in flight", *rate, *conc)
	}
	fmt.Printf("scenario %s: %s\n%s, %s per run after %s warm-up, %d rounds, org %s\n",
		sc.Name, sc.Description, mode, *dur, *warmup, *rounds, *org)
	return loadgen.Compare(ctx, os.Stdout, targets, fill, loadgen.Options{
		Concurrency: *conc, Duration: *dur, Warmup: *warmup, MaxRequests: *maxReq, Rate: *rate, Timeout: *timeout,
	}, *rounds)
}
