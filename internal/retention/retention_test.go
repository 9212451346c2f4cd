package retention_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"sort"
	"testing"

	"tidings/internal/apperr"
	"tidings/internal/retention"
	"tidings/internal/store"
	"tidings/internal/testenv"
)

type fixture struct {
	t        *testing.T
	ctx      context.Context
	db       *store.DB
	files    retention.Dir
	archives *retention.Archives
}

// newFixture: tenant ten_a keeps events 30 days and has 900 events, one
// every 3 hours going back 112 days (so four months hold expired ones);
// ten_b keeps the default 365 days and has the same history.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), db: testenv.DB(t), files: retention.Dir(t.TempDir())}
	f.archives = &retention.Archives{DB: f.db, Files: f.files}
	f.exec(`INSERT INTO tenants (id, name, event_retention_days) VALUES ('ten_a', 'A', 30), ('ten_b', 'B', 365)`)
	for _, ten := range []string{"ten_a", "ten_b"} {
		f.exec(`INSERT INTO contacts (tenant_id, id, email) VALUES ($1, 'cnt_1', 'a@example.com'), ($1, 'cnt_2', 'b@example.com')`, ten)
		f.exec(`INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
			SELECT $1, 'evt_' || g, 'cnt_' || (1 + g % 2), 'e' || (g % 3), jsonb_build_object('n', g),
				now() - g * interval '3 hours' FROM generate_series(0, 899) g`, ten)
	}
	return f
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.db.Pool.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) archiver(fault func(string) error) *retention.Archiver {
	return &retention.Archiver{DB: f.db, Files: f.files, Fault: fault}
}

// inTable lists the tenant's event ids in the table.
func (f *fixture) inTable(tenant string) []string {
	f.t.Helper()
	rows, err := f.db.Pool.Query(f.ctx, `SELECT id FROM events WHERE tenant_id = $1`, tenant)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		out = append(out, id)
	}
	return out
}

// inArchive lists the event ids of every archived month of the tenant, as
// the API streams them, checking each month's count.
func (f *fixture) inArchive(tenant string) []string {
	f.t.Helper()
	months, err := f.archives.List(f.ctx, tenant)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, m := range months {
		r, err := f.archives.Open(f.ctx, tenant, m.Month)
		if err != nil {
			f.t.Fatal(err)
		}
		sc := bufio.NewScanner(r)
		n := 0
		for sc.Scan() {
			var l retention.Line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				f.t.Fatalf("%s: %v in %q", m.Month, err, sc.Text())
			}
			if l.ContactID == "" || l.Timestamp[:7] != m.Month {
				f.t.Fatalf("%s holds %+v", m.Month, l)
			}
			out = append(out, l.EventID)
			n++
		}
		if err := sc.Err(); err != nil {
			f.t.Fatal(err)
		}
		r.Close()
		if int64(n) != m.Events {
			f.t.Fatalf("%s: %d lines, the record says %d", m.Month, n, m.Events)
		}
	}
	return out
}

// exactlyOnce checks that table and archive together hold each of the 900
// events once, and returns how many are archived.
func (f *fixture) exactlyOnce(tenant string) int {
	f.t.Helper()
	table, archive := f.inTable(tenant), f.inArchive(tenant)
	all := append(append([]string(nil), table...), archive...)
	sort.Strings(all)
	seen := map[string]bool{}
	for _, id := range all {
		if seen[id] {
			f.t.Fatalf("%s: %s is in both the table and the archive, or twice in the archive", tenant, id)
		}
		seen[id] = true
	}
	if len(seen) != 900 {
		f.t.Fatalf("%s: %d events in table and archive, want 900 (%d in the table, %d archived)", tenant, len(seen), len(table), len(archive))
	}
	return len(archive)
}

// A run archives exactly the events older than the tenant's retention,
// month by month, and leaves other tenants alone.
func TestArchiveExpired(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var expired int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM events WHERE tenant_id = 'ten_a' AND occurred_at < now() - interval '30 days'`).Scan(&expired); err != nil {
		t.Fatal(err)
	}
	res, err := f.archiver(nil).Run(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != int64(expired) || res.Months < 3 {
		t.Fatalf("run %+v, want %d events over at least 3 months", res, expired)
	}
	if n := f.exactlyOnce("ten_a"); n != expired {
		t.Fatalf("%d archived, want %d", n, expired)
	}
	if n := f.exactlyOnce("ten_b"); n != 0 {
		t.Fatalf("ten_b (365 days) lost %d events", n)
	}
	// Nothing left to do; a second run changes nothing.
	if res, err := f.archiver(nil).Run(f.ctx); err != nil || res.Events != 0 {
		t.Fatalf("second run %+v %v", res, err)
	}
	// An event posted now with an old timestamp is archived by the next
	// run, appended to its month's archive.
	f.exec(`INSERT INTO events (tenant_id, id, contact_id, name, occurred_at) VALUES ('ten_a', 'evt_late', 'cnt_1', 'e', now() - interval '100 days')`)
	if res, err := f.archiver(nil).Run(f.ctx); err != nil || res.Events != 1 {
		t.Fatalf("late run %+v %v", res, err)
	}
	if got := f.inArchive("ten_a"); len(got) != expired+1 {
		t.Fatalf("%d archived after the late event, want %d", len(got), expired+1)
	}
	// Tenants see only their own archive.
	months, _ := f.archives.List(f.ctx, "ten_a")
	if _, err := f.archives.Open(f.ctx, "ten_b", months[0].Month); !apperr.IsCode(err, "NOT_FOUND") {
		t.Fatalf("another tenant's month: %v", err)
	}
	if _, err := f.archives.Open(f.ctx, "ten_a", "2026-13"); !apperr.IsCode(err, "VALIDATION_ERROR") {
		t.Fatalf("malformed month: %v", err)
	}
}

// A crash at each step of a month's run (the worker killed there) leaves
// every event in the table or in the archive, never both, never neither;
// the next run finishes the job.
func TestArchiveCrashAtEachStep(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"page", "written", "synced", "deleted", "committed"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			crash := errors.New("killed at " + step)
			// Let the first month through, crash in the second.
			months := 0
			fault := func(s string) error {
				if s == "page" {
					months++
				}
				if s == step && months == 2 {
					return crash
				}
				return nil
			}
			if _, err := f.archiver(fault).Run(f.ctx); !errors.Is(err, crash) {
				t.Fatalf("run: %v, want the crash", err)
			}
			before := f.exactlyOnce("ten_a")
			if before == 0 {
				t.Fatal("the first month was not archived before the crash")
			}
			res, err := f.archiver(nil).Run(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			after := f.exactlyOnce("ten_a")
			if after <= before || int64(after-before) != res.Events {
				t.Fatalf("after the crash %d archived, then %d (run %+v)", before, after, res)
			}
			var left int
			_ = f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FROM events WHERE tenant_id = 'ten_a' AND occurred_at < now() - interval '30 days'`).Scan(&left)
			if left != 0 {
				t.Fatalf("%d expired events left", left)
			}
		})
	}
}

// Two archivers side by side (two worker processes) archive each event
// once.
func TestArchiveConcurrentRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := f.archiver(nil).Run(f.ctx)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// A month one held, the other skipped; one more run takes what is left.
	if _, err := f.archiver(nil).Run(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.exactlyOnce("ten_a")
}
