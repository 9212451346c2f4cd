package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"tidings/internal/config"
	"tidings/internal/testenv"
)

// POST /api/events goes through the group commit (events.Ingest): these
// tests hold the HTTP contract around it: 503 with Retry-After when the
// database cannot keep up, the SIGTERM drain, and tenants kept apart
// when their events share batches.

type posted struct {
	status int
	header http.Header
	body   map[string]any
	err    error
}

// postEvent posts an event from any goroutine (bundle.do fails the test,
// which only the test's goroutine may do) through app.Test.
func (b *bundle) postEvent(tok string, body map[string]any) posted {
	j, _ := json.Marshal(body)
	req := httptest.NewRequest("POST", "/api/events", bytes.NewReader(j))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := b.app.Test(req, -1)
	if err != nil {
		return posted{err: err}
	}
	return readPosted(res)
}

func readPosted(res *http.Response) posted {
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	p := posted{status: res.StatusCode, header: res.Header}
	if err := json.Unmarshal(raw, &p.body); err != nil {
		p.err = fmt.Errorf("body %q: %w", raw, err)
	}
	return p
}

// lockRow holds a contact's row lock until release: a batch holding one of
// its events waits, as it would for a stuck database.
func (b *bundle) lockRow(email string) (release func()) {
	b.t.Helper()
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM contacts WHERE email = $1 FOR UPDATE`, email); err != nil {
		b.t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Commit(ctx) }) }
	b.t.Cleanup(release)
	return release
}

func (b *bundle) eventContacts(tok string, n int) []string {
	b.t.Helper()
	emails := make([]string, n)
	for i := range emails {
		emails[i] = fmt.Sprintf("p%d@example.com", i)
		b.expect("POST", "/api/contacts", tok, map[string]any{"email": emails[i]}, 201)
	}
	return emails
}

// While the database is stuck, events beyond the queue are refused at
// once with 503 SERVICE_UNAVAILABLE, Retry-After and the error envelope
// (nothing recorded); the ones accepted are answered 201 once it moves.
func TestEventBackPressure(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) {
		c.IngestBatchMax, c.IngestBatchWait, c.IngestQueue, c.IngestWriters = 1, 0, 2, 1
	})
	tok := b.apiKey(b.tenant("org_bp"))
	emails := b.eventContacts(tok, 12)
	release := b.lockRow(emails[0])
	answers := make(chan posted, len(emails))
	go func() { answers <- b.postEvent(tok, map[string]any{"email": emails[0], "name": "stuck"}) }()
	testenv.WaitForLockWait(b.t, b.db, "no batch waits for the lock")
	for _, e := range emails[1:] {
		go func() { answers <- b.postEvent(tok, map[string]any{"email": e, "name": "stuck"}) }()
	}
	// One in the stuck batch, one taken into the next, two queued.
	const bound = 4
	for range len(emails) - bound {
		select {
		case p := <-answers:
			if p.err != nil || p.status != 503 || p.header.Get("Retry-After") != "1" {
				t.Fatalf("while stuck: %+v", p)
			}
			e, _ := p.body["error"].(map[string]any)
			if e["code"] != "SERVICE_UNAVAILABLE" || e["message"] == "" || len(e["details"].(map[string]any)) != 0 {
				t.Fatalf("envelope %v", p.body)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("refusals did not come at once")
		}
	}
	release()
	for range bound {
		if p := <-answers; p.err != nil || p.status != 201 {
			t.Fatalf("after the database moved: %+v", p)
		}
	}
	if l := b.expect("GET", "/api/events", tok, nil, 200); len(l.items()) != bound {
		t.Fatalf("%d events stored, want %d", len(l.items()), bound)
	}
}

// SIGTERM: the server stops taking connections, the requests whose events
// wait for their batch are answered 201 once it commits, and then Serve
// returns; Close leaves nothing behind.
func TestEventDrainOnShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) { c.IngestBatchMax, c.IngestWriters = 4, 1 })
	tok := b.apiKey(b.tenant("org_drain"))
	emails := b.eventContacts(tok, 10)
	release := b.lockRow(emails[0])
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, sigterm := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, b.app, ln, 30*time.Second, slog.New(slog.DiscardHandler)) }()
	post := func(email string) posted {
		j, _ := json.Marshal(map[string]any{"email": email, "name": "drain"})
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/api/events", bytes.NewReader(j))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return posted{err: err}
		}
		return readPosted(res)
	}
	answers := make(chan posted, len(emails))
	go func() { answers <- post(emails[0]) }()
	testenv.WaitForLockWait(b.t, b.db, "no batch waits for the lock")
	for _, e := range emails[1:] {
		go func() { answers <- post(e) }()
	}
	for deadline := time.Now().Add(30 * time.Second); b.svc.Ingest.Stats().Taken.Load()+int64(b.svc.Ingest.Queued()) < int64(len(emails)); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the events never reached the queue")
		}
	}
	sigterm()
	select {
	case err := <-served:
		t.Fatalf("Serve returned with events waiting for their commit: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	for range emails {
		if p := <-answers; p.err != nil || p.status != 201 {
			t.Fatalf("%+v", p)
		}
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	b.svc.Ingest.Close() // as cmd/api does after Serve: nothing left to write
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE name = 'drain'`).Scan(&n); err != nil || n != len(emails) {
		t.Fatalf("%d events stored, want %d (%v)", n, len(emails), err)
	}
}

// Two tenants posting at once share batches; each event lands on its own
// tenant's contact (the same address in both), and each tenant sees its
// own events only.
func TestEventBatchesKeepTenantsApart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	toks := []string{b.apiKey(b.tenant("org_iso_a")), b.apiKey(b.tenant("org_iso_b"))}
	const per = 30
	contactOf := make([]string, len(toks))
	for i, tok := range toks {
		contactOf[i] = b.expect("POST", "/api/contacts", tok, map[string]any{"email": "same@example.com"}, 201).body["contactId"].(string)
	}
	var wg sync.WaitGroup
	answers := make(chan posted, per*len(toks))
	for i, tok := range toks {
		for n := range per {
			wg.Go(func() {
				answers <- b.postEvent(tok, map[string]any{"email": "same@example.com", "name": fmt.Sprintf("t%d", i),
					"properties": map[string]any{"n": n}})
			})
		}
	}
	wg.Wait()
	close(answers)
	for p := range answers {
		if p.err != nil || p.status != 201 {
			t.Fatalf("%+v", p)
		}
	}
	for i, tok := range toks {
		l := collect(b, tok, "/api/events?limit=100")
		if len(l) != per {
			t.Fatalf("tenant %d sees %d events, want %d", i, len(l), per)
		}
		for _, e := range l {
			if e["name"] != fmt.Sprintf("t%d", i) || e["contactId"] != contactOf[i] {
				t.Fatalf("tenant %d sees %v", i, e)
			}
		}
	}
	if st := b.svc.Ingest.Stats(); st.Items.Load() != int64(per*len(toks)) {
		t.Fatalf("%d events went through the group commit", st.Items.Load())
	}
}
