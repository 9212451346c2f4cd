package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"tidings/internal/apikeys"
	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/auth"
	"tidings/internal/config"
	"tidings/internal/keycache"
	"tidings/internal/mjml"
	"tidings/internal/provider"
	"tidings/internal/provider/providertest"
	"tidings/internal/ratelimit"
	"tidings/internal/render"
	"tidings/internal/store"
	"tidings/internal/testenv"
)

// The HS256 sessions of the tests: signed with testSecret and, as outside
// DEV_MODE, checked for their issuer and audience (DASHBOARD_JWT_ISSUER,
// DASHBOARD_JWT_AUDIENCE).
const (
	testSecret   = "test-dashboard-secret"
	testIssuer   = "https://tidings.test"
	testAudience = "tidings-dashboard-test"
)

// The tests share one renderer (and testenv's MJML pool): starting node
// costs more than most tests. Its time limit is far off, so that a test
// about another rendering limit reaches that one however loaded the
// machine is.
var testRenderer = render.NewRenderer(render.RendererOptions{MaxRenderTime: time.Minute})

func testPool(t testing.TB) *mjml.Pool { return testenv.MJML(t) }

func TestMain(m *testing.M) { testenv.Main(m) }

// bundle is one test's isolated service: its own database and Redis prefix.
type bundle struct {
	t   testing.TB
	app *fiber.App
	// svc are the services the app runs on (the worker side uses the same).
	svc    *app.Services
	db     *store.DB
	cfg    *config.Config
	rdb    redis.UniversalClient
	prefix string
	// sg is the fake SendGrid every send of this test goes to.
	sg       *providertest.SendGrid
	provider provider.Provider
	// record, when set, sees every request do sends and its answer (the
	// OpenAPI examples test records them).
	record func(req *http.Request, reqBody []byte, res *http.Response, body []byte)
}

type option func(*config.Config)

func setup(t testing.TB, opts ...option) *bundle {
	t.Helper()
	return setupOn(t, nil, opts...)
}

// setupOn is setup on db (nil: a database of the test's own).
func setupOn(t testing.TB, db *store.DB, opts ...option) *bundle {
	t.Helper()
	cfg, err := config.FromLookup(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg.DashboardJWTSecret, cfg.DashboardJWTIssuer, cfg.DashboardJWTAudience = testSecret, testIssuer, testAudience
	cfg.RateLimitPerMinute = 10000
	cfg.UnauthRateLimitPerMinute = 10000
	cfg.ArchiveDir = t.TempDir()
	for _, o := range opts {
		o(cfg)
	}
	if db == nil {
		db = testenv.DB(t)
	}
	rdb, prefix := testenv.Redis(t)
	sg, prov := fakeProvider(t, cfg)
	app, svc := newAppServices(t, app.Infra{Config: cfg, DB: db, Redis: rdb, RedisPrefix: prefix, Provider: prov}, Deps{
		Sessions: auth.NewSessionVerifier(cfg.DashboardJWTSecret, cfg.DashboardOIDCIssuer, cfg.DashboardOIDCAudience,
			auth.WithHS256Claims(cfg.DashboardJWTIssuer, cfg.DashboardJWTAudience)),
	})
	return &bundle{t: t, app: app, svc: svc, db: db, cfg: cfg, rdb: rdb, prefix: prefix, sg: sg, provider: prov}
}

// newApp builds the api as cmd/api does, on the services of in (app.New
// through apptest) with the test's defaults: a live key cache on the
// test's eviction channel, the shared MJML pool and renderer, a quiet
// logger, a limiter of the configured rate per hour (so a slow test never
// sees its budget refill), and the test's session secret. d's fields win.
func newApp(t testing.TB, in app.Infra, d Deps) *fiber.App {
	t.Helper()
	a, _ := newAppServices(t, in, d)
	return a
}

// newAppServices is newApp that also returns the services the app runs on.
func newAppServices(t testing.TB, in app.Infra, d Deps) (*fiber.App, *app.Services) {
	t.Helper()
	if in.Config == nil {
		in.Config = apptest.Config(t)
	}
	if in.DB == nil {
		in.DB = testenv.DB(t)
	}
	if in.Redis == nil {
		in.Redis, in.RedisPrefix = testenv.Redis(t)
	}
	if in.Keys == nil {
		in.Keys = runKeyCache(t, in.DB, in.Redis, in.RedisPrefix, in.Config.APIKeyCacheTTL)
	}
	if in.Log == nil {
		in.Log = testLog()
	}
	if in.MJML == nil {
		in.MJML = testPool(t)
	}
	if in.Renderer == nil {
		in.Renderer = testRenderer
	}
	if d.Limiter == nil {
		d.Limiter = ratelimit.NewPer(in.Redis, in.Config.RateLimitPerMinute, time.Hour, in.RedisPrefix)
	}
	if d.UnauthLimiter == nil {
		d.UnauthLimiter = UnauthLimiter(in.Redis, in.Config.UnauthRateLimitPerMinute, time.Hour, in.RedisPrefix)
	}
	if d.Sessions == nil {
		d.Sessions = auth.NewSessionVerifier(testSecret, "", "", auth.WithHS256Claims(testIssuer, testAudience))
	}
	d.Services = apptest.Services(t, in)
	a, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	return a, d.Services
}

// fakeProvider points a sendgrid provider at an in-test fake SendGrid. The
// test's own configuration keeps its EMAIL_PROVIDER, so rules that read
// whether a real provider is connected see what the test set.
func fakeProvider(t testing.TB, cfg *config.Config) (*providertest.SendGrid, provider.Provider) {
	t.Helper()
	sg := providertest.NewSendGrid(t)
	pcfg := *cfg
	sg.Configure(&pcfg)
	prov, err := provider.New(&pcfg)
	if err != nil {
		t.Fatal(err)
	}
	return sg, prov
}

// instance starts another API instance on the same database and Redis, as
// a second process would be, with its own key cache of the given TTL. An
// instance on another prefix shares no rate budget and hears no evictions.
func (b *bundle) instance(prefix string, keyTTL time.Duration) *bundle {
	b.t.Helper()
	app := newApp(b.t, app.Infra{Config: b.cfg, DB: b.db, Redis: b.rdb, RedisPrefix: prefix, Provider: b.provider,
		Keys: runKeyCache(b.t, b.db, b.rdb, prefix, keyTTL)}, Deps{})
	return &bundle{t: b.t, app: app, db: b.db, cfg: b.cfg, rdb: b.rdb, prefix: prefix, sg: b.sg, provider: b.provider}
}

// runKeyCache starts an API key cache on the test's eviction channel and
// waits until it is subscribed, so every test authenticates through a live
// cache as production does.
func runKeyCache(t testing.TB, db *store.DB, rdb redis.UniversalClient, prefix string, ttl time.Duration) *keycache.Cache {
	t.Helper()
	keys := keycache.New(apikeys.Loader(db), rdb, prefix+"apikeys:evict", ttl, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); keys.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); !keys.Live(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("API key cache never subscribed")
		}
	}
	return keys
}

