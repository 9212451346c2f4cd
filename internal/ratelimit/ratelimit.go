// Package ratelimit enforces the per-tenant request budget: one GCRA bucket
// per tenant in Redis, shared by every API instance (a tenant may burst its
// whole per-minute budget, then it refills evenly).
//
// Under a small limit every request spends its token in Redis, exactly as
// one bucket would. Under a large one (LeaseSize > 1) an instance takes
// tokens from the shared bucket a few at a time (a lease) and spends them
// in memory, so most requests make no Redis round trip. Tokens leave the
// shared bucket before they are spent, so the instances together admit no
// more than the bucket gives out; what a lease changes is when: tokens
// taken before a window can be spent in it. docs/decisions.md ("Request
// rate limit") derives the bound on that overshoot and on the refusals a
// lease held elsewhere can cause.
package ratelimit

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lease bounds: the lease is LeaseDivisor-th of the limit, at most
// MaxLease tokens, and its tokens may be spent for DefaultLeaseTTL after
// they were taken.
const (
	LeaseDivisor    = 100
	MaxLease        = 1000
	DefaultLeaseTTL = time.Second
)

// LeaseSize is the number of tokens an instance takes from the shared
// bucket at once for a limit of n: 1 (no lease: every request goes to
// Redis) below 2*LeaseDivisor, else n/LeaseDivisor up to MaxLease. So the
// tokens one instance can hold are at most 1% of the budget.
func LeaseSize(n int) int {
	return min(max(n/LeaseDivisor, 1), MaxLease)
}

// Limiter limits requests per tenant.
type Limiter struct {
	rdb    redis.UniversalClient
	limit  int
	period time.Duration
	prefix string
	lease  int
	ttl    time.Duration

	// buckets holds each tenant's lease (*lease), only when lease > 1.
	buckets   sync.Map
	sweepMu   sync.Mutex
	nextSweep time.Time
}

// Option changes a Limiter from its defaults.
type Option func(*Limiter)

// WithLease sets the lease size and how long its tokens may be spent
// (tests; production uses LeaseSize and DefaultLeaseTTL). A size of 1 turns
// leases off.
func WithLease(size int, ttl time.Duration) Option {
	return func(l *Limiter) { l.lease, l.ttl = max(size, 1), ttl }
}

// New builds a limiter of perMinute requests per tenant. prefix namespaces
// the Redis keys (tests give each test its own).
func New(rdb redis.UniversalClient, perMinute int, prefix string, opts ...Option) *Limiter {
	return NewPer(rdb, perMinute, time.Minute, prefix, opts...)
}

