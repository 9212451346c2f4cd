package engine_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"tidings/internal/events"
	"tidings/internal/page"
	"tidings/internal/sequences/engine"
	"tidings/internal/sequences/engine/enginetest"
	"tidings/internal/store"
	"tidings/internal/testenv"
	"tidings/queries"
)

// The sequence_entered timeline entry is the enrolment itself (schema
// 0032): the timeline shows it with the id, time and data a stored entry
// had, for an enrolment by event and one by hand; an enrolment from
// before the schema keeps its stored entry and shows once; pages cut
// between entries lose none; and the sequence.entered webhook fact carries
// the entry's data and the contact's id.
func TestEnteredEntryIsTheEnrolment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "ten_entered")
	f.PutSequence("by-event", dripYAML, true)
	f.PutSequence("by-hand", "name: H\ntrigger: {event: never}\nsteps: [{delay: 1h}, {send: tips}]\n", true)
	f.Exec(`INSERT INTO enrolments (tenant_id, id, sequence_id, contact_id, current_step, current_step_index, status, enrolled_at)
		VALUES ($1, 'enr_old', 'gone', $2, 'step-1', 1, 'completed', now() - interval '1 day')`, f.Tenant, f.ContactID)
	f.Exec(`INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
		VALUES ($1, 'tle_enr_old:entered', $2, 'sequence_entered', now() - interval '1 day',
		'{"sequenceId": "gone", "enrolmentId": "enr_old", "sequenceVersion": 3}')`, f.Tenant, f.ContactID)
	// The endpoint comes after the enrolment of before schema 0032 (whose
	// stored entry's insert wrote its fact then).
	f.Exec(`INSERT INTO webhook_endpoints (tenant_id, id, url, secret) VALUES ($1, 'whk_1', 'https://hooks.example.com', 'whsec_x')`, f.Tenant)
	rec := f.Event("signed_up", nil)
	byEvent := f.Enrolment("by-event")
	byHand, created, err := f.Svc.Enrolments.Enrol(ctx, f.Tenant, "by-hand", f.ContactID)
	if err != nil || !created || byEvent == nil {
		t.Fatalf("enrolments: %+v, %+v %v %v", byEvent, byHand, created, err)
	}

	want := map[string]map[string]any{
		"tle_" + byEvent.ID + ":entered": {"sequenceId": "by-event", "enrolmentId": byEvent.ID, "sequenceVersion": 1.0,
			"eventId": rec.EventID, "eventName": "signed_up"},
		"tle_" + byHand.ID + ":entered": {"sequenceId": "by-hand", "enrolmentId": byHand.ID, "sequenceVersion": 1.0},
		"tle_enr_old:entered":           {"sequenceId": "gone", "enrolmentId": "enr_old", "sequenceVersion": 3.0},
	}
	at := map[string]time.Time{"tle_" + byEvent.ID + ":entered": byEvent.EnrolledAt, "tle_" + byHand.ID + ":entered": byHand.EnrolledAt}
	all := timeline(f, 100)
	var seen []string
	for _, r := range all {
		if r.Name != "sequence_entered" {
			continue
		}
		seen = append(seen, r.ID)
		var data map[string]any
		if err := json.Unmarshal(r.Data, &data); err != nil || r.Kind != "entry" || !maps.Equal(data, want[r.ID]) {
			t.Errorf("%s (%s): %v, want %v (%v)", r.ID, r.Kind, data, want[r.ID], err)
		}
		if w, ok := at[r.ID]; ok && !r.OccurredAt.Equal(w) {
			t.Errorf("%s at %v, want the enrolment's %v", r.ID, r.OccurredAt, w)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("sequence_entered entries %v, want one each of %v", seen, slices.Collect(maps.Keys(want)))
	}

	// One entry per page, newest first: the same entries in the same order.
	var paged []string
	p := page.Params{Limit: 1}
	for range len(all) + 1 {
		rows, next, err := f.Svc.Feed.Timeline(ctx, f.Tenant, f.ContactID, time.Time{}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			paged = append(paged, r.ID)
		}
		if next == nil {
			break
		}
		p.After = next
	}
	var ids []string
	for _, r := range all {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(paged, ids) {
		t.Fatalf("paged %v, want %v", paged, ids)
	}

	// The webhook facts: one per new enrolment, the entry's data and the contact.
	rows, err := f.Svc.DB.Pool.Query(ctx, `SELECT data FROM webhook_outbox WHERE tenant_id = $1 AND type = 'sequence.entered'`, f.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	facts := 0
	for rows.Next() {
		var data map[string]any
		if err := rows.Scan(&data); err != nil {
			t.Fatal(err)
		}
		facts++
		id := "tle_" + data["enrolmentId"].(string) + ":entered"
		w := maps.Clone(want[id])
		w["contactId"] = f.ContactID
		if !maps.Equal(data, w) {
			t.Errorf("sequence.entered %v, want %v", data, w)
		}
	}
	if facts != 2 {
		t.Errorf("%d sequence.entered facts, want 2", facts)
	}
}

// The scheduled timeline entry is the scheduled send (schema 0033) until
// the send is pruned, then a stored entry: the same id, time and data
// throughout, the time shown the one it was first scheduled for even
// after the send moved. A scheduled send from before the schema keeps its
// stored entry and shows once; pruning the send of a deleted contact
// writes nothing.
func TestScheduledEntryIsTheScheduledSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "ten_scheduled")
	f.PutSequence("onboarding", dripYAML, true)
	f.Exec(`INSERT INTO scheduled_sends (tenant_id, id, contact_id, enrolment_id, sequence_id, sequence_version, step_id,
		template_id, scheduled_for, created_at) VALUES ($1, 'sch_old', $2, 'enr_old', 'gone', 1, 'step-1', 'welcome',
		now() - interval '2 days', now() - interval '3 days')`, f.Tenant, f.ContactID)
	f.Exec(`INSERT INTO timeline_entries (tenant_id, id, contact_id, type, occurred_at, data)
		VALUES ($1, 'tle_sch_old:scheduled', $2, 'scheduled', now() - interval '3 days', '{"scheduledSendId": "sch_old"}')`,
		f.Tenant, f.ContactID)
	f.Event("signed_up", nil)
	pending := f.Scheduled("pending", "")
	var ss *queries.ScheduledSend
	for i := range pending {
		if pending[i].ID != "sch_old" {
			ss = &pending[i]
		}
	}
	if ss == nil {
		t.Fatalf("pending %+v", pending)
	}
	id := "tle_" + ss.ID + ":scheduled"
	want := map[string]any{"scheduledSendId": ss.ID, "sequenceId": "onboarding", "stepId": "step-1", "templateId": "welcome",
		"scheduledFor": ss.ScheduledFor.UTC().Format("2006-01-02T15:04:05.000Z")}
	// check finds the entries of type scheduled: the new one as wanted,
	// the old one once.
	check := func(when string) {
		t.Helper()
		found := map[string]int{}
		for _, r := range timeline(f, 100) {
			if r.Name != "scheduled" {
				continue
			}
			found[r.ID]++
			if r.ID != id {
				continue
			}
			var data map[string]any
			if err := json.Unmarshal(r.Data, &data); err != nil || !maps.Equal(data, want) || !r.OccurredAt.Equal(ss.CreatedAt) {
				t.Fatalf("%s: %v at %v, want %v at %v (%v)", when, data, r.OccurredAt, want, ss.CreatedAt, err)
			}
		}
		if len(found) != 2 || found[id] != 1 || found["tle_sch_old:scheduled"] != 1 {
			t.Fatalf("%s: scheduled entries %v", when, found)
		}
	}
	check("pending")
	f.Exec(`UPDATE scheduled_sends SET scheduled_for = scheduled_for + interval '1 hour' WHERE tenant_id = $1 AND id = $2`, f.Tenant, ss.ID)
	check("moved")

	f.Exec(`UPDATE scheduled_sends SET status = 'sent', finished_at = now() - interval '8 days' WHERE tenant_id = $1`, f.Tenant)
	f.Exec(`INSERT INTO scheduled_sends (tenant_id, id, contact_id, enrolment_id, sequence_id, sequence_version, step_id,
		template_id, scheduled_for, first_scheduled_for, status, cancel_reason, finished_at) VALUES ($1, 'sch_deleted', 'cnt_deleted',
		'enr_x', 'onboarding', 1, 'step-1', 'welcome', now(), now(), 'cancelled', 'contact_deleted', now() - interval '8 days')`, f.Tenant)
	n, err := f.Svc.Sweeper.Prune(ctx, time.Now())
	var left int
	if err == nil {
		err = f.Svc.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM scheduled_sends`).Scan(&left)
	}
	if err != nil || n != 3 || left != 0 {
		t.Fatalf("pruned %d, %d left (%v); want 3, 0", n, left, err)
	}
	check("pruned")
	var stray int
	if err := f.Svc.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM timeline_entries WHERE contact_id = 'cnt_deleted'`).Scan(&stray); err != nil || stray != 0 {
		t.Fatalf("%d entries of a deleted contact (%v)", stray, err)
	}
}

