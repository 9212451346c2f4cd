package config

import (
	"context"
	"fmt"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// OpenRedis connects go-redis to REDIS_URL and verifies the connection: a
// single server, or with REDIS_CLUSTER a Redis Cluster (go-redis's cluster
// URL form: one node in the host, the others as addr= query parameters).
func (c *Config) OpenRedis(ctx context.Context) (redis.UniversalClient, error) {
	if c.RedisCluster {
		opt, err := redis.ParseClusterURL(c.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL (cluster): %w", RedactError(err, c.RedisURL))
		}
		return ping(ctx, redis.NewClusterClient(opt))
	}
	return OpenRedis(ctx, c.RedisURL)
}

// AsynqRedisOpt is REDIS_URL as asynq's connection option, a cluster one
// with REDIS_CLUSTER. asynq keeps each queue's keys in one hash slot
// ({queue}), so its scripts run on a cluster.
func (c *Config) AsynqRedisOpt() (asynq.RedisConnOpt, error) {
	if !c.RedisCluster {
		return AsynqRedis(c.RedisURL)
	}
	opt, err := redis.ParseClusterURL(c.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL (cluster): %w", RedactError(err, c.RedisURL))
	}
	return asynq.RedisClusterClientOpt{Addrs: opt.Addrs, Username: opt.Username, Password: opt.Password,
		TLSConfig: opt.TLSConfig}, nil
}

// OpenRedis connects go-redis to one Redis server at url and verifies the
// connection.
func OpenRedis(ctx context.Context, url string) (redis.UniversalClient, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", RedactError(err, url))
	}
	return ping(ctx, redis.NewClient(opt))
}

func ping(ctx context.Context, rdb redis.UniversalClient) (redis.UniversalClient, error) {
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("connect to redis: %w", err)
	}
	return rdb, nil
}

// AsynqRedis is the URL of one Redis server as asynq's connection option.
func AsynqRedis(url string) (asynq.RedisConnOpt, error) {
	opt, err := asynq.ParseRedisURI(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", RedactError(err, url))
	}
	return opt, nil
}