// NewPer builds a limiter of n requests per period. Tests use a long period
// so that refill during a slow (-race) run cannot blur the 101st request.
func NewPer(rdb redis.UniversalClient, n int, period time.Duration, prefix string, opts ...Option) *Limiter {
	l := &Limiter{rdb: rdb, limit: n, period: period, prefix: prefix, lease: LeaseSize(n), ttl: DefaultLeaseTTL}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Result is the outcome of one request's check.
type Result struct {
	Allowed    bool
	Limit      int
	Remaining  int
	RetryAfter int // whole seconds, at least 1 when not allowed
}

// Allow counts one request of tenant. A refusal is always Redis's answer
// (the shared bucket has no whole token), so its RetryAfter is exact; an
// error means Redis could not be asked and the caller decides (the API
// answers 500, as it did before leases). tenant is kept (as the key of its
// lease), so it must not alias a buffer fasthttp reuses; the principal's
// tenant id does not.
func (l *Limiter) Allow(ctx context.Context, tenant string) (Result, error) {
	if l.lease <= 1 {
		taken, res, err := l.take(ctx, tenant, 1, 0)
		if err == nil && taken == 1 {
			res.Allowed = true
		}
		return res, err
	}
	return l.allowLeased(ctx, tenant)
}

// Limit is the configured requests per period.
func (l *Limiter) Limit() int { return l.limit }

// Window is the period the limit applies to.
func (l *Limiter) Window() time.Duration { return l.period }

// Lease is the number of tokens an instance takes from Redis at once.
func (l *Limiter) Lease() int { return l.lease }

// lease is one tenant's tokens taken from the shared bucket and not spent
// yet, on this instance.
type lease struct {
	mu     sync.Mutex
	tokens int
	// shared is what the shared bucket had left when the lease was
	// taken: Remaining is shared + tokens, exact on a single instance up
	// to the refill since.
	shared  int
	expires time.Time
	// inflight is the Redis call taking the next lease; requests that
	// find the lease empty meanwhile wait for it rather than each making
	// their own.
	inflight *fetch
	// dead: swept from the map; a request holding it looks again.
	dead bool
}

type fetch struct {
	done chan struct{}
	res  Result
	err  error
}

func (l *Limiter) allowLeased(ctx context.Context, tenant string) (Result, error) {
	for {
		b := l.bucket(tenant)
		b.mu.Lock()
		if b.dead {
			b.mu.Unlock()
			continue
		}
		now := time.Now()
		if b.tokens > 0 && now.Before(b.expires) {
			b.tokens--
			res := Result{Allowed: true, Limit: l.limit, Remaining: b.shared + b.tokens}
			b.mu.Unlock()
			return res, nil
		}
		if f := b.inflight; f != nil {
			b.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
			// A refusal or an error answers everyone who was waiting for
			// it: they asked the same question at the same time.
			if f.err != nil || !f.res.Allowed {
				return f.res, f.err
			}
			continue
		}
		// Expired tokens go back to the shared bucket with the next take.
		back := b.tokens
		b.tokens = 0
		f := &fetch{done: make(chan struct{})}
		b.inflight = f
		b.mu.Unlock()

		taken, res, err := l.take(ctx, tenant, l.lease, back)

		b.mu.Lock()
		b.inflight = nil
		if err == nil && taken > 0 {
			// The clock starts before the call: a lease never outlives
			// its TTL counted from when Redis gave it out.
			b.tokens, b.shared, b.expires = taken-1, res.Remaining, now.Add(l.ttl)
			res.Allowed, res.Remaining = true, b.shared+b.tokens
		}
		b.mu.Unlock()
		f.res, f.err = res, err
		close(f.done)
		l.sweep(now)
		return res, err
	}
}

func (l *Limiter) bucket(tenant string) *lease {
	if b, ok := l.buckets.Load(tenant); ok {
		return b.(*lease)
	}
	b, _ := l.buckets.LoadOrStore(tenant, &lease{})
	return b.(*lease)
}

// sweepEvery is how often the leases of tenants that stopped calling are
// dropped, so the map holds only recently active tenants. Their unspent
// tokens are not given back: the shared bucket refills them anyway.
const sweepEvery = time.Minute

func (l *Limiter) sweep(now time.Time) {
	l.sweepMu.Lock()
	if now.Before(l.nextSweep) {
		l.sweepMu.Unlock()
		return
	}
	l.nextSweep = now.Add(sweepEvery)
	l.sweepMu.Unlock()
	l.buckets.Range(func(k, v any) bool {
		b := v.(*lease)
		b.mu.Lock()
		if b.inflight == nil && !now.Before(b.expires.Add(sweepEvery)) {
			b.dead = true
			l.buckets.Delete(k)
		}
		b.mu.Unlock()
		return true
	})
}

// take gives back `back` tokens and takes up to want from tenant's shared
// bucket in one round trip. It returns how many it took; the result's
// Remaining is what the bucket has left, and when nothing was taken,
// RetryAfter is when the next token comes.
func (l *Limiter) take(ctx context.Context, tenant string, want, back int) (int, Result, error) {
	v, err := gcra.Run(ctx, l.rdb, []string{l.key(tenant)}, l.limit, l.limit, l.period.Seconds(), want, back).Slice()
	if err != nil {
		return 0, Result{}, err
	}
	taken, _ := v[0].(int64)
	remaining, _ := v[1].(int64)
	res := Result{Limit: l.limit, Remaining: int(remaining)}
	if taken == 0 {
		s, _ := v[2].(string)
		wait, _ := strconv.ParseFloat(s, 64)
		res.Remaining = 0
		res.RetryAfter = max(int(math.Ceil(wait)), 1)
	}
	return int(taken), res, nil
}

// key is the bucket's Redis key. It is the key (and the stored value, the
// theoretical arrival time) go-redis/redis_rate used before leases, so
// instances of either version share one budget during a rolling deploy.
func (l *Limiter) key(tenant string) string { return "rate:" + l.prefix + "rl:" + tenant }

// gcra is redis_rate's GCRA with two changes: it takes up to ARGV[4]
// tokens (fewer when fewer are left: whole tokens only) and first gives
// ARGV[5] back. A bucket never holds more than its burst, so tokens given
// back after the bucket refilled are simply dropped.
var gcra = redis.NewScript(`
redis.replicate_commands()
local key = KEYS[1]
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local back = tonumber(ARGV[5])

local emission = period / rate
local burst_offset = emission * burst
-- seconds since 2017-01-01, as redis_rate counts them (float precision).
local t = redis.call("TIME")
local now = (t[1] - 1483228800) + (t[2] / 1000000)

local stored = redis.call("GET", key)
local tat = now
if stored then tat = tonumber(stored) end
tat = math.max(tat - back * emission, now)

-- Whole tokens available; the slack absorbs the float rounding of now
-- (seconds since 2017 in a double), so a full bucket counts as full.
local avail = math.floor((now - (tat - burst_offset)) / emission + 1e-6)
local taken = math.max(math.min(want, avail), 0)
tat = tat + taken * emission

if taken > 0 or back > 0 then
  local reset_after = tat - now
  if reset_after > 0 then
    redis.call("SET", key, tat, "EX", math.ceil(reset_after))
  else
    redis.call("DEL", key)
  end
end
if taken == 0 then
  local retry_after = emission - (now - (tat - burst_offset))
  return {0, 0, tostring(retry_after)}
end
return {taken, avail - taken, "-1"}
`)
