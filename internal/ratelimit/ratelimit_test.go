package ratelimit_test

import (
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
