package keycache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tidings/internal/apperr"
	"tidings/internal/testenv"
)

// errNotFound is what the loader answers for an unknown key, as
// apikeys.Loader does: an error of kind NotFound.
var errNotFound = apperr.NotFound("NOT_FOUND", "API key")

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

// An error other than not-found (the database failed) is never cached.
func TestErrorsAreNotCached(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	failed := errors.New("connection refused")
	c := New(func(context.Context, []byte) (Key, error) { f.src.reads.Add(1); return Key{}, failed },
		f.rdb, f.channel, time.Hour, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, c.Live)
	for i := 0; i < 2; i++ {
		if _, err := c.Lookup(context.Background(), []byte("h1")); !errors.Is(err, failed) {
			t.Fatalf("err %v", err)
		}
	}
	if n := f.src.reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2", n)
	}
}

// An unknown key is remembered as unknown for a short time (ADDENDUM 25):
// a client retrying a wrong key costs no database read per request.
func TestUnknownKeysAreCachedBriefly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.cache(t, time.Hour, true)
	for i := 0; i < 3; i++ {
		if _, err := c.Lookup(context.Background(), []byte("unknown")); !apperr.IsKind(err, apperr.KindNotFound) {
			t.Fatalf("err %v", err)
		}
	}
	if n := f.src.reads.Load(); n != 1 {
		t.Fatalf("%d reads for three lookups of one unknown key, want 1", n)
	}
}

// A key created after its hash was looked up as unknown works at once on
// the instance that created it and, through the eviction channel, on every
// other one. (A real key's hash cannot have been looked up before: it is
// 238 random bits, shown first in the create's answer.)
func TestKeyCreatedAfterAnUnknownLookupWorks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.cache(t, time.Hour, true), f.cache(t, time.Hour, true)
	for _, c := range []*Cache{a, b} {
		if _, err := c.Lookup(context.Background(), []byte("h2")); !apperr.IsKind(err, apperr.KindNotFound) {
			t.Fatalf("err %v", err)
		}
	}
	f.src.mu.Lock()
	f.src.keys["h2"] = Key{TenantID: "t1", ID: "key_2"}
	f.src.mu.Unlock()
	if err := a.Evict(context.Background(), []byte("h2")); err != nil {
		t.Fatal(err)
	}
	if k := lookup(t, a, "h2"); k.ID != "key_2" {
		t.Fatalf("the creating instance: %+v", k)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		k, err := b.Lookup(context.Background(), []byte("h2"))
		if err == nil && k.ID == "key_2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other instance still answers %+v %v", k, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Unknown keys have their own bound: a flood of random keys never pushes
// the known keys out of the cache.
func TestUnknownKeysNeverEvictKnownOnes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.cache(t, time.Hour, true)
	lookup(t, c, "h1")
	for i := range maxUnknown + 10 {
		_, _ = c.Lookup(context.Background(), []byte(fmt.Sprintf("random-%d", i)))
	}
	before := f.src.reads.Load()
	lookup(t, c, "h1")
	if n := f.src.reads.Load(); n != before {
		t.Fatal("the known key was read again after a flood of unknown ones")
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
