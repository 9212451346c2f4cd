package apikeys_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"tidings/internal/apikeys"
	"tidings/internal/apperr"
	"tidings/internal/auth"
	"tidings/internal/tenants"
	"tidings/internal/testenv"
)

// evictions records what the store evicts; fail makes publishing fail.
type evictions struct {
	mu     sync.Mutex
	hashes [][]byte
	fail   error
}

func (e *evictions) Evict(_ context.Context, hash []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hashes = append(e.hashes, hash)
	return e.fail
}

// ForgetUnknown is recorded as an eviction: both tell the other instances.
func (e *evictions) ForgetUnknown(ctx context.Context, hash []byte) error { return e.Evict(ctx, hash) }

type bundle struct {
	ctx   context.Context
	store *apikeys.Store
	evict *evictions
	log   *bytes.Buffer
}

// setup provisions tenants "org_a" and "org_b" in a fresh database.
func setup(t *testing.T) *bundle {
	t.Helper()
	db := testenv.DB(t)
	b := &bundle{ctx: context.Background(), evict: &evictions{}, log: &bytes.Buffer{}}
	b.store = &apikeys.Store{DB: db, Cache: b.evict, Log: slog.New(slog.NewTextHandler(b.log, nil))}
	for _, id := range []string{"org_a", "org_b"} {
		if _, _, err := (&tenants.Store{DB: db}).Provision(b.ctx, id, id); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestCreate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k, err := b.store.Create(b.ctx, "org_a", "  my app  ")
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "my app" || !auth.LooksLikeKey(k.Raw) || !strings.HasPrefix(k.Raw, k.KeyPrefix) || !apikeys.Active(k.ApiKey) {
		t.Fatalf("%+v", k)
	}
	// The loader finds it by its hash.
	got, err := apikeys.Loader(b.store.DB)(b.ctx, auth.HashKey(k.Raw))
	if err != nil || got.TenantID != "org_a" || got.ID != k.ID || got.Revoked {
		t.Fatalf("%+v %v", got, err)
	}
	for _, name := range []string{"", "   ", strings.Repeat("n", 65)} {
		_, err := b.store.Create(b.ctx, "org_a", name)
		if e, ok := apperr.As(err); !ok || e.Kind != apperr.KindInvalid || e.Details["fields"].(map[string]any)["name"] == nil {
			t.Fatalf("name %q: %v", name, err)
		}
	}
	if _, err := b.store.Create(b.ctx, "org_missing", "k"); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("unknown tenant: %v", err)
	}
	if _, err := apikeys.Loader(b.store.DB)(b.ctx, auth.HashKey("tdk_unknown")); !apperr.IsKind(err, apperr.KindNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
}

// Concurrent creates never leave a tenant with more than ten active keys,
// and revoking one frees a slot.
func TestTenActiveKeysUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 7 {
		if _, err := b.store.Create(b.ctx, "org_a", "k"); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.store.Create(b.ctx, "org_a", "race")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	refused := 0
	for err := range errs {
		if err != nil {
			if e, ok := apperr.As(err); !ok || e.Kind != apperr.KindInvalid || e.Details["fields"].(map[string]any)["name"] == nil {
				t.Fatalf("want VALIDATION_ERROR on name, got %v", err)
			}
			refused++
		}
	}
	keys, err := b.store.List(b.ctx, "org_a")
	if err != nil || len(keys) != apikeys.MaxActive || refused != 5 {
		t.Fatalf("%d keys, %d refused, %v", len(keys), refused, err)
	}
	// Another tenant's keys are not counted.
	if _, err := b.store.Create(b.ctx, "org_b", "k"); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Revoke(b.ctx, "org_a", keys[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Create(b.ctx, "org_a", "after revoke"); err != nil {
		t.Fatalf("a revoked key frees its slot: %v", err)
	}
}

// A created key is evicted too: an instance that remembers its hash as
// unknown (keycache) forgets that at once.
func TestCreateEvictsTheNewHash(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k, err := b.store.Create(b.ctx, "org_a", "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.evict.hashes) != 1 || !bytes.Equal(b.evict.hashes[0], k.KeyHash) {
		t.Fatalf("evicted %x, want %x", b.evict.hashes, k.KeyHash)
	}
	// A failed publish does not undo the creation; it is logged.
	b.evict.fail = errors.New("redis down")
	if _, err := b.store.Create(b.ctx, "org_a", "k2"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.log.String(), "eviction was not published") {
		t.Fatalf("log: %s", b.log)
	}
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	b := setup(t)
	k, err := b.store.Create(b.ctx, "org_a", "k")
	if err != nil {
		t.Fatal(err)
	}
	b.evict.hashes = nil // the creation's
	// Another tenant's key id is simply not found, and nothing is evicted.
	if err := b.store.Revoke(b.ctx, "org_b", k.ID); !apperr.IsCode(err, "NOT_FOUND") || len(b.evict.hashes) != 0 {
		t.Fatalf("cross-tenant revoke: %v, evicted %d", err, len(b.evict.hashes))
	}
	if err := b.store.Revoke(b.ctx, "org_a", k.ID); err != nil {
		t.Fatal(err)
	}
	if len(b.evict.hashes) != 1 || !bytes.Equal(b.evict.hashes[0], k.KeyHash) {
		t.Fatalf("evicted %x, want %x", b.evict.hashes, k.KeyHash)
	}
	keys, _ := b.store.List(b.ctx, "org_a")
	if len(keys) != 1 || apikeys.Active(keys[0]) {
		t.Fatalf("%+v", keys)
	}
	// A failed publish does not undo the revocation; it is logged.
	b.evict.fail = errors.New("redis down")
	if err := b.store.Revoke(b.ctx, "org_a", k.ID); err != nil {
		t.Fatalf("revoking twice is harmless: %v", err)
	}
	if !strings.Contains(b.log.String(), "eviction was not published") {
		t.Fatalf("log: %s", b.log)
	}
}
