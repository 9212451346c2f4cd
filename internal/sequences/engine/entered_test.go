package engine_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"tidings/internal/page"
	"tidings/internal/sequences/engine/enginetest"
)

// The sequence_entered timeline entry is the enrolment itself (schema
// 0033): the timeline shows it with the id, time and data a stored entry
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
	// The endpoint comes after the enrolment of before schema 0033 (whose
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
