package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"tidings/internal/config"
	"tidings/internal/store"
)

// slowUpload is an import whose client sends the head of its body and
// then a byte now and then, never reaching the length it declared: the
// trickling client of the finding (ADDENDUM 25, last bullet).
type slowUpload struct {
	conn net.Conn
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// openSlowUpload starts a slow import of token's tenant on addr: the
// request head, a CSV header and one row, then a byte every tick until
// closed.
func openSlowUpload(t *testing.T, addr, token string, tick time.Duration) *slowUpload {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	head := "email,note\na@example.com,x\n"
	if _, err := fmt.Fprintf(conn, "POST /api/contacts/import HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: text/csv\r\nContent-Length: %d\r\n\r\n%s", token, 1<<20, head); err != nil {
		t.Fatal(err)
	}
	u := &slowUpload{conn: conn, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(u.done)
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-u.stop:
				return
			case <-tk.C:
				if _, err := conn.Write([]byte("b")); err != nil {
					return
				}
			}
		}
	}()
	return u
}

func (u *slowUpload) close() {
	u.once.Do(func() {
		close(u.stop)
		<-u.done
		_ = u.conn.Close()
	})
}

// getOver asks addr for path with token through a real connection, with
// a bound far above the service's own request deadline (30 s), so that
// what the service answers is what the test sees.
func getOver(t *testing.T, client *http.Client, addr, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// waitFor polls cond until it holds, failing the test after a bound far
// above what a loaded machine needs (not a timing assertion: it only ends
// a test that would otherwise hang).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// One tenant's slow uploads never starve another tenant: with more slow
// imports open than the database pool has connections, another tenant's
// requests are answered as usual and /readyz stays ready (the finding:
// 17 trickling uploads held the 16 connections, other tenants got 500
// and /readyz 503). The caps are raised so that every upload is let in:
// what is tested is that an upload holds no connection, not the cap.
func TestImportSlowUploadsStarveNoOne(t *testing.T) {
	t.Parallel()
	n := int(store.DefaultMaxConns) + 4
	b := setup(t, func(c *config.Config) { c.ImportMaxRunning, c.ImportMaxUploads = n, n })
	if int(b.db.Pool.Config().MaxConns) >= n {
		t.Fatalf("the pool has %d connections: more uploads than that are needed", b.db.Pool.Config().MaxConns)
	}
	slowTok := b.apiKey(b.tenant("org_imp_slow"))
	otherTok := b.apiKey(b.tenant("org_imp_other"))
	b.expect("POST", "/api/contacts", otherTok, map[string]any{"email": "o@example.com"}, 201)

	addr := serveTCP(t, b)
	uploads := make([]*slowUpload, n)
	for i := range uploads {
		uploads[i] = openSlowUpload(t, addr, slowTok, time.Second)
	}
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			for _, u := range uploads {
				u.close()
			}
		})
	}
	t.Cleanup(closeAll)
	// Every upload's handler is under way, past its place, receiving.
	waitFor(t, fmt.Sprintf("%d slow uploads open", n), func() bool { return b.places() == n })

	client := &http.Client{Timeout: 2 * time.Minute}
	if status, raw := getOver(t, client, addr, "/api/contacts", otherTok); status != 200 || !strings.Contains(raw, "o@example.com") {
		t.Errorf("another tenant's GET /api/contacts with %d slow uploads open: %d %.300s", n, status, raw)
	}
	if status, raw := getOver(t, client, addr, "/readyz", ""); status != 200 || !strings.Contains(raw, `"ready"`) {
		t.Errorf("/readyz with %d slow uploads open: %d %.300s", n, status, raw)
	}

	// The clients go away: nothing of theirs is stored (a body cut short
	// is not a shorter file), and their places are freed.
	closeAll()
	waitFor(t, "the places of abandoned uploads freed", func() bool {
		return b.places() == 0 && b.svc.Imports.Uploading() == 0
	})
	var imports int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM contact_imports`).Scan(&imports); err != nil || imports != 0 {
		t.Fatalf("%d imports stored by abandoned uploads (%v)", imports, err)
	}
}

// serveTCP serves b's app on a loopback port and returns its address.
func serveTCP(t *testing.T, b *bundle) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.Shutdown() })
	return ln.Addr().String()
}

// places counts the places of uploads (every tenant).
func (b *bundle) places() int {
	b.t.Helper()
	var k int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM contact_import_uploads`).Scan(&k); err != nil {
		b.t.Fatal(err)
	}
	return k
}

