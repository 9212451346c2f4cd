package segments

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"tidings/internal/apperr"
)

// releaseTimeout bounds giving a slot back. The release runs on its own
// context: the caller's may be the very thing that ended the compute (a
// deadline), and a release on it would fail and keep the slot taken for
// the whole interval.
const releaseTimeout = 2 * time.Second

// Throttle lets a segment be computed at most once per interval, counted
// from the start of the last compute that succeeded. The slot is a Redis
// key (SET NX PX), so every API instance and worker agrees.
type Throttle struct {
	Redis redis.UniversalClient
	// Prefix namespaces the keys (tests give each test its own).
	Prefix string
	Every  time.Duration
	Log    *slog.Logger
}

func (t *Throttle) key(tenantID, id string) string {
	return t.Prefix + "segcompute:" + tenantID + ":" + id
}

// Do runs fn if the segment's slot is free, taking the slot for the
// interval; RATE_LIMITED with the seconds left otherwise. A run that fails
// gives the slot back: a compute that did not happen does not use up the
// interval.
func (t *Throttle) Do(ctx context.Context, tenantID, id string, fn func(context.Context) error) error {
	key := t.key(tenantID, id)
	ok, err := t.Redis.SetNX(ctx, key, "1", t.Every).Result()
	if err != nil {
		return err
	}
	if !ok {
		ttl, err := t.Redis.PTTL(ctx, key).Result()
		if err != nil {
			return err
		}
		return apperr.RateLimited(int(math.Ceil(ttl.Seconds())))
	}
	if err := fn(ctx); err != nil {
		t.release(ctx, key)
		return err
	}
	return nil
}

// release gives a slot back. A failure is logged, not returned: the caller
// reports why the compute failed, and the slot then expires with the
// interval.
func (t *Throttle) release(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := t.Redis.Del(ctx, key).Err(); err != nil {
		t.Log.Error("segment compute failed and its slot was not released; it frees at the end of the interval",
			"key", key, "err", err)
	}
}
