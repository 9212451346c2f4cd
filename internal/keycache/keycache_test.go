package keycache

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tidings/internal/testenv"
)

var errNotFound = errors.New("no such key")

// source is a fake database that counts reads.
type source struct {
	mu    sync.Mutex
	keys  map[string]Key
	reads atomic.Int64
	// during, when set, runs inside a read, after the row was read.
	during func()
}

func (s *source) load(_ context.Context, hash []byte) (Key, error) {
	s.reads.Add(1)
	s.mu.Lock()
	k, ok := s.keys[string(hash)]
	during := s.during
	s.mu.Unlock()
	if during != nil {
		during()
	}
	if !ok {
		return Key{}, errNotFound
	}
	return k, nil
}

func (s *source) revoke(hash string) {
	s.mu.Lock()
	k := s.keys[hash]
	k.Revoked = true
	s.keys[hash] = k
	s.mu.Unlock()
}

type fixture struct {
	src     *source
	rdb     redis.UniversalClient
	channel string
}

func newFixture(t *testing.T) *fixture {
	rdb, prefix := testenv.Redis(t)
	return &fixture{src: &source{keys: map[string]Key{"h1": {TenantID: "t1", ID: "key_1"}}}, rdb: rdb, channel: prefix + "evict"}
}

// cache starts a cache and, when run, waits until it is subscribed.
func (f *fixture) cache(t *testing.T, ttl time.Duration, run bool) *Cache {
	c := New(f.src.load, f.rdb, f.channel, ttl, slog.New(slog.DiscardHandler))
	if !run {
		return c
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); !c.Live(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("cache never subscribed")
		}
	}
	return c
}

func lookup(t *testing.T, c *Cache, hash string) Key {
	t.Helper()
	k, err := c.Lookup(context.Background(), []byte(hash))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestServesFromMemoryUntilTheTTL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.cache(t, 200*time.Millisecond, true)
	for i := 0; i < 5; i++ {
		if k := lookup(t, c, "h1"); k.TenantID != "t1" || k.ID != "key_1" {
			t.Fatalf("got %+v", k)
		}
	}
	if n := f.src.reads.Load(); n != 1 {
		t.Fatalf("%d reads, want 1", n)
	}
	time.Sleep(250 * time.Millisecond)
	lookup(t, c, "h1")
	if n := f.src.reads.Load(); n != 2 {
		t.Fatalf("%d reads after the TTL, want 2", n)
	}
}

func TestReadsThroughWhenNotSubscribedOrDisabled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		ttl  time.Duration
		run  bool
	}{
		{desc: "Run not running", ttl: time.Hour, run: false},
		{desc: "TTL 0", ttl: 0, run: true},
	} {
		f := newFixture(t)
		c := f.cache(t, tc.ttl, tc.run)
		for i := 0; i < 3; i++ {
			lookup(t, c, "h1")
		}
		if n := f.src.reads.Load(); n != 3 {
			t.Errorf("%s: %d reads, want 3", tc.desc, n)
		}
	}
}

func TestErrorsAreNotCached(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.cache(t, time.Hour, true)
	for i := 0; i < 2; i++ {
		if _, err := c.Lookup(context.Background(), []byte("unknown")); !errors.Is(err, errNotFound) {
			t.Fatalf("err %v", err)
		}
	}
	if n := f.src.reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2", n)
	}
}

// Evict forgets at once here and, through Redis, on every other instance,
// including one that does not cache (TTL 0) but revokes.
func TestEvictReachesEveryInstance(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b, revoker := f.cache(t, time.Hour, true), f.cache(t, time.Hour, true), f.cache(t, 0, true)
	lookup(t, a, "h1")
	lookup(t, b, "h1")
	f.src.revoke("h1")
	if lookup(t, a, "h1").Revoked || lookup(t, b, "h1").Revoked {
		t.Fatal("entries should still be cached before the eviction")
	}
	if err := revoker.Evict(context.Background(), []byte("h1")); err != nil {
		t.Fatal(err)
	}
	if !lookup(t, revoker, "h1").Revoked {
		t.Fatal("the revoker reads through")
	}
	for name, c := range map[string]*Cache{"a": a, "b": b} {
		deadline := time.Now().Add(3 * time.Second)
		for !lookup(t, c, "h1").Revoked {
			if time.Now().After(deadline) {
				t.Fatalf("instance %s still caches the revoked key", name)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := a.Evict(context.Background(), []byte("h1")); err != nil {
		t.Fatal(err)
	}
	if !lookup(t, a, "h1").Revoked {
		t.Fatal("the evicting instance must read again at once")
	}
}

// A read that started before an eviction must not store what it read:
// it may be the row as it was before the revocation.
func TestReadRacingAnEvictionIsNotStored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.cache(t, time.Hour, true)
	f.src.during = func() {
		f.src.during = nil // the read after this one is clean
		f.src.revoke("h1")
		c.evictLocal("h1")
	}
	if lookup(t, c, "h1").Revoked {
		t.Fatal("the racing read saw the row before the revocation")
	}
	if !lookup(t, c, "h1").Revoked {
		t.Fatal("the stale row of the racing read was cached")
	}
}

// Losing the subscription's connection empties the cache (evictions sent
// meanwhile are lost), and caching resumes once subscribed again.
func TestLosingTheSubscriptionStopsCaching(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	opt, err := redis.ParseURL(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	f.rdb = redis.NewClient(opt)
	t.Cleanup(func() { _ = f.rdb.Close() })
	c := f.cache(t, time.Hour, true)
	lookup(t, c, "h1")
	lookup(t, c, "h1")
	if n := f.src.reads.Load(); n != 1 {
		t.Fatalf("%d reads, want 1", n)
	}

	mu.Lock()
	for _, cn := range conns {
		_ = cn.Close()
	}
	mu.Unlock()
	waitFor(t, func() bool { return !c.Live() })
	waitFor(t, c.Live) // resubscribed on a new connection
	lookup(t, c, "h1")
	if n := f.src.reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2: the entry read before the loss must be gone", n)
	}
	lookup(t, c, "h1")
	if n := f.src.reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2: caching resumes once subscribed", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition never met")
		}
	}
}