// A tenant has at most IMPORT_MAX_RUNNING (2) imports uploading or
// running at once: a third is 429 RATE_LIMITED with Retry-After, and
// another tenant's import goes on; a place comes back when an upload
// ends, and an import counts until it has run.
func TestImportCapPerTenant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := b.apiKey(b.tenant("org_imp_cap"))
	otherTok := b.apiKey(b.tenant("org_imp_cap_other"))
	addr := serveTCP(t, b)
	first := openSlowUpload(t, addr, tok, time.Second)
	second := openSlowUpload(t, addr, tok, time.Second)
	t.Cleanup(first.close)
	waitFor(t, "two uploads open", func() bool { return b.places() == 2 })

	body := "email\na@example.com\n"
	r := b.upload("POST", "/api/contacts/import", tok, "text/csv", strings.NewReader(body))
	if r.status != 429 || r.code() != "RATE_LIMITED" || r.header.Get("Retry-After") != "30" {
		t.Fatalf("a third import: %d %v %s", r.status, r.header, r.raw)
	}
	b.importFile(otherTok, "text/csv", body) // another tenant's

	second.close()
	waitFor(t, "the second upload's place freed", func() bool { return b.places() == 1 })
	id := b.importFile(tok, "text/csv", body)
	// One uploading, one running (not yet run): still full.
	if r := b.upload("POST", "/api/contacts/import", tok, "text/csv", strings.NewReader(body)); r.status != 429 {
		t.Fatalf("with one uploading and one running: %d %s", r.status, r.raw)
	}
	importShape(t, b.runImport("org_imp_cap", tok, id), "completed", 1, 1, 1, 0, 0)
	b.importFile(tok, "text/csv", body)
}

// An instance receives at most IMPORT_MAX_UPLOADS bodies at once, whoever
// sends them: past it 503 with Retry-After; other requests go on.
func TestImportCapPerInstance(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.ImportMaxUploads = 1 })
	tok := b.apiKey(b.tenant("org_imp_inst"))
	otherTok := b.apiKey(b.tenant("org_imp_inst_other"))
	addr := serveTCP(t, b)
	slow := openSlowUpload(t, addr, tok, time.Second)
	t.Cleanup(slow.close)
	waitFor(t, "an upload open", func() bool { return b.places() == 1 })
	r := b.upload("POST", "/api/contacts/import", otherTok, "text/csv", strings.NewReader("email\na@example.com\n"))
	if r.status != 503 || r.code() != "SERVICE_UNAVAILABLE" || r.header.Get("Retry-After") != "30" {
		t.Fatalf("an import past the instance's uploads: %d %v %s", r.status, r.header, r.raw)
	}
	b.expect("POST", "/api/contacts", otherTok, map[string]any{"email": "b@example.com"}, 201)
}

// An upload is cut off at IMPORT_UPLOAD_TIMEOUT, whether it trickles or
// stops: 400 on body, nothing stored, its place freed.
func TestImportUploadDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.ImportUploadTimeout = 2 * time.Second })
	tok := b.apiKey(b.tenant("org_imp_late"))
	addr := serveTCP(t, b)
	for _, tick := range []time.Duration{100 * time.Millisecond, time.Hour} { // trickling, stopped
		u := openSlowUpload(t, addr, tok, tick)
		res, err := http.ReadResponse(bufio.NewReader(u.conn), nil)
		if err != nil {
			t.Fatalf("tick %v: %v", tick, err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		u.close()
		if res.StatusCode != 400 || !strings.Contains(string(raw), "was not received within 2s") {
			t.Fatalf("tick %v: %d %s", tick, res.StatusCode, raw)
		}
	}
	waitFor(t, "the places freed", func() bool { return b.places() == 0 })
	var imports int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM contact_imports`).Scan(&imports); err != nil || imports != 0 {
		t.Fatalf("%d imports stored by late uploads (%v)", imports, err)
	}
}
