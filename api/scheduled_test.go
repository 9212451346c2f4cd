package api

import (
	"testing"

	"tidings/internal/sequences/engine"
	"tidings/internal/sequences/engine/enginetest"
)

// The HTTP contract of scheduled sends and enrolments: GET /api/scheduled's
// filters and each route's tenant isolation. What the engine does with the
// rows is tested beside it (internal/sequences/engine), its queue in
// worker/.

// seqFixture is a sendFixture (the contact Ann, the template welcome) with
// the template tips, for tests that drive the sequence engine over HTTP;
// sends are run by hand (runDue) instead of through asynq.
type seqFixture struct {
	sendFixture
}

func newSeqFixture(t *testing.T, org string) seqFixture {
	t.Helper()
	f := newSendFixture(t, org)
	f.b.expect("PUT", "/api/templates/tips", f.key, map[string]any{"name": "Tips", "subject": "Tips for {{ contact.email }}",
		"content": `<mjml><mj-body><mj-section><mj-column><mj-text>Tip: {{ event.properties.plan }}</mj-text></mj-column></mj-section></mj-body></mjml>`}, 201)
	return seqFixture{sendFixture: f}
}

// putSequence stores a sequence as the definitions API will (its parse
// as definition), without the definitions store's hooks.
func (f seqFixture) putSequence(id, src string, enabled bool) {
	f.b.t.Helper()
	enginetest.PutSequence(f.b.t, f.b.db, f.org, id, src, enabled)
}

func (f seqFixture) event(name string, props map[string]any) resp {
	f.b.t.Helper()
	return f.b.expect("POST", "/api/events", f.key, map[string]any{"email": "ann@example.com", "name": name,
		"properties": props}, 201)
}

// runDue runs every due scheduled send of the test's tenant once.
func (f seqFixture) runDue() []engine.Outcome {
	f.b.t.Helper()
	return enginetest.RunDue(f.b.t, f.b.db, f.b.svc.Runner, f.org)
}

func (f seqFixture) scheduled(query string) []map[string]any {
	f.b.t.Helper()
	r := f.b.expect("GET", "/api/scheduled?"+query, f.key, nil, 200)
	var out []map[string]any
	for _, it := range r.items() {
		out = append(out, it.(map[string]any))
	}
	return out
}

func (f seqFixture) enrolment(seqID string) map[string]any {
	f.b.t.Helper()
	for _, it := range f.b.expect("GET", "/api/contacts/"+f.contactID+"/sequences", f.key, nil, 200).items() {
		m := it.(map[string]any)
		if m["sequenceId"] == seqID {
			return m
		}
	}
	return nil
}

var wantOutcomes = enginetest.WantOutcomes

// dripYAML is the two-step drip of enginetest.Onboarding.
const dripYAML = enginetest.Onboarding

func TestScheduledAPIFiltersAndTenantIsolation(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_api")
	f.putSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{delay: 1h}, {send: welcome}]\n", true)
	f.b.expectError("GET", "/api/scheduled", f.key, nil, 400, "VALIDATION_ERROR")
	f.b.expectError("GET", "/api/scheduled?status=bogus", f.key, nil, 400, "VALIDATION_ERROR")
	r := f.b.expect("POST", "/api/sequences/s/contacts", f.key, map[string]any{"contactId": f.contactID}, 201)
	if r.body["status"] != "active" || r.body["currentStep"] != float64(2) {
		t.Fatalf("%s", r.raw)
	}
	f.b.expect("POST", "/api/sequences/s/contacts", f.key, map[string]any{"contactId": f.contactID}, 200)
	f.b.expectError("POST", "/api/sequences/nope/contacts", f.key, map[string]any{"contactId": f.contactID}, 404, "SEQUENCE_NOT_FOUND")
	f.b.expectError("POST", "/api/sequences/s/contacts", f.key, map[string]any{"contactId": "cnt_nope"}, 404, "CONTACT_NOT_FOUND")
	if l := f.b.expect("GET", "/api/sequences/s/contacts", f.key, nil, 200).items(); len(l) != 1 || l[0].(map[string]any)["email"] != "ann@example.com" {
		t.Fatalf("%v", l)
	}
	p := f.scheduled("status=pending&limit=1")
	if len(p) != 1 {
		t.Fatalf("%v", p)
	}
	id, at := p[0]["scheduledSendId"].(string), p[0]["scheduledFor"].(string)
	f.b.expect("GET", "/api/scheduled/"+id+"?scheduledFor="+at, f.key, nil, 200)
	f.b.expectError("GET", "/api/scheduled/"+id, f.key, nil, 400, "VALIDATION_ERROR")
	f.b.expectError("GET", "/api/scheduled/"+id+"?scheduledFor=2020-01-01T00:00:00.000Z", f.key, nil, 404, "SCHEDULED_SEND_NOT_FOUND")
	if l := f.b.expect("GET", "/api/contacts/"+f.contactID+"/scheduled", f.key, nil, 200); len(l.items()) != 1 || l.body["hasMore"] != false {
		t.Fatalf("%s", l.raw)
	}
	if c := f.scheduled("status=sent"); len(c) != 0 {
		t.Fatalf("%v", c)
	}

	other := f.b.apiKey(f.b.tenant("org_seq_api_other"))
	f.b.expectError("GET", "/api/scheduled/"+id+"?scheduledFor="+at, other, nil, 404, "SCHEDULED_SEND_NOT_FOUND")
	if l := f.b.expect("GET", "/api/scheduled?contactId="+f.contactID, other, nil, 200).items(); len(l) != 0 {
		t.Fatalf("%v", l)
	}
	f.b.expectError("GET", "/api/sequences/s/contacts", other, nil, 404, "SEQUENCE_NOT_FOUND")
	f.b.expectError("GET", "/api/sequences/s/status", other, nil, 404, "SEQUENCE_NOT_FOUND")
	f.b.expectError("DELETE", "/api/sequences/s/contacts/"+f.contactID, other, nil, 404, "SEQUENCE_NOT_FOUND")
	f.b.expectError("POST", "/api/sequences/s/dry-run", other, map[string]any{"contactId": f.contactID}, 404, "SEQUENCE_NOT_FOUND")
}
