// Package sendrate is PROVIDER_RATE_PER_SECOND (ADDENDUM 13): one token
// bucket in Redis that every api and worker process takes from before
// each message goes to the provider, so all of them together stay under
// the provider's rate.
//
// It is go-redis/redis_rate's GCRA (one key, exact across processes: the
// state is a single "theoretical arrival time" that Redis moves
// atomically) with two bursts on the same key for two priorities:
// transactional sends (High) may use the whole burst, background sends
// (Low: sequence steps, broadcasts) only the part above a reserve, so when
// both want more than the rate, High takes first and Low fills what is
// left; when High is idle, Low gets the whole rate. A provider's 429 holds
// the bucket for everybody (Backoff): a key with a time to live that every
// Wait reads first.
package sendrate

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Priority says who takes first.
type Priority int

// Priorities.
const (
	Low  Priority = iota // sequence steps, broadcasts
	High                 // transactional sends
)

// Bucket is the shared bucket. A nil *Bucket (rate 0) never waits and
// never touches Redis.
type Bucket struct {
	rdb   redis.UniversalClient
	lim   *redis_rate.Limiter
	key   string
	hold  string
	high  redis_rate.Limit
	low   redis_rate.Limit
	sleep func(context.Context, time.Duration) error
	// turn lets one taker per priority at a time ask Redis: hundreds of
	// concurrent senders polling it on every refusal would flood it (and
	// measured, lose 4% of the rate); queued locally, each process has at
	// most one request per priority in flight.
	turn [2]chan struct{}
}

// New returns the bucket of perSecond messages a second under prefix, or
// nil when perSecond is 0 (no limit).
func New(rdb redis.UniversalClient, prefix string, perSecond int) *Bucket {
	if perSecond <= 0 || rdb == nil {
		return nil
	}
	// A tenth of a second of burst (at least 1): smooth enough that a
	// minute's rate is the rate, loose enough that concurrent takers do
	// not queue behind each other's round trips. Low may use half of it.
	burst := max(1, perSecond/10)
	// One hash tag, so a Redis Cluster keeps both keys on one node.
	return &Bucket{rdb: rdb, lim: redis_rate.NewLimiter(rdb),
		key: prefix + "sendrate:{provider}", hold: prefix + "sendrate:{provider}:hold",
		high:  redis_rate.Limit{Rate: perSecond, Burst: burst, Period: time.Second},
		low:   redis_rate.Limit{Rate: perSecond, Burst: max(1, burst/2), Period: time.Second},
		sleep: sleepCtx, turn: [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Wait returns once a message may go to the provider, or with ctx's error.
func (b *Bucket) Wait(ctx context.Context, p Priority) error {
	_, err := b.Take(ctx, p, 1)
	return err
}

// DefaultBackoff is how long a 429 without a Retry-After holds the bucket.
const DefaultBackoff = time.Second

// Backoff holds the bucket for d (DefaultBackoff when d is 0) for every
// process: the provider said it is over its rate. A longer hold already
// set is kept.
func (b *Bucket) Backoff(ctx context.Context, d time.Duration) error {
	if b == nil {
		return nil
	}
	if d <= 0 {
		d = DefaultBackoff
	}
	d = min(d, time.Minute)
	cur, err := b.rdb.PTTL(ctx, b.hold).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if cur >= d {
		return nil
	}
	return b.rdb.Set(ctx, b.hold, 1, d).Err()
}

// Take returns once at least one message may go to the provider, and
// takes as many as the bucket allows at that moment, at most n: a batch
// writes the records of exactly the messages it may send now, so none of
// them waits for the rate after its record exists (ADDENDUM 19). A nil
// bucket takes all n at once.
func (b *Bucket) Take(ctx context.Context, p Priority, n int) (int, error) {
	if b == nil || n <= 0 {
		return n, nil
	}
	lim := b.low
	if p == High {
		lim = b.high
	}
	turn := b.turn[min(max(int(p), 0), 1)]
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-turn }()
	for {
		held, err := b.rdb.PTTL(ctx, b.hold).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, err
		}
		if held > 0 {
			if err := b.sleep(ctx, held); err != nil {
				return 0, err
			}
			continue
		}
		res, err := b.lim.AllowAtMost(ctx, b.key, lim, n)
		if err != nil {
			return 0, err
		}
		if res.Allowed > 0 {
			return res.Allowed, nil
		}
		wait := res.RetryAfter + time.Duration(rand.Int64N(int64(100*time.Microsecond)+int64(res.RetryAfter)/10))
		if err := b.sleep(ctx, wait); err != nil {
			return 0, err
		}
	}
}
