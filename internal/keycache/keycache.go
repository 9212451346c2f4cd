// Package keycache remembers, in process, which tenant and key an API key
// hash belongs to, so authenticating a request does not cost a database
// round trip. Revocation stays immediate: the instance that revokes a key
// evicts it before answering, and every other instance evicts it when the
// eviction published on Redis reaches it (milliseconds). Should that message
// be lost, no entry outlives its TTL, counted from before the database read
// that produced it, so a revoked key is refused everywhere at most TTL after
// the revocation committed.
//
// Unknown keys are remembered as unknown too, briefly (ADDENDUM 25), in a
// map of their own so that a flood of random keys cannot push the known
// ones out. Creating a key evicts its hash like a revocation does, so no
// instance keeps calling a new key unknown.
package keycache

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"tidings/internal/apperr"
)

// Key is what authentication needs to know about a presented key.
type Key struct {
	TenantID string
	ID       string
	Revoked  bool
}

// Loader reads a key by hash from the source of truth. It returns an error
// of kind apperr.KindNotFound when there is no key: the cache remembers
// that answer for a short time. Other errors pass through and are never
// cached.
type Loader func(ctx context.Context, hash []byte) (Key, error)

// maxEntries bounds memory. Only existing keys are cached (at most ten
// active per tenant), so reaching it takes a very large deployment; the
// cache then starts over rather than growing.
const maxEntries = 100_000

// maxUnknown bounds the unknown keys remembered; reaching it starts that
// map over. unknownTTL is how long at most a key stays unknown here.
const (
	maxUnknown = 10_000
	unknownTTL = 5 * time.Second
)

// Health of the subscription: ping when idle for pingEvery, give the
// connection up when silent for deadAfter.
const (
	pingEvery = time.Second
	deadAfter = 3 * time.Second
)

// Cache maps key hashes to keys. Its zero value is not usable; see New.
type Cache struct {
	load    Loader
	rdb     redis.UniversalClient
	channel string
	ttl     time.Duration
	log     *slog.Logger

	mu      sync.RWMutex
	entries map[string]entry
	// unknown holds the loader's not-found answers until they expire.
	unknown map[string]unknownEntry
	// epoch changes with every eviction and every change of live. A lookup
	// stores what it read only if the epoch is unchanged since before the
	// read, so a read that raced an eviction cannot bring the key back.
	epoch uint64
	// unknownEpoch changes with every ForgetUnknown: an "unknown" answer is
	// stored only if it is unchanged too.
	unknownEpoch uint64
	// live is true while the eviction channel is subscribed: entries are
	// trusted only then, since evictions published meanwhile are lost.
	live bool
}

type entry struct {
	key     Key
	expires time.Time
}

type unknownEntry struct {
	err     error
	expires time.Time
}

// New builds a cache that reads through load and exchanges evictions on
// the Redis channel. A ttl of 0 disables caching (every lookup reads through)
// but still publishes evictions for the instances that do cache. The cache
// is used only while Run is running.
func New(load Loader, rdb redis.UniversalClient, channel string, ttl time.Duration, log *slog.Logger) *Cache {
	return &Cache{load: load, rdb: rdb, channel: channel, ttl: ttl, log: log, entries: map[string]entry{},
		unknown: map[string]unknownEntry{}}
}

