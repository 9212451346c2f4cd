package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"

	"tidings/api"
	"tidings/internal/apikeys"
	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/auth"
	"tidings/internal/keycache"
	"tidings/internal/ratelimit"
	"tidings/internal/tenants"
	"tidings/internal/testenv"
)

// The benchmark baseline must do the same work as the real route: same
// query, same rendering, byte for byte.
func TestBareServesTheSameAPIKeyList(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	log := slog.New(slog.DiscardHandler)
	db := testenv.DB(t)
	rdb, prefix := testenv.Redis(t)
	// A cache with TTL 0 reads every key through, so it needs no Run.
	cache := keycache.New(apikeys.Loader(db), rdb, prefix+"apikeys:evict", 0, log)
	svc := apptest.Services(t, app.Infra{DB: db, Redis: rdb, RedisPrefix: prefix, Keys: cache, Log: log})
	real, err := api.New(api.Deps{Services: svc, Limiter: ratelimit.New(rdb, 1000, prefix),
		Sessions: auth.NewSessionVerifier("secret", "", "")})
	if err != nil {
		t.Fatal(err)
	}

	if _, _, err := (&tenants.Store{DB: db}).Provision(ctx, "org_bare", "Bare"); err != nil {
		t.Fatal(err)
	}
	keys := &apikeys.Store{DB: db, Cache: cache, Log: log}
	key, err := keys.Create(ctx, "org_bare", "k1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Create(ctx, "org_bare", "k2"); err != nil {
		t.Fatal(err)
	}

	bare := newApp(&apikeys.Store{DB: db}, "org_bare")
	for _, path := range []string{"/api/api-keys", "/healthz"} {
		want := get(t, real, path, key.Raw)
		if got := get(t, bare, path, ""); !bytes.Equal(got, want) {
			t.Fatalf("%s: bare answered %s, the API %s", path, got, want)
		}
	}
}

func get(t *testing.T, app *fiber.App, path, key string) []byte {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("%s: %d %s", path, res.StatusCode, body)
	}
	return body
}
