package domains_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/domains"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

// Two tenants in one fresh database: the first is the one under test, the
// second checks isolation.
const (
	tenantA = "ten_a"
	tenantB = "ten_b"
	suffix  = "dkim.test.example"
)

// t0 is when the tests' clocks start.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// clock is an injected time that tests move.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// bundle is what a domains test works with.
type bundle struct {
	ctx   context.Context
	db    *store.DB
	dns   *testenv.DNSZone
	clock *clock
	doms  *domains.Store
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{ctx: context.Background(), db: testenv.DB(t), dns: testenv.DNS(t), clock: &clock{now: t0}}
	b.doms = &domains.Store{DB: b.db, DNS: &domains.Checker{Server: b.dns.Addr, Timeout: 2 * time.Second},
		DKIMSuffix: suffix, CheckInterval: 10 * time.Minute, Now: b.clock.Now}
	if _, err := b.db.Pool.Exec(b.ctx, `INSERT INTO tenants (id, name) VALUES ($1, 'A'), ($2, 'B')`,
		tenantA, tenantB); err != nil {
		t.Fatal(err)
	}
	return b
}

// create adds a domain, failing the test on error.
func (b *bundle) create(t *testing.T, tenant, name string) queries.Domain {
	t.Helper()
	d, err := b.doms.Create(b.ctx, tenant, name)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return d
}

// check runs a check at the given clock time, failing the test on error.
func (b *bundle) check(t *testing.T, at time.Time, tenant, name string) domains.Checked {
	t.Helper()
	b.clock.set(at)
	c, err := b.doms.Check(b.ctx, tenant, name)
	if err != nil {
		t.Fatalf("check %s: %v", name, err)
	}
	return c
}

// publish puts some of d's records into the zone: "txt" and the indexes of
// the DKIM records.
func (b *bundle) publish(t *testing.T, d queries.Domain, which ...any) {
	t.Helper()
	recs := b.doms.Records(d)
	for _, w := range which {
		r := recs[0]
		if i, ok := w.(int); ok {
			r = recs[1+i]
		}
		b.dns.Publish(t, r.Type, r.Name, r.Value)
	}
}

// publishAll puts all four of d's records into the zone.
func (b *bundle) publishAll(t *testing.T, d queries.Domain) { b.publish(t, d, "txt", 0, 1, 2) }

func zoneLine(r domains.DNSRecord) string {
	if r.Type == domains.TypeTXT {
		return fmt.Sprintf("%s. 300 IN TXT %q", r.Name, r.Value)
	}
	return fmt.Sprintf("%s. 300 IN CNAME %s.", r.Name, r.Value)
}

// wantErr checks that err is an *apperr.Error with the status and code.
func wantErr(t *testing.T, err error, status int, code string) *apperr.Error {
	t.Helper()
	e, ok := apperr.As(err)
	if !ok {
		t.Fatalf("want %d %s, got %v", status, code, err)
	}
	// The kind each status of API.md section 7 is mapped from (api/errors.go).
	kinds := map[int]apperr.Kind{400: apperr.KindInvalid, 403: apperr.KindForbidden,
		404: apperr.KindNotFound, 409: apperr.KindConflict, 422: apperr.KindUnprocessable}
	if e.Kind != kinds[status] || e.Code != code {
		t.Fatalf("want %d %s, got %v %s (%s)", status, code, e.Kind, e.Code, e.Message)
	}
	return e
}

// wantField checks a VALIDATION_ERROR naming field with a message
// containing msg.
func wantField(t *testing.T, err error, field, msg string) {
	t.Helper()
	e := wantErr(t, err, 400, "VALIDATION_ERROR")
	fields, _ := e.Details["fields"].(map[string]any)
	got, _ := fields[field].([]string)
	if len(got) == 0 || !strings.Contains(got[0], msg) {
		t.Fatalf("want fields.%s containing %q, got %v", field, msg, e.Details)
	}
}
