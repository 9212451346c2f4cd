package events_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"tidings/internal/apperr"
	"tidings/internal/events"
	"tidings/internal/groupcommit"
	"tidings/internal/store"
)

type recorded struct {
	n   int
	rec *events.Recorded
	err error
}

// record calls g.Record from a goroutine and delivers its answer.
func record(ctx context.Context, g *events.Ingest, in events.Custom, n int, out chan<- recorded) {
	go func() {
		rec, err := g.Record(ctx, in)
		out <- recorded{n: n, rec: rec, err: err}
	}()
}

// lockContact holds the contact's row lock in a transaction of its own
// until the returned release is called: a batch holding one of its events
// waits for it, as it would for a slow or stuck database.
func lockContact(t *testing.T, db *store.DB, tenant, email string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM contacts WHERE tenant_id = $1 AND email = $2 FOR UPDATE`, tenant, email); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Commit(ctx) }) }
	t.Cleanup(release)
	return release
}

// waitingBackend waits until a backend of the test's database waits for a
// lock, and returns its pid.
func waitingBackend(t *testing.T, db *store.DB) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var pid int
		err := db.Pool.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' LIMIT 1`).Scan(&pid)
		if err == nil {
			return pid
		}
		if err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no backend waits for the lock")
		}
	}
}

