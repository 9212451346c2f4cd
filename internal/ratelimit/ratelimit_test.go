package ratelimit_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tidings/internal/ratelimit"
	"tidings/internal/testenv"
)

// limit is small so that a test spends a whole budget in a few calls.
const limit = 3

// setup returns a Redis client and a key prefix private to the test
// (testenv also removes the "rate:"-prefixed buckets redis_rate writes).
func setup(t *testing.T) (*redis.Client, string) {
	t.Helper()
	return testenv.Redis(t)
}

// allow counts one request and fails the test on a Redis error.
func allow(t *testing.T, l *ratelimit.Limiter, tenant string) ratelimit.Result {
	t.Helper()
	r, err := l.Allow(t.Context(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// spend uses up tenant's whole budget, checking each request is allowed.
func spend(t *testing.T, l *ratelimit.Limiter, tenant string) {
	t.Helper()
	for i := range limit {
		if r := allow(t, l, tenant); !r.Allowed {
			t.Fatalf("request %d of %d refused: %+v", i+1, limit, r)
		}
	}
}

func TestAllowWithinBudget(t *testing.T) {
	t.Parallel()
	rdb, prefix := setup(t)
	l := ratelimit.New(rdb, limit, prefix)
	if l.Limit() != limit || l.Window() != time.Minute {
		t.Fatalf("limit %d per %v, want %d per minute", l.Limit(), l.Window(), limit)
	}

	for i, wantRemaining := range []int{2, 1, 0} {
		got := allow(t, l, "org_a")
		want := ratelimit.Result{Allowed: true, Limit: limit, Remaining: wantRemaining}
		if got != want {
			t.Fatalf("request %d: %+v, want %+v", i+1, got, want)
		}
	}
}

func TestAllowRefusesOverBudget(t *testing.T) {
	t.Parallel()
	rdb, prefix := setup(t)
	l := ratelimit.New(rdb, limit, prefix)
	spend(t, l, "org_a")

	// The budget refills one request every minute/limit, so the wait is
	// at most that, and never 0: clients sleep Retry-After seconds.
	maxWait := int((time.Minute / limit).Seconds())
	for i := range 2 {
		r := allow(t, l, "org_a")
		if r.Allowed || r.Remaining != 0 || r.Limit != limit {
			t.Fatalf("request %d over the limit: %+v, want refused with 0 remaining", limit+1+i, r)
		}
		if r.RetryAfter < 1 || r.RetryAfter > maxWait {
			t.Fatalf("RetryAfter %d, want 1..%d seconds", r.RetryAfter, maxWait)
		}
	}
}

// Waiting the RetryAfter a refusal gives is enough to be let in again. A
// short period keeps the wait to about a second.
func TestRetryAfterIsEnough(t *testing.T) {
	t.Parallel()
	rdb, prefix := setup(t)
	l := ratelimit.NewPer(rdb, limit, limit*time.Second, prefix)
	spend(t, l, "org_a")

	r := allow(t, l, "org_a")
	if r.Allowed || r.RetryAfter != 1 {
		t.Fatalf("%+v, want refused with RetryAfter 1 (one slot a second)", r)
	}
	time.Sleep(time.Duration(r.RetryAfter) * time.Second)
	if r := allow(t, l, "org_a"); !r.Allowed {
		t.Fatalf("refused after waiting RetryAfter: %+v", r)
	}
}

func TestBudgetsArePerTenant(t *testing.T) {
	t.Parallel()
	rdb, prefix := setup(t)
	l := ratelimit.New(rdb, limit, prefix)
	spend(t, l, "org_a")
	if r := allow(t, l, "org_a"); r.Allowed {
		t.Fatalf("org_a over its budget: %+v", r)
	}

	if r := allow(t, l, "org_b"); !r.Allowed || r.Remaining != limit-1 {
		t.Fatalf("org_b after org_a spent its budget: %+v, want allowed with %d remaining", r, limit-1)
	}
}

// Two API instances are two processes, each with its own client and
// limiter, on one Redis: a tenant gets one budget, not one per instance.
func TestInstancesShareBudget(t *testing.T) {
	t.Parallel()
	rdb, prefix := setup(t)
	opt, err := redis.ParseURL(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	rdb2 := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb2.Close() })
	one, two := ratelimit.New(rdb, limit, prefix), ratelimit.New(rdb2, limit, prefix)

	for i, l := range []*ratelimit.Limiter{one, two, one} {
		if r := allow(t, l, "org_a"); !r.Allowed || r.Remaining != limit-1-i {
			t.Fatalf("request %d: %+v, want allowed with %d remaining", i+1, r, limit-1-i)
		}
	}
	for name, l := range map[string]*ratelimit.Limiter{"one": one, "two": two} {
		if r := allow(t, l, "org_a"); r.Allowed {
			t.Fatalf("instance %s allowed request %d: %+v", name, limit+1, r)
		}
	}
}

// The prefix is what keeps the budgets of tests (and of separately
// configured deployments on one Redis) apart.
func TestPrefixesSeparateBudgets(t *testing.T) {
	t.Parallel()
	rdb, prefix := setup(t)
	spent := ratelimit.New(rdb, limit, prefix+"one:")
	fresh := ratelimit.New(rdb, limit, prefix+"two:")
	spend(t, spent, "org_a")

	if r := allow(t, fresh, "org_a"); !r.Allowed || r.Remaining != limit-1 {
		t.Fatalf("same tenant under another prefix: %+v, want a full budget", r)
	}
}

func TestLeaseSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		desc  string
		limit int
		want  int
	}{
		{desc: "the spec's 100 a minute: no lease", limit: 100, want: 1},
		{desc: "just under two leases' worth", limit: 199, want: 1},
		{desc: "1% of the limit", limit: 200, want: 2},
		{desc: "1% of a large limit", limit: 50_000, want: 500},
		{desc: "capped", limit: 100_000_000, want: ratelimit.MaxLease},
	} {
		if got := ratelimit.LeaseSize(tt.limit); got != tt.want {
			t.Errorf("%s: LeaseSize(%d) = %d, want %d", tt.desc, tt.limit, got, tt.want)
		}
	}
}