// Lookup returns the key with this hash, from memory when possible.
func (c *Cache) Lookup(ctx context.Context, hash []byte) (Key, error) {
	c.mu.RLock()
	e, ok := c.entries[string(hash)]
	u, isUnknown := c.unknown[string(hash)]
	live, epoch, uepoch := c.live, c.epoch, c.unknownEpoch
	c.mu.RUnlock()
	now := time.Now()
	if ok && live && now.Before(e.expires) {
		return e.key, nil
	}
	if isUnknown && live && now.Before(u.expires) {
		return Key{}, u.err
	}
	k, err := c.load(ctx, hash)
	if c.ttl <= 0 {
		return k, err
	}
	if err != nil {
		if apperr.IsKind(err, apperr.KindNotFound) {
			c.storeUnknown(string(hash), err, now, epoch, uepoch)
		}
		return k, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live && c.epoch == epoch {
		if len(c.entries) >= maxEntries {
			clear(c.entries)
		}
		// The clock started before the read: an entry expires at most ttl
		// after any revocation it could have missed.
		c.entries[string(hash)] = entry{key: k, expires: now.Add(c.ttl)}
	}
	return k, nil
}

// storeUnknown remembers that hash named no key when read at now, under
// the same rule as a key: only if no eviction came since the read began.
func (c *Cache) storeUnknown(hash string, err error, now time.Time, epoch, uepoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || c.epoch != epoch || c.unknownEpoch != uepoch {
		return
	}
	if len(c.unknown) >= maxUnknown {
		clear(c.unknown)
	}
	c.unknown[hash] = unknownEntry{err: err, expires: now.Add(min(c.ttl, unknownTTL))}
}

// Evict forgets the key with this hash here, at once, and tells the other
// instances to forget it. Call it after a revocation or a creation is
// committed. The error reports a failed publish: the other instances then
// still refuse a revoked key, or call a new one unknown, within the TTL.
func (c *Cache) Evict(ctx context.Context, hash []byte) error {
	c.evictLocal(string(hash))
	return c.rdb.Publish(ctx, c.channel, hash).Err()
}

// ForgetUnknown tells every instance, this one at once, to stop calling
// the key with this hash unknown: call it after a creation is committed.
// A known entry is left as it is: the message may arrive after the new key
// was cached, and then after a revocation's own eviction, which must win.
func (c *Cache) ForgetUnknown(ctx context.Context, hash []byte) error {
	c.forgetUnknownLocal(string(hash))
	return c.rdb.Publish(ctx, c.channel, unknownPrefix+string(hash)).Err()
}

// unknownPrefix marks a ForgetUnknown message on the channel (hashes are
// SHA-256 sums, 32 bytes: a 33-byte message is never an eviction).
const unknownPrefix = "?"

func (c *Cache) forgetUnknownLocal(hash string) {
	c.mu.Lock()
	delete(c.unknown, hash)
	// A lookup that began before the creation stores no "unknown"; a known
	// entry it reads is stored as usual (epoch stays).
	c.unknownEpoch++
	c.mu.Unlock()
}

func (c *Cache) evictLocal(hash string) {
	c.mu.Lock()
	delete(c.entries, hash)
	delete(c.unknown, hash)
	c.epoch++
	c.mu.Unlock()
}

// setLive records whether evictions are being received. Either way the
// cache starts empty: nothing read before can be known to be current.
func (c *Cache) setLive(live bool) {
	c.mu.Lock()
	clear(c.entries)
	clear(c.unknown)
	c.epoch++
	c.live = live
	c.mu.Unlock()
}

// Live reports whether the cache is subscribed to evictions and so in use.
func (c *Cache) Live() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.live
}

// Run receives evictions until ctx ends, resubscribing after any failure.
// Without it the cache reads through on every lookup.
func (c *Cache) Run(ctx context.Context) {
	defer c.setLive(false)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if c.receive(ctx) {
			backoff = 100 * time.Millisecond
		}
		c.setLive(false)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// receive subscribes and handles messages until the connection fails or
// ctx ends; it reports whether the subscription was ever confirmed.
func (c *Cache) receive(ctx context.Context) bool {
	ps := c.rdb.Subscribe(ctx, c.channel)
	defer ps.Close()
	// Reads do not watch ctx; closing the connection interrupts them.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	confirmed := false
	lastHeard := time.Now()
	for {
		msg, err := ps.ReceiveTimeout(ctx, pingEvery)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
				// A half-open connection fails no read: only an unanswered
				// ping reveals it.
				if time.Since(lastHeard) > deadAfter {
					c.log.Warn("API key cache: eviction channel silent, resubscribing")
					return confirmed
				}
				if err := ps.Ping(ctx); err != nil {
					c.log.Warn("API key cache: eviction channel failed", "err", err)
					return confirmed
				}
				continue
			}
			if ctx.Err() == nil {
				c.log.Warn("API key cache: eviction channel failed", "err", err)
			}
			return confirmed
		}
		lastHeard = time.Now()
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == c.channel {
				confirmed = true
				c.setLive(true)
			}
		case *redis.Message:
			if h, ok := strings.CutPrefix(m.Payload, unknownPrefix); ok && len(m.Payload) == sha256.Size+1 {
				c.forgetUnknownLocal(h)
				continue
			}
			c.evictLocal(m.Payload)
		}
	}
}