// session mints a dashboard token for org.
func (b *bundle) session(org string) string {
	tok, err := auth.MintHS256Claims(testSecret, testIssuer, testAudience, "user-1", org, time.Hour)
	if err != nil {
		b.t.Fatal(err)
	}
	return tok
}

// tenant provisions org and returns a session token for it.
func (b *bundle) tenant(org string) string {
	tok := b.session(org)
	b.expect("POST", "/api/tenant", tok, map[string]any{"name": "Org " + org}, http.StatusCreated)
	return tok
}

// apiKey creates an API key with a session and returns the raw key.
func (b *bundle) apiKey(session string) string {
	r := b.expect("POST", "/api/api-keys", session, map[string]any{"name": "k"}, http.StatusCreated)
	return r.body["rawKey"].(string)
}

type resp struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// code returns the error code of an error envelope.
func (r resp) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r resp) fields() map[string]any {
	e, _ := r.body["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	f, _ := d["fields"].(map[string]any)
	return f
}

func (r resp) items() []any {
	items, _ := r.body["items"].([]any)
	return items
}

// do sends a request; body may be nil, a string (sent raw) or a value
// marshalled as JSON.
func (b *bundle) do(method, path, token string, body any) resp {
	b.t.Helper()
	var sent []byte
	ct := ""
	switch v := body.(type) {
	case nil:
	case string:
		sent, ct = []byte(v), "application/json"
	case []byte:
		sent, ct = v, "application/json"
	default:
		sent, _ = json.Marshal(v)
		ct = "application/json"
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(sent)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("User-Agent", mailClientUA) // a person's client: tracking hits without one are machines'
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := b.app.Test(req, -1)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	checkResponse(b.t, b.app, req, res, raw)
	checkRequest(b.t, b.app, req, sent, res.StatusCode, raw)
	if b.record != nil {
		b.record(req, sent, res, raw)
	}
	r := resp{status: res.StatusCode, header: res.Header, raw: raw}
	if len(raw) > 0 && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			b.t.Fatalf("%s %s: response is not a JSON object: %s", method, path, raw)
		}
	}
	return r
}

// expect sends a request and fails the test unless the status matches.
func (b *bundle) expect(method, path, token string, body any, status int) resp {
	b.t.Helper()
	r := b.do(method, path, token, body)
	if r.status != status {
		b.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, status, r.raw)
	}
	return r
}

// expectError checks an error envelope's status and code.
func (b *bundle) expectError(method, path, token string, body any, status int, code string) resp {
	b.t.Helper()
	r := b.expect(method, path, token, body, status)
	if r.code() != code {
		b.t.Fatalf("%s %s: code %q, want %q; body %s", method, path, r.code(), code, r.raw)
	}
	e := r.body["error"].(map[string]any)
	if _, ok := e["message"].(string); !ok {
		b.t.Fatalf("error without message: %s", r.raw)
	}
	if _, ok := e["details"].(map[string]any); !ok {
		b.t.Fatalf("error without details object: %s", r.raw)
	}
	return r
}

// testLog discards logs unless TEST_LOG is set, when it shows them.
func testLog() *slog.Logger {
	if os.Getenv("TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}