// instance is another API process: its own Redis client (counting the
// limiter's round trips) and its own limiter.
type instance struct {
	*ratelimit.Limiter
	rdb   *redis.Client
	calls atomic.Int64
}

func newInstance(t *testing.T, n int, prefix string, opts ...ratelimit.Option) *instance {
	t.Helper()
	opt, err := redis.ParseURL(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{rdb: redis.NewClient(opt)}
	in.rdb.AddHook(callCounter{&in.calls})
	t.Cleanup(func() { _ = in.rdb.Close() })
	in.Limiter = ratelimit.NewPer(in.rdb, n, time.Hour, prefix, opts...)
	return in
}

// callCounter counts script calls (EVALSHA, and EVAL when the script was
// not loaded yet): the limiter's round trips.
type callCounter struct{ n *atomic.Int64 }

func (c callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// On one instance a lease changes neither the headers nor the refusal: the
// same Remaining as one request per round trip, the same 429 after the
// budget, with a tenth of the round trips.
func TestLeaseKeepsRemainingExactOnOneInstance(t *testing.T) {
	t.Parallel()
	const n = 1000 // lease 10
	_, prefix := setup(t)
	in := newInstance(t, n, prefix)
	if in.Lease() != 10 {
		t.Fatalf("lease %d, want 10", in.Lease())
	}
	for i := 1; i <= n; i++ {
		r := allow(t, in.Limiter, "org_a")
		if want := (ratelimit.Result{Allowed: true, Limit: n, Remaining: n - i}); r != want {
			t.Fatalf("request %d: %+v, want %+v", i, r, want)
		}
	}
	maxWait := int(math.Ceil((time.Hour / n).Seconds()))
	for i := range 3 {
		r := allow(t, in.Limiter, "org_a")
		if r.Allowed || r.Remaining != 0 || r.RetryAfter < 1 || r.RetryAfter > maxWait {
			t.Fatalf("request %d: %+v, want refused, 0 remaining, RetryAfter 1..%d", n+1+i, r, maxWait)
		}
	}
	// 100 leases and 3 refusals; the first call may also load the script.
	if calls := in.calls.Load(); calls > n/10+3+1 {
		t.Fatalf("%d script calls for %d requests, want at most %d", calls, n+3, n/10+4)
	}
}

// Callers of one instance share its leases: together they get the budget,
// no more, no less.
func TestLeaseConcurrentCallersGetTheBudget(t *testing.T) {
	t.Parallel()
	const n = 2000 // lease 20
	_, prefix := setup(t)
	in := newInstance(t, n, prefix)
	start := time.Now()
	admitted := hammer(t, 16, []*instance{in}, "org_a")
	if bound := n + refill(n, time.Since(start)); admitted < n || admitted > bound {
		t.Fatalf("admitted %d, want %d (at most %d with the refill)", admitted, n, bound)
	}
}

// The overshoot bound (docs/decisions.md): tokens leased before a window
// can be spent in it, so N instances admit at most limit + N*(lease-1)
// (plus the refill) in a window that starts with a full bucket. The worst
// case is built directly: each instance holds lease-1 tokens when the
// bucket becomes full again, then every instance is driven until it
// refuses. Without earlier leases, exactly the limit gets through.
func TestLeaseOvershootAcrossInstancesIsBounded(t *testing.T) {
	t.Parallel()
	const n, instances = 3000, 3 // lease 30
	rdb, prefix := setup(t)
	var ins []*instance
	for range instances {
		// Leases that outlive the test: only the count bounds them.
		ins = append(ins, newInstance(t, n, prefix, ratelimit.WithLease(ratelimit.LeaseSize(n), time.Hour)))
	}
	lease := ins[0].Lease()

	start := time.Now()
	admitted := hammer(t, 8, ins, "org_a")
	if bound := n + refill(n, time.Since(start)); admitted < n || admitted > bound {
		t.Fatalf("fresh bucket: admitted %d, want %d (at most %d with the refill)", admitted, n, bound)
	}

	for _, in := range ins {
		if r := allow(t, in.Limiter, "org_b"); !r.Allowed {
			t.Fatalf("first request of org_b refused: %+v", r)
		}
	}
	// The window starts: the shared bucket is full again, as it is once
	// the period has passed, while every instance still holds lease-1.
	if err := rdb.Del(t.Context(), "rate:"+prefix+"rl:org_b").Err(); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	admitted = hammer(t, 8, ins, "org_b")
	overshoot := instances * (lease - 1)
	if bound := n + overshoot + refill(n, time.Since(start)); admitted < n+overshoot || admitted > bound {
		t.Fatalf("window after a refill: admitted %d, want %d + %d held in leases (at most %d with the refill)",
			admitted, n, overshoot, bound)
	}
}

// A lease's unspent tokens go back to the shared bucket once it expires,
// with the instance's next take: a tenant loses nothing to a lease held by
// an instance it stopped calling, once that instance is called again.
func TestExpiredLeaseGoesBack(t *testing.T) {
	t.Parallel()
	const n = 200 // lease 2
	_, prefix := setup(t)
	const ttl = 100 * time.Millisecond
	one := newInstance(t, n, prefix, ratelimit.WithLease(2, ttl))
	two := newInstance(t, n, prefix, ratelimit.WithLease(2, ttl))

	if r := allow(t, one.Limiter, "org_a"); !r.Allowed || r.Remaining != n-1 {
		t.Fatalf("first request: %+v, want allowed with %d remaining", r, n-1)
	}
	// one holds a token; two gets the rest.
	got := 0
	for allow(t, two.Limiter, "org_a").Allowed {
		got++
	}
	if got != n-2 {
		t.Fatalf("second instance admitted %d, want %d", got, n-2)
	}
	time.Sleep(2 * ttl)
	// one's token expired: it goes back and is taken again, and that is
	// the budget's last.
	if r := allow(t, one.Limiter, "org_a"); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("after the lease expired: %+v, want allowed with 0 remaining", r)
	}
	if r := allow(t, one.Limiter, "org_a"); r.Allowed {
		t.Fatalf("past the budget: %+v", r)
	}
}

// Tokens given back never fill a bucket past its burst: when the bucket
// refilled meanwhile, they are dropped.
func TestGivenBackTokensDoNotOverfill(t *testing.T) {
	t.Parallel()
	const n = 200 // lease 2
	rdb, prefix := setup(t)
	const ttl = 50 * time.Millisecond
	one := newInstance(t, n, prefix, ratelimit.WithLease(2, ttl))
	allow(t, one.Limiter, "org_a") // holds 1
	if err := rdb.Del(t.Context(), "rate:"+prefix+"rl:org_a").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl)
	// Gives back 1 to a full bucket, takes 2, spends 1.
	if r := allow(t, one.Limiter, "org_a"); !r.Allowed || r.Remaining != n-1 {
		t.Fatalf("%+v, want allowed with %d remaining (a full bucket, no more)", r, n-1)
	}
}

