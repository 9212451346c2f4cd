// Package ratelimit enforces the per-tenant request budget in Redis, so every
// API instance shares one budget per tenant. It wraps go-redis/redis_rate
// (GCRA): a tenant may burst its whole per-minute budget, then refills
// evenly.
package ratelimit

import (
	"context"
	"math"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Limiter limits requests per tenant.
type Limiter struct {
	l      *redis_rate.Limiter
	limit  redis_rate.Limit
	prefix string
}

// New builds a limiter of perMinute requests per tenant. prefix namespaces
// the Redis keys (tests give each test its own).
func New(rdb redis.UniversalClient, perMinute int, prefix string) *Limiter {
	return NewPer(rdb, perMinute, time.Minute, prefix)
}

// NewPer builds a limiter of n requests per period. Tests use a long period
// so that refill during a slow (-race) run cannot blur the 101st request.
func NewPer(rdb redis.UniversalClient, n int, period time.Duration, prefix string) *Limiter {
	return &Limiter{l: redis_rate.NewLimiter(rdb), limit: redis_rate.Limit{Rate: n, Burst: n, Period: period}, prefix: prefix}
}

// Result is the outcome of one request's check.
type Result struct {
	Allowed    bool
	Limit      int
	Remaining  int
	RetryAfter int // whole seconds, at least 1 when not allowed
}

// Allow counts one request of tenant.
func (l *Limiter) Allow(ctx context.Context, tenant string) (Result, error) {
	r, err := l.l.Allow(ctx, l.prefix+"rl:"+tenant, l.limit)
	if err != nil {
		return Result{}, err
	}
	res := Result{Allowed: r.Allowed > 0, Limit: l.limit.Rate, Remaining: r.Remaining}
	if !res.Allowed {
		res.Remaining = 0
		res.RetryAfter = int(math.Ceil(r.RetryAfter.Seconds()))
		if res.RetryAfter < 1 || r.RetryAfter < 0 {
			res.RetryAfter = 1
		}
	}
	return res, nil
}

// Limit is the configured requests per minute.
func (l *Limiter) Limit() int { return l.limit.Rate }

// Window is the period the limit applies to.
func (l *Limiter) Window() time.Duration { return l.limit.Period }
