// Package benchenv is what the bench/ programs share to run beside the
// tests on one machine.
package benchenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"
)

// LeaseRedis takes a free database of the Redis server the way
// internal/testenv leases its own (so a test running beside the benchmark
// never shares it), flushed, for owner (a name kept in the lease) for at
// most ttl; release flushes it and gives it back.
func LeaseRedis(ctx context.Context, server, owner string, ttl time.Duration) (string, func(), error) {
	opt, err := redis.ParseURL(server)
	if err != nil {
		return "", nil, err
	}
	ctl := redis.NewClient(opt)
	defer ctl.Close()
	for n := 1; n <= 15; n++ {
		key := fmt.Sprintf("tidings:testlease:%d", n)
		ok, err := ctl.SetNX(ctx, key, owner, ttl).Result()
		if err != nil {
			return "", nil, err
		}
		if !ok {
			continue
		}
		o := *opt
		o.DB = n
		rdb := redis.NewClient(&o)
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			return "", nil, err
		}
		u, _ := url.Parse(server)
		u.Path = fmt.Sprintf("/%d", n)
		return u.String(), func() {
			rdb.FlushDB(context.Background())
			rdb.Close()
			c := redis.NewClient(opt)
			c.Del(context.Background(), key)
			c.Close()
		}, nil
	}
	return "", nil, errors.New("no free Redis database (1-15 are all leased)")
}
