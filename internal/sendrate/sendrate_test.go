package sendrate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tidings/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A second client on the test's Redis: another process's connection.
func otherClient(t *testing.T, rdb redis.UniversalClient) redis.UniversalClient {
	t.Helper()
	c := redis.NewClient(rdb.(*redis.Client).Options())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// No limit: no bucket, no Redis.
func TestZeroIsNoLimit(t *testing.T) {
	t.Parallel()
	if b := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), "x:", 0); b != nil {
		t.Fatal("a bucket for rate 0")
	}
	var b *Bucket
	if err := b.Wait(context.Background(), Low); err != nil {
		t.Fatal(err)
	}
	if err := b.Backoff(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
}

// Two processes (two clients, two buckets) taking as fast as they can
// together never exceed the rate: n messages take at least (n - burst) /
// rate. A loaded machine only makes it slower, so the bound cannot flake.
func TestRateSharedByProcesses(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	const rate, n = 100, 240
	a, b := New(rdb, prefix, rate), New(otherClient(t, rdb), prefix, rate)
	var taken atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 8 {
		bk := a
		if i%2 == 1 {
			bk = b
		}
		wg.Go(func() {
			for taken.Add(1) <= n {
				if err := bk.Wait(context.Background(), Priority(i%3%2)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if min := time.Duration(float64(n-rate/10) / rate * float64(time.Second)); elapsed < min {
		t.Fatalf("%d messages in %v: faster than %d/s allows (%v)", n, elapsed, rate, min)
	}
}

// While transactional sends want more than the rate, they take first:
// background takers get fewer than they do.
func TestHighPriorityFirst(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	b := New(rdb, prefix, 20)
	ctx, cancel := context.WithCancel(context.Background())
	var low atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for b.Wait(ctx, Low) == nil {
				low.Add(1)
			}
		})
	}
	high := 0
	for range 20 {
		if err := b.Wait(context.Background(), High); err != nil {
			t.Fatal(err)
		}
		high++
	}
	cancel()
	wg.Wait()
	if l := low.Load(); l >= int64(high) {
		t.Fatalf("background took %d while transactional took %d", l, high)
	}
}

// A provider's 429 holds the bucket for every process.
func TestBackoffHoldsEveryone(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	a, b := New(rdb, prefix, 1000), New(otherClient(t, rdb), prefix, 1000)
	if err := a.Backoff(context.Background(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.Wait(context.Background(), High); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("waited %v through a 300 ms hold", waited)
	}
	// A shorter hold does not shorten a longer one.
	if err := a.Backoff(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := a.Backoff(context.Background(), 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(context.Background(), a.hold).Val(); ttl < 4*time.Second {
		t.Fatalf("hold %v after a shorter backoff", ttl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.Wait(ctx, Low); err == nil {
		t.Fatal("a wait through a hold returned without error")
	}
}