// An event's enrolment meets a concurrent one (begun after the engine read
// that the contact had none, committed while its insert waited on
// enrolments_open): the insert leaves that position out, the event enters
// nothing and is stored, and the contact has one open enrolment, the
// other, with no scheduled send of the event's.
func TestEnrolmentMeetsAConcurrentEnrolment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "ten_race")
	f.PutSequence("onboarding", dripYAML, true)
	other, err := f.Svc.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	if _, err := other.Exec(ctx, `INSERT INTO enrolments (tenant_id, id, sequence_id, contact_id, current_step, current_step_index,
		sequence_version) VALUES ($1, 'enr_other', 'onboarding', $2, 'step-1', 1, 1)`, f.Tenant, f.ContactID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		triggered []string
		err       error
	}
	done := make(chan result, 1)
	go func() {
		rec, err := f.Svc.Events.RecordCustom(ctx, events.Custom{TenantID: f.Tenant, Email: enginetest.Contact,
			Name: "signed_up", Properties: []byte(`{}`), Timestamp: time.Now(), UpdateContact: true})
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{triggered: rec.TriggeredSequences}
	}()
	testenv.WaitForLockWait(t, f.Svc.DB, "the event's enrolment never waited for the other one")
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.triggered) != 0 {
		t.Fatalf("event: triggered %v, %v; want none and no error", r.triggered, r.err)
	}
	var open, sends int
	if err := f.Svc.DB.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM enrolments WHERE tenant_id = $1 AND status = 'active'),
		(SELECT count(*) FROM scheduled_sends WHERE tenant_id = $1)`, f.Tenant).Scan(&open, &sends); err != nil || open != 1 || sends != 0 {
		t.Fatalf("%d open enrolments, %d scheduled sends (%v); want the other one alone", open, sends, err)
	}
	if e := f.Enrolment("onboarding"); e == nil || e.ID != "enr_other" {
		t.Fatalf("enrolment %+v", e)
	}
}

// The engine enrols an event's contact only in the sequences the event
// was stored as processing: a sequence its name triggers that was not
// among them when it was stored (enabled between the event's insert and
// the hook) waits for the next event, so triggered is always within
// processed.
func TestEnrolsOnlyInTheProcessedSequences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := enginetest.New(t, "ten_processed")
	f.PutSequence("a", dripYAML, true)
	f.PutSequence("b", strings.Replace(dripYAML, "Onboarding", "Other", 1), true)
	var triggered []string
	f.Tx(func(q *store.Tx) error {
		var err error
		triggered, err = engine.Hook(ctx, q, &events.Recorded{EventID: "evt_1", Name: "signed_up", Properties: []byte(`{}`),
			Timestamp: time.Now(), ContactID: f.ContactID, ProcessedSequences: []string{"a"},
			Contact: queries.Contact{TenantID: f.Tenant, ID: f.ContactID, Subscribed: true}})
		return err
	})
	if !slices.Equal(triggered, []string{"a"}) {
		t.Fatalf("triggered %v, want [a]", triggered)
	}
	if f.Enrolment("a") == nil || f.Enrolment("b") != nil {
		t.Fatalf("enrolments a %+v, b %+v; want a only", f.Enrolment("a"), f.Enrolment("b"))
	}
}