func countEvents(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func noAnswer(t *testing.T, answers <-chan recorded, why string) {
	t.Helper()
	select {
	case a := <-answers:
		t.Fatalf("%s: answered %+v", why, a)
	case <-time.After(200 * time.Millisecond):
	}
}

// An event is answered only once the transaction holding it committed:
// while its batch waits on the database nothing is answered, the request
// giving up changes nothing (the batch has it), and a batch whose
// connection is killed before its commit has stored nothing and is written
// again event by event rather than answered as if stored; the answer,
// when it comes, names a stored event, stored once.
func TestIngestAnswersOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := manySetup(t, "a@example.com", "b@example.com", "c@example.com")
	g := events.NewIngest(&events.Recorder{DB: db}, groupcommit.Options{MaxWait: -1, Writers: 1})
	defer g.Close()
	// c's event holds the one writer while a's and b's gather behind it
	// into one batch.
	releaseC := lockContact(t, db, "t1", "c@example.com")
	releaseA := lockContact(t, db, "t1", "a@example.com")
	answers := make(chan recorded, 3)
	record(ctx, g, custom("t1", "c@example.com", "first", time.Now()), 0, answers)
	waitingBackend(t, db)
	aCtx, cancelA := context.WithCancel(ctx)
	record(aCtx, g, custom("t1", "a@example.com", "held", time.Now()), 1, answers)
	record(ctx, g, custom("t1", "b@example.com", "free", time.Now()), 2, answers)
	for deadline := time.Now().Add(30 * time.Second); g.Stats().Taken.Load() != 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d taken", g.Stats().Taken.Load())
		}
	}
	releaseC()
	if a := <-answers; a.n != 0 || a.err != nil {
		t.Fatalf("%+v", a)
	}
	// The batch of a and b waits for a's lock: nothing is answered, nothing
	// is visible, and a's request giving up changes nothing.
	pid := waitingBackend(t, db)
	noAnswer(t, answers, "the batch waits for the lock")
	if n := countEvents(t, db); n != 1 {
		t.Fatalf("%d events visible, want c's only", n)
	}
	cancelA()
	noAnswer(t, answers, "a's request gave up after its batch took the event")
	// The batch's backend dies before the commit: nothing of it was stored,
	// so each event is written again on its own, in the batch's order: a's
	// waits for the lock again (and b's behind it).
	if _, err := db.Pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); waitingBackend(t, db) == pid; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the killed backend still waits")
		}
	}
	noAnswer(t, answers, "a is written again and waits for the lock again")
	releaseA()
	a, b := <-answers, <-answers
	if a.n != 1 {
		a, b = b, a
	}
	if a.n != 1 || a.err != nil || a.rec == nil || b.n != 2 || b.err != nil {
		t.Fatalf("%+v %+v", a, b)
	}
	var ids []string
	rows, err := db.Pool.Query(ctx, `SELECT e.id FROM events e JOIN contacts c ON c.tenant_id = e.tenant_id AND c.id = e.contact_id
		WHERE c.email = 'a@example.com'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != 1 || ids[0] != a.rec.EventID || countEvents(t, db) != 3 {
		t.Fatalf("a's events stored %v, answered %s; %d in all", ids, a.rec.EventID, countEvents(t, db))
	}
}

// A lone event whose connection dies before its commit is answered with
// the error, never as recorded, and is not stored.
func TestIngestKilledBeforeCommitIsNotAnsweredStored(t *testing.T) {
	t.Parallel()
	db := manySetup(t, "a@example.com")
	g := events.NewIngest(&events.Recorder{DB: db}, groupcommit.Options{MaxWait: -1})
	defer g.Close()
	release := lockContact(t, db, "t1", "a@example.com")
	answers := make(chan recorded, 1)
	record(context.Background(), g, custom("t1", "a@example.com", "held", time.Now()), 0, answers)
	pid := waitingBackend(t, db)
	if _, err := db.Pool.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	if a := <-answers; a.err == nil {
		t.Fatalf("answered as stored: %+v", a)
	}
	release()
	if n := countEvents(t, db); n != 0 {
		t.Fatalf("%d events stored", n)
	}
}

// Under a database whose connections are killed again and again, no event
// answered as recorded is missing afterwards, and none is stored twice.
func TestIngestLosesNoAnsweredEvent(t *testing.T) {
	t.Parallel()
	emails := make([]string, 64)
	for i := range emails {
		emails[i] = fmt.Sprintf("c%d@example.com", i)
	}
	db := manySetup(t, emails...)
	g := events.NewIngest(&events.Recorder{DB: db}, groupcommit.Options{MaxBatch: 16, Writers: 2})
	defer g.Close()
	ctx := context.Background()
	stop := make(chan struct{})
	var kills atomic.Int64
	var killer sync.WaitGroup
	killer.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			var n int64
			if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()) k`).Scan(&n); err == nil {
				kills.Add(n)
			}
		}
	})
	const clients, perClient = 16, 40
	var mu sync.Mutex
	answered := map[int]string{} // n -> event id answered as stored
	failed := 0
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range perClient {
				n := c*perClient + i
				in := custom("t1", emails[n%len(emails)], "chaos", time.Now())
				in.Properties = fmt.Appendf(nil, `{"n":%d}`, n)
				rec, err := g.Record(ctx, in)
				mu.Lock()
				if err == nil {
					answered[n] = rec.EventID
				} else {
					failed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()
	if kills.Load() == 0 || len(answered) == 0 {
		t.Fatalf("%d backends killed, %d events answered: the test proved nothing", kills.Load(), len(answered))
	}
	db.Pool.Reset() // the killer left dead connections idle in the pool
	stored := map[int]string{}
	rows, err := db.Pool.Query(ctx, `SELECT (properties->>'n')::int, id FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n int
		var id string
		if err := rows.Scan(&n, &id); err != nil {
			t.Fatal(err)
		}
		if _, twice := stored[n]; twice {
			t.Fatalf("event %d stored twice", n)
		}
		stored[n] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for n, id := range answered {
		if stored[n] != id {
			t.Fatalf("event %d answered as %s, stored as %q", n, id, stored[n])
		}
	}
	t.Logf("%d backends killed; %d events answered stored (all found), %d answered failed, %d of those stored anyway",
		kills.Load(), len(answered), failed, len(stored)-len(answered))
}

// Close (the api's SIGTERM drain) writes and answers the events already
// queued, waiting for the database, and refuses what comes after.
func TestIngestCloseDrains(t *testing.T) {
	t.Parallel()
	emails := make([]string, 12)
	for i := range emails {
		emails[i] = fmt.Sprintf("c%d@example.com", i)
	}
	db := manySetup(t, emails...)
	g := events.NewIngest(&events.Recorder{DB: db}, groupcommit.Options{MaxBatch: 4, MaxWait: -1, Writers: 1})
	release := lockContact(t, db, "t1", emails[0])
	answers := make(chan recorded, len(emails))
	record(context.Background(), g, custom("t1", emails[0], "drain", time.Now()), 0, answers)
	waitingBackend(t, db)
	for i := 1; i < len(emails); i++ {
		record(context.Background(), g, custom("t1", emails[i], "drain", time.Now()), i, answers)
	}
	for deadline := time.Now().Add(30 * time.Second); g.Stats().Taken.Load()+int64(g.Queued()) < int64(len(emails)); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the events were not queued")
		}
	}
	closed := make(chan struct{})
	go func() { g.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned with events still queued")
	case <-time.After(200 * time.Millisecond):
	}
	release()
	<-closed
	for range emails {
		if a := <-answers; a.err != nil {
			t.Fatalf("event %d: %v", a.n, a.err)
		}
	}
	if n := countEvents(t, db); n != len(emails) {
		t.Fatalf("%d events stored, want %d", n, len(emails))
	}
	_, err := g.Record(context.Background(), custom("t1", emails[1], "late", time.Now()))
	if e, ok := apperr.As(err); !ok || e.Kind != apperr.KindUnavailable || e.RetryAfter != events.RetryAfter {
		t.Fatalf("after Close: %v", err)
	}
}

// A stuck database fills the queue, and then events are refused at once
// (503 SERVICE_UNAVAILABLE, Retry-After) rather than held without bound;
// those accepted are written once it moves again.
func TestIngestRefusesWhenFull(t *testing.T) {
	t.Parallel()
	emails := make([]string, 30)
	for i := range emails {
		emails[i] = fmt.Sprintf("c%d@example.com", i)
	}
	db := manySetup(t, emails...)
	o := groupcommit.Options{MaxBatch: 2, MaxWait: -1, Queue: 3, Writers: 1}
	g := events.NewIngest(&events.Recorder{DB: db}, o)
	defer g.Close()
	release := lockContact(t, db, "t1", emails[0])
	answers := make(chan recorded, len(emails))
	record(context.Background(), g, custom("t1", emails[0], "stuck", time.Now()), 0, answers)
	waitingBackend(t, db)
	for i := 1; i < len(emails); i++ {
		record(context.Background(), g, custom("t1", emails[i], "stuck", time.Now()), i, answers)
	}
	bound := o.Writers*o.MaxBatch + o.MaxBatch + o.Queue
	refused := 0
	for refused < len(emails)-bound {
		select {
		case a := <-answers:
			e, ok := apperr.As(a.err)
			if !ok || e.Kind != apperr.KindUnavailable || e.Code != "SERVICE_UNAVAILABLE" || e.RetryAfter != 1 {
				t.Fatalf("answered %+v while stuck", a)
			}
			refused++
		case <-time.After(30 * time.Second):
			t.Fatalf("%d refused", refused)
		}
	}
	release()
	written := 0
	for range len(emails) - refused {
		a := <-answers
		if a.err == nil {
			written++
		} else if !apperr.IsKind(a.err, apperr.KindUnavailable) {
			t.Fatal(a.err)
		}
	}
	if written > bound || countEvents(t, db) != written {
		t.Fatalf("written %d (bound %d), stored %d", written, bound, countEvents(t, db))
	}
}