// Without Redis a request is an error, as before leases (the API answers
// 500); tokens already leased are still spent until they run out.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	_, prefix := setup(t)
	exact := newInstance(t, 100, prefix)
	leased := newInstance(t, 1000, prefix) // lease 10
	allow(t, leased.Limiter, "org_a")
	_ = exact.rdb.Close()
	_ = leased.rdb.Close()

	if _, err := exact.Allow(t.Context(), "org_a"); err == nil {
		t.Fatal("no error without Redis (no lease)")
	}
	for i := range 9 {
		if r := allow(t, leased.Limiter, "org_a"); !r.Allowed {
			t.Fatalf("leased token %d refused: %+v", i+2, r)
		}
	}
	if _, err := leased.Allow(t.Context(), "org_a"); err == nil {
		t.Fatal("no error without Redis once the lease is spent")
	}
}

// hammer calls Allow for tenant from callers goroutines per instance, each
// until it is refused, and returns how many requests were admitted.
func hammer(t *testing.T, callers int, ins []*instance, tenant string) int {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, callers*len(ins))
	for _, in := range ins {
		for range callers {
			wg.Go(func() {
				for {
					r, err := in.Allow(context.Background(), tenant)
					if err != nil {
						errc <- err
						return
					}
					if !r.Allowed {
						return
					}
					admitted.Add(1)
				}
			})
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	return int(admitted.Load())
}

// refill is how many tokens a bucket of n an hour can gain in d, rounded
// up, plus one for a token partly refilled when d started.
func refill(n int, d time.Duration) int {
	return int(math.Ceil(d.Hours()*float64(n))) + 1
}
