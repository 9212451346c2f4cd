package idempotency

import (
	"context"
	"sync"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/testenv"
)

func setup(t *testing.T) *Store {
	t.Helper()
	db := testenv.DB(t)
	ctx := context.Background()
	for _, id := range []string{"ten_a", "ten_b"} {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO tenants (id, name) VALUES ($1, $1)`, id); err != nil {
			t.Fatal(err)
		}
	}
	return &Store{DB: db}
}

func TestValidKey(t *testing.T) {
	t.Parallel()
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'k'
	}
	for _, tt := range []struct {
		desc, key string
		want      bool
	}{
		{"uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{"printable with spaces", "order 42: retry", true},
		{"max length", string(long[:255]), true},
		{"empty", "", false},
		{"too long", string(long), false},
		{"CR LF", "a\r\nb", false},
		{"non-ASCII", "clé", false},
		{"DEL", "a\x7f", false},
	} {
		if got := ValidKey(tt.key); got != tt.want {
			t.Errorf("%s: ValidKey(%q) = %v, want %v", tt.desc, tt.key, got, tt.want)
		}
	}
}

func TestReplayReuseInUseAndRelease(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	body := []byte(`{"to":"a@example.com","template":"w"}`)

	c, resp, err := s.Begin(ctx, "ten_a", "send", "k1", body)
	if err != nil || c == nil || resp != nil {
		t.Fatalf("first Begin = %v, %v, %v; want a claim", c, resp, err)
	}
	// While the first runs: in use, whatever the body.
	if _, _, err := s.Begin(ctx, "ten_a", "send", "k1", body); !apperr.IsCode(err, "IDEMPOTENCY_KEY_IN_USE") {
		t.Fatalf("repeat in flight: %v, want IDEMPOTENCY_KEY_IN_USE", err)
	}
	// Another tenant's key of the same name is a different key.
	if c2, _, err := s.Begin(ctx, "ten_b", "send", "k1", body); err != nil || c2 == nil {
		t.Fatalf("other tenant: %v, %v; want its own claim", c2, err)
	}
	if err := c.Complete(ctx, 200, []byte(`{"sendId":"snd_1"}`)); err != nil {
		t.Fatal(err)
	}
	_, resp, err = s.Begin(ctx, "ten_a", "send", "k1", body)
	if err != nil || resp == nil || resp.Status != 200 || string(resp.Body) != `{"sendId":"snd_1"}` {
		t.Fatalf("replay = %+v, %v", resp, err)
	}
	if _, _, err := s.Begin(ctx, "ten_a", "send", "k1", []byte(`{"to":"b@example.com"}`)); !apperr.IsCode(err, "IDEMPOTENCY_KEY_REUSED") {
		t.Fatalf("other body: %v, want IDEMPOTENCY_KEY_REUSED", err)
	}

	// A failed first attempt is not kept: the same key runs again.
	c, _, err = s.Begin(ctx, "ten_a", "send", "k2", body)
	if err != nil || c == nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if c, _, err := s.Begin(ctx, "ten_a", "send", "k2", body); err != nil || c == nil {
		t.Fatalf("after release: %v, %v; want a new claim", c, err)
	}
}

func TestStaleAndExpiredKeysAreTakenOver(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	body := []byte(`{}`)
	if c, _, err := s.Begin(ctx, "ten_a", "send", "crashed", body); err != nil || c == nil {
		t.Fatal(err)
	}
	// The holder died: once it has been silent past StaleAfter the key is
	// free again.
	s.Now = func() time.Time { return time.Now().Add(StaleAfter + time.Second) }
	if c, _, err := s.Begin(ctx, "ten_a", "send", "crashed", body); err != nil || c == nil {
		t.Fatalf("stale in-flight key not taken over: %v, %v", c, err)
	}

	s.Now = nil
	c, _, err := s.Begin(ctx, "ten_a", "send", "old", body)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(ctx, 200, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB.Pool.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'old'`); err != nil {
		t.Fatal(err)
	}
	if c, resp, err := s.Begin(ctx, "ten_a", "send", "old", []byte(`{"new":true}`)); err != nil || c == nil || resp != nil {
		t.Fatalf("expired key: %v, %+v, %v; want a new claim", c, resp, err)
	}
	if n, err := s.DeleteExpired(ctx); err != nil || n != 0 {
		t.Fatalf("DeleteExpired = %d, %v (the only expired key was taken over)", n, err)
	}
}

// Concurrent first requests with one key: exactly one runs.
func TestConcurrentBeginsOneWinner(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	claims, inUse := 0, 0
	for range 16 {
		wg.Go(func() {
			c, _, err := s.Begin(ctx, "ten_a", "send", "race", []byte(`{}`))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case c != nil:
				claims++
			case apperr.IsCode(err, "IDEMPOTENCY_KEY_IN_USE"):
				inUse++
			default:
				t.Errorf("unexpected: %v", err)
			}
		})
	}
	wg.Wait()
	if claims != 1 || inUse != 15 {
		t.Fatalf("claims = %d, in use = %d; want 1 and 15", claims, inUse)
	}
}
