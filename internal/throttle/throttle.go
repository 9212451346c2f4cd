package throttle

import (
	"context"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Hold is why a message waits and until when: By names the hold as the
// API shows it (`destination:<group>`, `warmup:<domain>`).
type Hold struct {
	Until time.Time
	By    string
}

// Throttle is DESTINATION_LIMITS' buckets, shared by every worker through
// Redis (go-redis/redis_rate's GCRA: one key per group, moved atomically).
// A nil *Throttle holds nothing and touches nothing.
type Throttle struct {
	rdb    redis.UniversalClient
	lim    *redis_rate.Limiter
	prefix string
	limits map[string]Limit
	MX     *MX
	Now    func() time.Time
}

// New returns the throttle of limits, or nil when there are none.
func New(rdb redis.UniversalClient, prefix string, limits []Limit, mx *MX) *Throttle {
	if len(limits) == 0 || rdb == nil {
		return nil
	}
	t := &Throttle{rdb: rdb, lim: redis_rate.NewLimiter(rdb), prefix: prefix, limits: map[string]Limit{}, MX: mx}
	for _, l := range limits {
		t.limits[l.Suffix] = l
	}
	if mx.Limits == nil {
		mx.Limits = limits
	}
	return t
}

func (t *Throttle) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// key is the group's bucket; one hash tag per group, so a Redis Cluster
// keeps each on one node.
func (t *Throttle) key(group string) string { return t.prefix + "throttle:{dest:" + group + "}" }

func (l Limit) rate() redis_rate.Limit {
	return redis_rate.Limit{Rate: l.PerMinute, Burst: l.Burst(), Period: time.Minute}
}

// Admit judges background messages (sequence steps, broadcast messages)
// by their recipients' addresses: for each, nil when it may go now (its
// group's bucket gave it a token, or its domain is in no group), or the
// hold until its group's bucket will have a token for it. The held
// messages of a group are spread over the times the bucket refills (the
// j-th waits j intervals longer), so they come back one token apart rather
// than all at once.
func (t *Throttle) Admit(ctx context.Context, to []string) ([]*Hold, error) {
	out := make([]*Hold, len(to))
	if t == nil {
		return out, nil
	}
	byGroup := map[string][]int{}
	for i, addr := range to {
		if g := t.MX.Group(ctx, domainOf(addr)); g != "" {
			byGroup[g] = append(byGroup[g], i)
		}
	}
	now := t.now()
	for g, idx := range byGroup {
		l := t.limits[g]
		res, err := t.lim.AllowAtMost(ctx, t.key(g), l.rate(), len(idx))
		if err != nil {
			return nil, err
		}
		first := l.Interval()
		if res.RetryAfter > 0 {
			first = res.RetryAfter
		}
		for j, i := range idx[res.Allowed:] {
			out[i] = &Hold{Until: now.Add(first + time.Duration(j)*l.Interval()), By: "destination:" + g}
		}
	}
	return out, nil
}

// TakeFree takes a token for each transactional message whose group's
// bucket has one, and never holds one nor puts a bucket in debt: a
// transactional message goes now, and what it took is what background mail
// cannot take.
func (t *Throttle) TakeFree(ctx context.Context, to []string) error {
	if t == nil {
		return nil
	}
	n := map[string]int{}
	for _, addr := range to {
		if g := t.MX.Group(ctx, domainOf(addr)); g != "" {
			n[g]++
		}
	}
	for g, k := range n {
		if _, err := t.lim.AllowAtMost(ctx, t.key(g), t.limits[g].rate(), k); err != nil {
			return err
		}
	}
	return nil
}

func domainOf(addr string) string {
	return addr[strings.LastIndexByte(addr, '@')+1:]
}
