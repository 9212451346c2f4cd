package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/events"
	"tidings/internal/store"
	"tidings/internal/testenv"
)

// manySetup is a database with two tenants, t1 and t2, each holding the
// contacts given by email (the same addresses in both), ids
// cnt_<tenant>_<i>.
func manySetup(t *testing.T, emails ...string) *store.DB {
	t.Helper()
	db := testenv.DB(t)
	for _, tenant := range []string{"t1", "t2"} {
		exec(t, db, `INSERT INTO tenants (id, name) VALUES ($1, $1)`, tenant)
		for i, e := range emails {
			exec(t, db, `INSERT INTO contacts (tenant_id, id, email) VALUES ($1, $2, $3)`,
				tenant, fmt.Sprintf("cnt_%s_%d", tenant, i), e)
		}
	}
	return db
}

func exec(t testing.TB, db *store.DB, sql string, args ...any) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func custom(tenant, email, name string, at time.Time) events.Custom {
	return events.Custom{TenantID: tenant, Email: email, Name: name, Properties: []byte(`{"k":1}`),
		Timestamp: at, UpdateContact: true}
}

// A batch records what RecordCustom records for each event: the contact
// found by email within its tenant, lastEventAt moved forward only, the
// contact left alone with updateContact false, CONTACT_NOT_FOUND for an
// unknown address without disturbing the others, and a contact's events
// applied in order even when the batch holds several.
func TestRecordCustomManyAsOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := manySetup(t, "a@example.com", "b@example.com", "c@example.com")
	rec := &events.Recorder{DB: db}
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := now.Add(-48 * time.Hour)
	quiet := custom("t1", "c@example.com", "quiet", now)
	quiet.UpdateContact = false
	ins := []events.Custom{
		custom("t1", "a@example.com", "first", now.Add(-time.Hour)),
		custom("t2", "a@example.com", "other tenant", now),
		custom("t1", "ghost@example.com", "nobody", now),
		custom("t1", "b@example.com", "old", old),
		quiet,
		custom("t1", "a@example.com", "second", now), // a's second event: after the first
		custom("t2", "ghost@example.com", "nobody", now),
	}
	recs, errs := rec.RecordCustomMany(ctx, ins)
	if len(recs) != len(ins) || len(errs) != len(ins) {
		t.Fatalf("%d records, %d errors for %d events", len(recs), len(errs), len(ins))
	}
	for _, i := range []int{2, 6} {
		if recs[i] != nil || !apperr.IsCode(errs[i], "CONTACT_NOT_FOUND") {
			t.Fatalf("event %d: %+v %v", i, recs[i], errs[i])
		}
	}
	want := map[int]struct{ contact, name string }{0: {"cnt_t1_0", "first"}, 1: {"cnt_t2_0", "other tenant"},
		3: {"cnt_t1_1", "old"}, 4: {"cnt_t1_2", "quiet"}, 5: {"cnt_t1_0", "second"}}
	for i, w := range want {
		r := recs[i]
		if errs[i] != nil || r == nil || r.ContactID != w.contact || r.Name != w.name || r.Contact.TenantID != ins[i].TenantID ||
			!r.Timestamp.Equal(ins[i].Timestamp) || len(r.EventID) < 5 || r.ProcessedSequences == nil || r.TriggeredSequences == nil {
			t.Fatalf("event %d: %+v %v", i, r, errs[i])
		}
	}
	// The contact as each event left it: a's second event sees the first.
	if l := recs[0].Contact.LastEventAt; l == nil || !l.Equal(ins[0].Timestamp) {
		t.Fatalf("a after its first event: %v", l)
	}
	if l := recs[5].Contact.LastEventAt; l == nil || !l.Equal(now) {
		t.Fatalf("a after its second event: %v", l)
	}
	lastEventAt := func(tenant, id string) *time.Time {
		var l *time.Time
		if err := db.Pool.QueryRow(ctx, `SELECT last_event_at FROM contacts WHERE tenant_id = $1 AND id = $2`, tenant, id).Scan(&l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	for _, c := range []struct {
		tenant, id string
		want       *time.Time
	}{{"t1", "cnt_t1_0", &now}, {"t2", "cnt_t2_0", &now}, {"t1", "cnt_t1_1", &old}, {"t1", "cnt_t1_2", nil}, {"t2", "cnt_t2_1", nil}} {
		got := lastEventAt(c.tenant, c.id)
		if (got == nil) != (c.want == nil) || (got != nil && !got.Equal(*c.want)) {
			t.Errorf("%s/%s lastEventAt %v, want %v", c.tenant, c.id, got, c.want)
		}
	}
	// An older event does not move lastEventAt back, in a batch as alone.
	if _, errs := rec.RecordCustomMany(ctx, []events.Custom{custom("t1", "a@example.com", "late", old),
		custom("t1", "b@example.com", "x", now)}); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if l := lastEventAt("t1", "cnt_t1_0"); !l.Equal(now) {
		t.Fatalf("lastEventAt moved back to %v", l)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 7 {
		t.Fatalf("%d events stored, want 7 (%v)", n, err)
	}
	var props json.RawMessage
	if err := db.Pool.QueryRow(ctx, `SELECT properties FROM events WHERE tenant_id = 't2' AND id = $1`, recs[1].EventID).Scan(&props); err != nil || string(props) != `{"k": 1}` {
		t.Fatalf("properties %s %v", props, err)
	}
}

// One event that the database refuses fails alone: its batch's
// transaction is rolled back and every event is recorded again on its
// own, so the others are stored (once each) and only it gets the error.
func TestRecordCustomManyIsolatesAFailingEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	emails := make([]string, 10)
	for i := range emails {
		emails[i] = fmt.Sprintf("c%d@example.com", i)
	}
	db := manySetup(t, emails...)
	// The database refuses events named boom (a stand-in for any row one
	// event's content makes it refuse).
	exec(t, db, `CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.name = 'boom' THEN RAISE EXCEPTION 'boom refused' USING ERRCODE = 'P0001'; END IF; RETURN NEW; END $$`)
	exec(t, db, `CREATE TRIGGER refuse_boom BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION refuse_boom()`)
	hooked := map[string]int{}
	rec := &events.Recorder{DB: db, Hooks: []events.Hook{func(_ context.Context, _ *store.Tx, ev *events.Recorded) ([]string, error) {
		hooked[ev.EventID]++
		return nil, nil
	}}}
	var ins []events.Custom
	for i, e := range emails {
		name := "fine"
		if i == 6 {
			name = "boom"
		}
		ins = append(ins, custom("t1", e, name, time.Now()))
	}
	recs, errs := rec.RecordCustomMany(ctx, ins)
	for i := range ins {
		if i == 6 {
			if errs[i] == nil || recs[i] != nil {
				t.Fatalf("the refused event: %+v %v", recs[i], errs[i])
			}
			continue
		}
		if errs[i] != nil || recs[i] == nil {
			t.Fatalf("event %d failed with the refused one: %v", i, errs[i])
		}
	}
	var n, distinct int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT contact_id) FROM events`).Scan(&n, &distinct); err != nil || n != 9 || distinct != 9 {
		t.Fatalf("%d events for %d contacts, want 9 (%v)", n, distinct, err)
	}
	for _, r := range recs {
		if r != nil && hooked[r.EventID] != 1 {
			t.Fatalf("the stored event %s was hooked %d times in its stored transaction", r.EventID, hooked[r.EventID])
		}
	}
}

// A hook's failure in the batch is one event's failure too; the others
// are stored with their processed sequences (the enabled sequences of
// their tenant that their name triggers) and what the hook entered.
func TestRecordCustomManyIsolatesAFailingHook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := manySetup(t, "a@example.com", "b@example.com", "c@example.com")
	for _, s := range []struct {
		tenant, id, trigger string
		enabled             bool
	}{{"t1", "seq_x", "x", true}, {"t1", "seq_x2", "x", true}, {"t1", "seq_off", "x", false}, {"t1", "seq_bad", "bad", true},
		{"t2", "seq_y", "y", true}, {"t2", "seq_x_of_t2", "x", true}} {
		exec(t, db, `INSERT INTO sequences (tenant_id, id, name, content, trigger_event, enabled) VALUES ($1, $2, $2, '', $3, $4)`,
			s.tenant, s.id, s.trigger, s.enabled)
	}
	rec := &events.Recorder{DB: db,
		Hooks: []events.Hook{func(_ context.Context, _ *store.Tx, ev *events.Recorded) ([]string, error) {
			if ev.Name == "bad" {
				return nil, fmt.Errorf("hook refused %s", ev.EventID)
			}
			return ev.ProcessedSequences[:1], nil
		}},
		BatchHooks: []events.BatchHook{func(_ context.Context, _ *store.Tx, evs []*events.Recorded) error {
			for _, ev := range evs {
				if ev.Name == "bad" {
					return fmt.Errorf("hook refused %s", ev.EventID)
				}
				ev.TriggeredSequences = append(ev.TriggeredSequences, ev.ProcessedSequences[:1]...)
			}
			return nil
		}}}
	recs, errs := rec.RecordCustomMany(ctx, []events.Custom{custom("t1", "a@example.com", "x", time.Now()),
		custom("t1", "b@example.com", "bad", time.Now()), custom("t2", "c@example.com", "y", time.Now())})
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		t.Fatal(errs)
	}
	want := map[string]string{"x": "seq_x,seq_x2", "y": "seq_y"}
	for _, r := range []*events.Recorded{recs[0], recs[2]} {
		var processed []string
		if err := db.Pool.QueryRow(ctx, `SELECT processed_sequences FROM events WHERE tenant_id = $1 AND id = $2`,
			r.Contact.TenantID, r.EventID).Scan(&processed); err != nil || strings.Join(processed, ",") != want[r.Name] {
			t.Fatalf("%s: stored processed %v %v, want %s", r.Name, processed, err, want[r.Name])
		}
		if strings.Join(r.ProcessedSequences, ",") != want[r.Name] || len(r.TriggeredSequences) != 1 || r.TriggeredSequences[0] != processed[0] {
			t.Fatalf("%s: processed %v, triggered %v", r.Name, r.ProcessedSequences, r.TriggeredSequences)
		}
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d events", n)
	}
}
