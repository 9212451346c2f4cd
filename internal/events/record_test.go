package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"tidings/internal/events"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

// Hooks run in the event's transaction: what they write commits with the
// event, and their failure takes the event back.
func TestHooksShareTheEventTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.DB(t)
	for _, q := range []string{
		`INSERT INTO tenants (id, name) VALUES ('t', 'T')`,
		`INSERT INTO contacts (tenant_id, id, email) VALUES ('t', 'cnt_1', 'a@example.com')`,
		`INSERT INTO sequences (tenant_id, id, name, content, trigger_event) VALUES ('t', 'onboarding', 'O', '', 'signed_up'), ('t', 'other', 'O', '', 'signed_up')`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	fail := errors.New("hook failed")
	var shouldFail bool
	rec := &events.Recorder{DB: db, Hooks: []events.Hook{
		func(ctx context.Context, q *store.Tx, ev *events.Recorded) ([]string, error) {
			if shouldFail {
				return nil, fail
			}
			err := q.TimelineEntryInsert(ctx, queries.TimelineEntryInsertParams{TenantID: "t", ID: "tle_" + ev.EventID,
				ContactID: ev.ContactID, Type: "sequence_entered", OccurredAt: ev.Timestamp, Data: []byte(`{}`)})
			return []string{"onboarding"}, err
		},
	}}
	in := events.Custom{TenantID: "t", Email: "a@example.com", Name: "signed_up", Properties: []byte(`{}`),
		Timestamp: time.Now(), UpdateContact: true}
	got, err := rec.RecordCustom(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.TriggeredSequences) != 1 || len(got.ProcessedSequences) != 2 || got.Contact.LastEventAt == nil {
		t.Fatalf("%+v", got)
	}
	var processed []string
	if err := db.Pool.QueryRow(ctx, `SELECT processed_sequences FROM events WHERE id = $1`, got.EventID).Scan(&processed); err != nil || len(processed) != 2 {
		t.Fatalf("processed_sequences %v %v", processed, err)
	}

	shouldFail = true
	if _, err := rec.RecordCustom(ctx, in); !errors.Is(err, fail) {
		t.Fatalf("err %v", err)
	}
	var n int
	_ = db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM timeline_entries)`).Scan(&n)
	if n != 2 {
		t.Fatalf("a failed hook must roll the event back: %d rows", n)
	}
}
