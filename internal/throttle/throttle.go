package throttle

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Hold is why a message waits and until when: By names the hold as the
// API shows it (`destination:<group>`, `warmup:<domain>`).
type Hold struct {
	Until time.Time
	By    string
}

// Throttle is DESTINATION_LIMITS' buckets, shared by every worker through
// Redis (a GCRA, one key per group moved atomically by take). A nil
// *Throttle holds nothing and touches nothing.
type Throttle struct {
	rdb    redis.UniversalClient
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
	t := &Throttle{rdb: rdb, prefix: prefix, limits: map[string]Limit{}, MX: mx}
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

// take is the group's GCRA: it takes up to ARGV[3] whole tokens (fewer
// when fewer are there) and, when hold is 1, gives the ones it could not
// take the next free places in the group's queue of holds (KEYS[2], the
// end of the last hold given): the first where the bucket's next token is
// (or after the queue's end), then one interval apart. It answers {taken,
// seconds from now to the first hold}.
//
// go-redis/redis_rate's AllowAtMost, used before, took the fractional
// tokens there were (29.7 of 30 asked) but answered whole ones (29): the
// fraction was lost at every partial take, and a group re-polled by many
// dispatches a second went at 87.6-99.8% of its limit (BenchmarkBroadcastThrottled).
// And its holds were counted from the bucket alone, so two batches held at
// once were given the same times and came back to find one token for two.
var take = redis.NewScript(`
redis.replicate_commands()
local burst = tonumber(ARGV[1])
local emission = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local hold = tonumber(ARGV[4])
local t = redis.call("TIME")
local now = (t[1] - 1483228800) + (t[2] / 1000000)

local stored = redis.call("GET", KEYS[1])
local tat = now
if stored then tat = math.max(tonumber(stored), now) end
-- Whole tokens only; the slack absorbs the float rounding of now.
local avail = math.floor((now - (tat - emission * burst)) / emission + 1e-6)
-- A full bucket has had no taker for a burst's time: the holds queued
-- before did not come back (their broadcast cancelled, their steps gone),
-- so the queue starts again instead of holding new messages behind them.
if avail >= burst then redis.call("DEL", KEYS[2]) end
local taken = math.max(math.min(want, avail), 0)
if taken > 0 then
  tat = tat + taken * emission
  redis.call("SET", KEYS[1], string.format("%.6f", tat), "EX", math.ceil(tat - now) + 1)
end
local first = 0
local left = want - taken
if hold == 1 and left > 0 then
  -- The bucket's next token, or the end of the holds already given.
  local start = now + (emission - (now - (tat - emission * burst)))
  local q = redis.call("GET", KEYS[2])
  if q then start = math.max(start, tonumber(q)) end
  local stop = start + left * emission
  redis.call("SET", KEYS[2], string.format("%.6f", stop), "EX", math.ceil(stop - now) + 1)
  first = start - now
end
return {taken, string.format("%.6f", first)}
`)

// takeTokens runs take for k messages of group g.
func (t *Throttle) takeTokens(ctx context.Context, g string, k int, hold bool) (int, time.Duration, error) {
	l := t.limits[g]
	h := 0
	if hold {
		h = 1
	}
	k0 := t.key(g)
	v, err := take.Run(ctx, t.rdb, []string{k0, k0 + ":holds"}, l.Burst(), l.Interval().Seconds(), k, h).Slice()
	if err != nil {
		return 0, 0, err
	}
	taken, _ := v[0].(int64)
	s, _ := v[1].(string)
	first, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, 0, err
	}
	return int(taken), time.Duration(first * float64(time.Second)), nil
}

// Admit judges background messages (sequence steps, broadcast messages)
// by their recipients' addresses: for each, nil when it may go now (its
// group's bucket gave it a token, or its domain is in no group), or the
// hold until its group's bucket will have a token for it. The held
// messages of a group are spread over the times the bucket refills (the
// j-th waits j intervals longer), after those held before them by any
// worker, so they come back one token apart rather than all at once.
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
		taken, first, err := t.takeTokens(ctx, g, len(idx), true)
		if err != nil {
			return nil, err
		}
		for j, i := range idx[taken:] {
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
		if _, _, err := t.takeTokens(ctx, g, k, false); err != nil {
			return err
		}
	}
	return nil
}

func domainOf(addr string) string {
	return addr[strings.LastIndexByte(addr, '@')+1:]
}
