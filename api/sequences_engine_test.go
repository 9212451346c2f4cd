package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"tidings/internal/app"
	"tidings/internal/config"
	"tidings/internal/contacts"
	"tidings/internal/sequences/definition"
	"tidings/internal/sequences/engine"
	"tidings/internal/store"
	"tidings/internal/tasks"
	"tidings/internal/testenv"
	"tidings/worker"
)

// seqFixture is a sendFixture with the sequence engine's runner, driven
// by hand (runDue) instead of through asynq, except in the end-to-end test.
type seqFixture struct {
	sendFixture
	runner *engine.Runner
}

func newSeqFixture(t *testing.T, org string) seqFixture {
	t.Helper()
	f := newSendFixture(t, org)
	f.b.expect("PUT", "/api/templates/tips", f.key, map[string]any{"name": "Tips", "subject": "Tips for {{ contact.email }}",
		"content": `<mjml><mj-body><mj-section><mj-column><mj-text>Tip: {{ event.properties.plan }}</mj-text></mj-column></mj-section></mj-body></mjml>`}, 201)
	return seqFixture{sendFixture: f, runner: f.b.svc.Runner}
}

// putSequence stores a sequence as the definitions API will (its parse
// as definition).
func (f seqFixture) putSequence(id, src string, enabled bool) {
	f.b.t.Helper()
	def, err := definition.Parse([]byte(src), definition.Options{})
	if err != nil {
		f.b.t.Fatal(err)
	}
	j, _ := json.Marshal(def)
	f.exec(`INSERT INTO sequences (tenant_id, id, name, content, definition, trigger_event, enabled, version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 1)
		ON CONFLICT (tenant_id, id) DO UPDATE SET definition = EXCLUDED.definition, content = EXCLUDED.content,
		version = sequences.version + 1`, f.org, id, id, src, j, def.Trigger.Event, enabled)
}

func (f seqFixture) event(name string, props map[string]any) resp {
	f.b.t.Helper()
	return f.b.expect("POST", "/api/events", f.key, map[string]any{"email": "ann@example.com", "name": name,
		"properties": props}, 201)
}

// runDue runs every due scheduled send of the test's tenant once.
func (f seqFixture) runDue() []engine.Outcome {
	f.b.t.Helper()
	rows, err := f.b.db.Pool.Query(context.Background(),
		`SELECT id FROM scheduled_sends WHERE tenant_id = $1 AND status IN ('pending','failed') AND scheduled_for <= now() ORDER BY scheduled_for`, f.org)
	if err != nil {
		f.b.t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	var out []engine.Outcome
	for _, id := range ids {
		res, err := f.runner.Run(context.Background(), f.org, id)
		if err != nil {
			f.b.t.Fatal(err)
		}
		out = append(out, res.Outcome)
	}
	return out
}

// makeDue moves the tenant's open sends to the past, as if their delay
// had passed.
func (f seqFixture) makeDue() {
	f.exec(`UPDATE scheduled_sends SET scheduled_for = date_trunc('milliseconds', now()) - interval '1 second'
		WHERE tenant_id = $1 AND status IN ('pending','failed')`, f.org)
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

func (f seqFixture) tx(fn func(q *store.Tx) error) {
	f.b.t.Helper()
	if err := f.b.db.InTx(context.Background(), fn); err != nil {
		f.b.t.Fatal(err)
	}
}

func wantOutcomes(t *testing.T, got []engine.Outcome, want ...engine.Outcome) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("outcomes %v, want %v", got, want)
		}
	}
}

const dripYAML = `name: Onboarding
trigger: {event: signed_up}
steps:
  - send: welcome
  - delay: 1d
  - id: tips
    action: email
    template: tips
`

func TestSequenceEnrolOnEventSendsStepsThenCompletes(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_drip")
	f.putSequence("onboarding", dripYAML, true)
	r := f.event("signed_up", map[string]any{"plan": "pro"})
	ev := r.body["event"].(map[string]any)
	if strings.Join(toStrings(ev["processedSequences"]), ",") != "onboarding" ||
		strings.Join(toStrings(r.body["triggeredSequences"]), ",") != "onboarding" {
		t.Fatalf("%s", r.raw)
	}
	pending := f.scheduled("contactId=" + f.contactID)
	if len(pending) != 1 || pending[0]["stepId"] != "step-1" || pending[0]["status"] != "pending" {
		t.Fatalf("%v", pending)
	}
	// A leading send is due now.
	at, _ := time.Parse(time.RFC3339Nano, pending[0]["scheduledFor"].(string))
	if time.Since(at) < -time.Second || time.Since(at) > 10*time.Second {
		t.Fatalf("leading send scheduled for %v", at)
	}
	wantOutcomes(t, f.runDue(), engine.OutcomeSent)
	if f.b.sg.Count() != 1 || f.b.sg.Messages()[0].Mail.Subject != "Hi Ann" {
		t.Fatalf("provider got %d", f.b.sg.Count())
	}
	// The delay counts from the send: the next step is a day away.
	next := f.scheduled("contactId=" + f.contactID)
	if len(next) != 1 || next[0]["stepId"] != "tips" {
		t.Fatalf("%v", next)
	}
	at, _ = time.Parse(time.RFC3339Nano, next[0]["scheduledFor"].(string))
	if d := time.Until(at); d < 23*time.Hour || d > 25*time.Hour {
		t.Fatalf("second step due in %v", d)
	}
	if e := f.enrolment("onboarding"); e["status"] != "active" || e["currentStep"] != float64(3) {
		t.Fatalf("%v", e)
	}
	wantOutcomes(t, f.runDue()) // not due yet
	f.makeDue()
	wantOutcomes(t, f.runDue(), engine.OutcomeSent)
	msgs := f.b.sg.Messages()
	if len(msgs) != 2 || !strings.Contains(msgs[1].Mail.Content[0].Value, "Tip: pro") {
		t.Fatalf("second message: %+v", msgs)
	}
	if e := f.enrolment("onboarding"); e["status"] != "completed" {
		t.Fatalf("%v", e)
	}
	st := f.b.expect("GET", "/api/sequences/onboarding/status", f.key, nil, 200)
	if st.body["version"] != "1" || st.body["contacts"].(map[string]any)["completed"] != float64(1) {
		t.Fatalf("%s", st.raw)
	}
	sent := f.scheduled("status=sent")
	if len(sent) != 2 || sent[0]["sendId"] == nil {
		t.Fatalf("%v", sent)
	}
	// The timeline tells the story.
	tl := f.b.expect("GET", "/api/contacts/"+f.contactID+"/timeline", f.key, nil, 200)
	for _, typ := range []string{"sequence_entered", "scheduled", "send", "sequence_completed"} {
		if !strings.Contains(string(tl.raw), `"type":"`+typ+`"`) {
			t.Fatalf("timeline lacks %s: %s", typ, tl.raw)
		}
	}
	// Without reenroll the contact never enters again.
	r = f.event("signed_up", nil)
	if len(toStrings(r.body["triggeredSequences"])) != 0 || len(toStrings(r.body["event"].(map[string]any)["processedSequences"])) != 1 {
		t.Fatalf("%s", r.raw)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestSequenceReenrolAfterEnd(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_reenrol")
	f.putSequence("again", "name: A\ntrigger: {event: ping, reenroll: true}\nsteps: [{send: welcome}]\n", true)
	f.event("ping", nil)
	// While enrolled, the contact is not enrolled twice.
	if r := f.event("ping", nil); len(toStrings(r.body["triggeredSequences"])) != 0 {
		t.Fatalf("%s", r.raw)
	}
	wantOutcomes(t, f.runDue(), engine.OutcomeSent)
	if r := f.event("ping", nil); len(toStrings(r.body["triggeredSequences"])) != 1 {
		t.Fatalf("%s", r.raw)
	}
	wantOutcomes(t, f.runDue(), engine.OutcomeSent)
	if f.b.sg.Count() != 2 {
		t.Fatalf("sent %d", f.b.sg.Count())
	}
}

func TestSequenceGateBlockedExitConditionAndSkip(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_gates")
	f.putSequence("gated", `name: G
trigger: {event: go}
gates: {operator: and, conditions: [{type: property, field: country, operator: equals, value: NL}]}
steps: [{send: welcome}]
`, true)
	f.putSequence("exits", `name: E
trigger: {event: go}
exit: {operator: or, conditions: [{type: event, name: purchase, operator: occurred}, {type: event, name: go, operator: occurred}]}
steps: [{delay: 1h}, {send: welcome}]
`, true)
	f.putSequence("skips", `name: S
trigger: {event: go}
steps:
  - {id: a, action: email, template: welcome, conditions: {operator: and, conditions: [{type: derived, field: totalOpens, operator: greaterThan, value: 0}]}}
  - {send: tips}
`, true)
	f.event("go", nil)
	// The enrolling event does not count toward the exit condition.
	if e := f.enrolment("exits"); e["status"] != "active" {
		t.Fatalf("%v", e)
	}
	dr := f.b.expect("POST", "/api/sequences/gated/dry-run", f.key, map[string]any{"contactId": f.contactID}, 200)
	if dr.body["outcome"] != "blocked" || !strings.Contains(string(dr.raw), `country equals \"NL\" (contact has \"(not set)\")`) {
		t.Fatalf("%s", dr.raw)
	}
	if dr := f.b.expect("POST", "/api/sequences/skips/dry-run", f.key, map[string]any{"contactId": f.contactID}, 200); dr.body["outcome"] != "would_skip" {
		t.Fatalf("%s", dr.raw)
	}
	out := f.runDue() // gated: blocked; skips: a skipped
	if len(out) != 2 {
		t.Fatalf("%v", out)
	}
	if e := f.enrolment("gated"); e["status"] != "exited" || e["exitReason"] != "gate_blocked" {
		t.Fatalf("%v", e)
	}
	if c := f.scheduled("status=cancelled&cancelReason=gate_blocked"); len(c) != 1 || c[0]["sequenceId"] != "gated" {
		t.Fatalf("%v", c)
	}
	wantOutcomes(t, f.runDue(), engine.OutcomeSent) // skips: tips
	if ms := f.b.sg.Messages(); len(ms) != 1 || !strings.HasPrefix(ms[0].Mail.Subject, "Tips") {
		t.Fatalf("%d messages", len(ms))
	}
	if dr := f.b.expect("POST", "/api/sequences/exits/dry-run", f.key, map[string]any{"contactId": f.contactID}, 200); dr.body["outcome"] != "would_send" || dr.body["templatePreview"].(map[string]any)["subject"] != "Hi Ann" || dr.body["inSequence"] != true {
		t.Fatalf("%s", dr.raw)
	}
	// A new event satisfies the exit condition.
	f.event("purchase", nil)
	if e := f.enrolment("exits"); e["status"] != "exited" || e["exitReason"] != "exit_condition" {
		t.Fatalf("%v", e)
	}
	if c := f.scheduled("status=cancelled&cancelReason=exit_condition"); len(c) != 1 {
		t.Fatalf("%v", c)
	}
	f.b.expectError("POST", "/api/sequences/skips/dry-run", f.key, map[string]any{"contactId": f.contactID, "stepId": "nope"}, 400, "VALIDATION_ERROR")
}

func TestSequenceDisableHoldsEnableReleases(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_hold")
	f.putSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.event("go", nil)
	setEnabled := func(on bool) []tasks.Timer {
		ctx := context.Background()
		var timers []tasks.Timer
		err := f.b.db.InTx(ctx, func(q *store.Tx) error {
			if _, err := f.b.db.Pool.Exec(ctx, `UPDATE sequences SET enabled = $2 WHERE tenant_id = $1 AND id = 's'`, f.org, on); err != nil {
				return err
			}
			err := engine.SetEnabled(ctx, q, f.org, "s", on)
			timers = q.Scheduled()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return timers
	}
	setEnabled(false)
	if e := f.enrolment("s"); e["status"] != "paused" {
		t.Fatalf("%v", e)
	}
	f.b.expectError("POST", "/api/sequences/s/contacts", f.key, map[string]any{"contactId": f.contactID}, 400, "VALIDATION_ERROR")
	wantOutcomes(t, f.runDue(), engine.OutcomeHeld)
	if p := f.scheduled("status=pending"); len(p) != 1 || p[0]["attempts"] != float64(0) {
		t.Fatalf("%v", p)
	}
	if timers := setEnabled(true); len(timers) != 1 {
		t.Fatalf("enable released %v", timers)
	}
	wantOutcomes(t, f.runDue(), engine.OutcomeSent)
}

func TestScheduledCancelledByOptOutDeleteAndSequenceDelete(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_cancel")
	f.putSequence("s", "name: S\ntrigger: {event: go, reenroll: true}\nsteps: [{delay: 1h}, {send: welcome}]\n", true)
	f.putSequence("d", "name: D\ntrigger: {event: go}\nsteps: [{delay: 1h}, {send: welcome}]\n", true)
	f.event("go", nil)
	if err := f.b.db.InTx(context.Background(), func(q *store.Tx) error {
		return engine.CancelSequence(context.Background(), q, f.org, "d")
	}); err != nil {
		t.Fatal(err)
	}
	if c := f.scheduled("status=cancelled&cancelReason=sequence_deleted"); len(c) != 1 || c[0]["sequenceId"] != "d" {
		t.Fatalf("%v", c)
	}
	f.b.expect("PATCH", "/api/contacts/"+f.contactID, f.key, map[string]any{"subscribed": false}, 200)
	if c := f.scheduled("status=cancelled&cancelReason=unsubscribed"); len(c) != 1 {
		t.Fatalf("%v", c)
	}
	if e := f.enrolment("s"); e["status"] != "exited" || e["exitReason"] != "unsubscribed" {
		t.Fatalf("%v", e)
	}
	// Suppression, after the contact subscribes again and re-enters.
	f.b.expect("PATCH", "/api/contacts/"+f.contactID, f.key, map[string]any{"subscribed": true}, 200)
	f.event("go", nil)
	f.tx(func(q *store.Tx) error {
		_, err := contacts.ApplyOptOut(context.Background(), q, contacts.OptOut{TenantID: f.org, ContactID: f.contactID, Suppress: true})
		return err
	})
	if c := f.scheduled("status=cancelled&cancelReason=suppressed"); len(c) != 1 {
		t.Fatalf("%v", c)
	}
	// Manual exit; then the contact's deletion cancels its open send
	// (contact_deleted), which stays listed, and a worker holding the
	// send's task claims nothing.
	f.exec(`UPDATE contacts SET suppressed = false WHERE tenant_id = $1`, f.org)
	f.event("go", nil)
	f.b.expect("DELETE", "/api/sequences/s/contacts/"+f.contactID, f.key, nil, 204)
	if c := f.scheduled("status=cancelled&cancelReason=manual"); len(c) != 1 {
		t.Fatalf("%v", c)
	}
	f.event("go", nil)
	f.makeDue()
	f.b.expect("DELETE", "/api/contacts/"+f.contactID, f.key, nil, 204)
	c := f.scheduled("status=cancelled&cancelReason=contact_deleted")
	if len(c) != 1 || c[0]["contactId"] != f.contactID {
		t.Fatalf("%v", c)
	}
	if len(f.scheduled("status=cancelled")) != 5 {
		t.Fatalf("%v", f.scheduled("status=cancelled"))
	}
	if res, err := f.runner.Run(context.Background(), f.org, c[0]["scheduledSendId"].(string)); err != nil || res.Outcome != engine.OutcomeNone {
		t.Fatal(res, err)
	}
	f.b.expectError("GET", "/api/contacts/"+f.contactID+"/scheduled", f.key, nil, 404, "CONTACT_NOT_FOUND")
}

func TestScheduledStepRemovedRetryDeadAndReclaim(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_retry")
	f.runner.MaxAttempts = 2
	f.putSequence("s", "name: S\ntrigger: {event: go, reenroll: true}\nsteps: [{send: welcome}, {id: b, action: email, template: tips}]\n", true)
	f.event("go", nil)
	f.b.sg.FailNext(1, 503, 0)
	wantOutcomes(t, f.runDue(), engine.OutcomeFailed)
	p := f.scheduled("status=failed")
	if len(p) != 1 || p[0]["attempts"] != float64(1) || p[0]["lastError"] == nil {
		t.Fatalf("%v", p)
	}
	at, _ := time.Parse(time.RFC3339Nano, p[0]["scheduledFor"].(string))
	if d := time.Until(at); d < 5*time.Second || d > 11*time.Second {
		t.Fatalf("retry in %v, want about 10s", d)
	}
	f.makeDue()
	f.b.sg.FailNext(1, 503, 0)
	wantOutcomes(t, f.runDue(), engine.OutcomeDead)
	if e := f.enrolment("s"); e["status"] != "exited" || e["exitReason"] != "send_failed" {
		t.Fatalf("%v", e)
	}

	// A claim whose worker died is taken back by the sweep and sent once;
	// a duplicate task claims nothing.
	f.event("go", nil) // re-enters: the dead send ended the last enrolment
	f.exec(`UPDATE scheduled_sends SET status = 'claimed', claimed_at = now() - interval '10 minutes', attempts = 1
		WHERE tenant_id = $1 AND status = 'pending'`, f.org)
	if _, err := f.b.svc.Sweeper.Sweep(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	p = f.scheduled("status=failed")
	if len(p) != 1 {
		t.Fatalf("%v", p)
	}
	id := p[0]["scheduledSendId"].(string)
	before := f.b.sg.Count()
	res, err := f.runner.Run(context.Background(), f.org, id)
	if err != nil || res.Outcome != engine.OutcomeSent {
		t.Fatal(res, err)
	}
	if res, _ := f.runner.Run(context.Background(), f.org, id); res.Outcome != engine.OutcomeNone {
		t.Fatal(res)
	}
	// The worker that sent it died before marking it: the retry finds the
	// send record and does not send again.
	f.exec(`UPDATE scheduled_sends SET status = 'failed', send_id = NULL WHERE id = $1`, id)
	if res, _ := f.runner.Run(context.Background(), f.org, id); res.Outcome != engine.OutcomeSent {
		t.Fatal(res)
	}
	if f.b.sg.Count() != before+1 {
		t.Fatalf("sent %d times", f.b.sg.Count()-before)
	}
	// The next step was scheduled once; remove it from the sequence.
	f.putSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	wantOutcomes(t, f.runDue(), engine.OutcomeCancelled)
	if c := f.scheduled("status=cancelled&cancelReason=step_removed"); len(c) != 1 {
		t.Fatalf("%v", c)
	}
}

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

// TestSequenceEndToEndThroughAsynq runs a two-step drip with a 2 s delay
// through the real asynq server; Redis is flushed between the steps, and
// the sweep re-feeds the queue from the rows.
func TestSequenceEndToEndThroughAsynq(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_e2e")
	url, rdb := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	client := asynq.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	b := f.b
	// The same service with a queue: POST /api/events enqueues after commit.
	qb := *b
	tc := tasks.NewClient(client, asynq.NewInspector(opt), testLog())
	var deps *app.Services
	qb.app, deps = newAppServices(t, app.Infra{Config: b.cfg, DB: b.db, Redis: b.rdb, RedisPrefix: b.prefix,
		Provider: b.provider, Tasks: tc}, Deps{})
	srv := worker.NewServer(opt, testLog(), 4)
	if err := srv.Start(worker.NewMux(deps)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	f.putSequence("drip", "name: D\ntrigger: {event: go}\nsteps: [{send: welcome}, {delay: 2s}, {send: tips}]\n", true)
	start := time.Now()
	qb.expect("POST", "/api/events", f.key, map[string]any{"email": "ann@example.com", "name": "go"}, 201)
	waitFor(t, 5*time.Second, func() bool { return b.sg.Count() == 1 })
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("first send took %v", d)
	}
	// Redis loses every task: the second step's timer is gone.
	rdb.FlushDB(context.Background())
	sched := worker.NewScheduler(client, worker.PeriodicTasks(), testLog())
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sched.Run(sctx) }()
	t.Cleanup(func() { stop(); <-done })
	waitFor(t, 20*time.Second, func() bool { return b.sg.Count() == 2 })
	time.Sleep(500 * time.Millisecond)
	if b.sg.Count() != 2 {
		t.Fatalf("sent %d", b.sg.Count())
	}
	if e := f.enrolment("drip"); e["status"] != "completed" {
		t.Fatalf("%v", e)
	}
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
	}
}

// The definitions API drives the engine: PATCH enabled pauses and resumes
// enrolments, DELETE cancels pending sends (sequence_deleted).
func TestSequenceAPIDrivesEngine(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_api")
	b := f.b
	r := b.do("PUT", "/api/sequences/drip", f.key, map[string]any{
		"content": "name: Drip\ntrigger: {event: go}\nsteps:\n  - delay: 1d\n  - send: welcome\n"})
	if r.status != 201 {
		t.Fatalf("PUT: %d %s", r.status, r.raw)
	}
	ev := f.event("go", nil)
	if got := toStrings(ev.body["triggeredSequences"]); len(got) != 1 || got[0] != "drip" {
		t.Fatalf("triggered %v", ev.body["triggeredSequences"])
	}
	b.expect("PATCH", "/api/sequences/drip", f.key, map[string]any{"enabled": false}, 200)
	if e := f.enrolment("drip"); e["status"] != "paused" {
		t.Fatalf("after disable: %v", e)
	}
	b.expect("PATCH", "/api/sequences/drip", f.key, map[string]any{"enabled": true}, 200)
	if e := f.enrolment("drip"); e["status"] != "active" {
		t.Fatalf("after enable: %v", e)
	}
	b.expect("DELETE", "/api/sequences/drip", f.key, nil, 204)
	c := f.scheduled("status=cancelled")
	if len(c) != 1 || c[0]["cancelReason"] != "sequence_deleted" {
		t.Fatalf("cancelled after delete: %v", c)
	}
	if p := f.scheduled("status=pending"); len(p) != 0 {
		t.Fatalf("pending after delete: %v", p)
	}
}

// The dry run reports would_exit when the exit condition holds for the
// contact, both in the sequence (an event after the enrolment) and outside
// it (a property, evaluated as if enrolled now), and writes nothing.
func TestSequenceDryRunWouldExit(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_dryexit")
	f.putSequence("byprop", `name: P
trigger: {event: go}
exit: {operator: and, conditions: [{type: property, field: firstName, operator: equals, value: Ann}]}
steps: [{send: welcome}]
`, true)
	f.putSequence("byevent", `name: V
trigger: {event: start}
exit: {operator: or, conditions: [{type: event, name: purchase, operator: occurred}]}
steps: [{delay: 1h}, {send: welcome}]
`, true)
	dr := f.b.expect("POST", "/api/sequences/byprop/dry-run", f.key, map[string]any{"contactId": f.contactID}, 200)
	if dr.body["outcome"] != "would_exit" || dr.body["inSequence"] != false {
		t.Fatalf("%s", dr.raw)
	}
	var exitStage map[string]any
	for _, s := range dr.body["decisionPath"].([]any) {
		if m := s.(map[string]any); m["stage"] == "exit_conditions" {
			exitStage = m
		}
	}
	if exitStage == nil || exitStage["passed"] != false {
		t.Fatalf("decision path: %s", dr.raw)
	}

	f.event("start", nil)
	if dr := f.b.expect("POST", "/api/sequences/byevent/dry-run", f.key, map[string]any{"contactId": f.contactID}, 200); dr.body["outcome"] != "would_send" || dr.body["inSequence"] != true {
		t.Fatalf("%s", dr.raw)
	}
	// purchase exits the enrolment on its own; to see the dry run's view,
	// record it without the hook (as if before the exit check ran).
	f.exec(`INSERT INTO events (tenant_id, id, contact_id, name, properties, occurred_at)
		VALUES ($1, 'evt_dry_purchase', $2, 'purchase', '{}', now())`, f.org, f.contactID)
	if dr := f.b.expect("POST", "/api/sequences/byevent/dry-run", f.key, map[string]any{"contactId": f.contactID}, 200); dr.body["outcome"] != "would_exit" || dr.body["inSequence"] != true {
		t.Fatalf("%s", dr.raw)
	}
	// A dry run writes nothing: the enrolment is still active, its send pending.
	if e := f.enrolment("byevent"); e["status"] != "active" {
		t.Fatalf("%v", e)
	}
	if p := f.scheduled("status=pending"); len(p) != 1 {
		t.Fatalf("%v", p)
	}
}

// A task that arrives before its row is due (asynq keeps process times in
// whole seconds and releases a task up to a second early) waits for the
// row instead of claiming nothing and leaving it to the sweep.
func TestScheduledEarlyTaskWaitsForItsRow(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_early")
	f.putSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.event("go", nil)
	f.exec(`UPDATE scheduled_sends SET scheduled_for = date_trunc('milliseconds', now() + interval '700 milliseconds')
		WHERE tenant_id = $1`, f.org)
	id := f.scheduled("status=pending")[0]["scheduledSendId"].(string)
	res, err := f.runner.Run(context.Background(), f.org, id)
	if err != nil || res.Outcome != engine.OutcomeSent {
		t.Fatal(res, err)
	}
	// Due later than the wait: left to its own task or the sweep.
	f.event("go", nil) // no reenroll: enrols nobody
	f.putSequence("later", "name: L\ntrigger: {event: go2}\nsteps: [{send: welcome}]\n", true)
	f.event("go2", nil)
	f.exec(`UPDATE scheduled_sends SET scheduled_for = now() + interval '1 hour' WHERE tenant_id = $1 AND status = 'pending'`, f.org)
	id = f.scheduled("status=pending")[0]["scheduledSendId"].(string)
	if res, err := f.runner.Run(context.Background(), f.org, id); err != nil || res.Outcome != engine.OutcomeNone {
		t.Fatal(res, err)
	}
	if f.b.sg.Count() != 1 {
		t.Fatalf("sent %d", f.b.sg.Count())
	}
}

// A worker killed mid-dispatch leaves its claim and a dispatch task that
// asynq archives when the lease runs out, keeping its task id. The sweep
// takes the claim back and frees the id, so the fan-out is queued again
// and sends the row once.
func TestScheduledSweepFreesArchivedTaskID(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_archived")
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	client, inspector := asynq.NewClient(opt), asynq.NewInspector(opt)
	t.Cleanup(func() { _ = client.Close(); _ = inspector.Close() })
	f.putSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.event("go", nil)
	tc := tasks.NewClient(client, inspector, testLog())
	if n, err := tc.FanOut(context.Background(), 1); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if err := inspector.ArchiveTask(tasks.QueueCritical, "dispatch:fan:0"); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE scheduled_sends SET status = 'claimed', claimed_at = now() - interval '10 minutes', attempts = 1
		WHERE tenant_id = $1`, f.org)

	sweeper := &engine.Sweeper{DB: f.b.db, Tasks: tc, MaxAttempts: f.b.cfg.SendMaxAttempts, FanOut: 1, Log: testLog()}
	if res, err := sweeper.Sweep(context.Background(), time.Now()); err != nil || res.Reclaimed != 1 || !res.Due || res.Queued != 1 {
		t.Fatal(res, err)
	}
	info, err := inspector.GetTaskInfo(tasks.QueueCritical, "dispatch:fan:0")
	if err != nil || info.State == asynq.TaskStateArchived {
		t.Fatalf("task %v, %v: want queued again", info, err)
	}
	// A sweep while the new task waits leaves it alone.
	if res, err := sweeper.Sweep(context.Background(), time.Now()); err != nil || res.Queued != 0 {
		t.Fatal(res, err)
	}
	if info2, err := inspector.GetTaskInfo(tasks.QueueCritical, "dispatch:fan:0"); err != nil || info2.State != info.State {
		t.Fatalf("task %v, %v", info2, err)
	}
	wantOutcomes(t, f.runDue(), engine.OutcomeSent)
	if f.b.sg.Count() != 1 {
		t.Fatalf("sent %d", f.b.sg.Count())
	}
}

// An unsubscribe that cancels a send whose message is already on its way
// loses to the message: the row ends sent, the contact's enrolment ended,
// and the metrics count it sent, not cancelled.
func TestScheduledCancelledInFlightEndsSentAndUncounted(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_inflight")
	f.putSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.event("go", nil)
	id := f.scheduled("status=pending")[0]["scheduledSendId"].(string)
	f.b.sg.SetLatency(time.Second)
	done := make(chan engine.Outcome)
	go func() {
		res, err := f.runner.Run(context.Background(), f.org, id)
		if err != nil {
			t.Error(err)
		}
		done <- res.Outcome
	}()
	waitFor(t, 5*time.Second, func() bool { return len(f.scheduled("status=claimed")) == 1 })
	f.b.expect("PATCH", "/api/contacts/"+f.contactID, f.key, map[string]any{"subscribed": false}, 200)
	if c := f.scheduled("status=cancelled&cancelReason=unsubscribed"); len(c) != 1 {
		t.Fatalf("%v", c)
	}
	if out := <-done; out != engine.OutcomeSent {
		t.Fatalf("outcome %s", out)
	}
	if s := f.scheduled("status=sent"); len(s) != 1 {
		t.Fatalf("%v", s)
	}
	m := f.b.expect("GET", "/api/metrics", f.key, nil, 200).body["metrics"].(map[string]any)
	if m["sent"] != float64(1) || m["cancelled"] != float64(0) || m["scheduled"] != float64(1) {
		t.Fatalf("metrics %v", m)
	}
}

// After Redis loses a backlog, one sweep queues the dispatch fan-out, and
// the fan-out drains the whole backlog in batches; a sweep while the
// fan-out waits in the queue queues nothing more.
func TestScheduledSweepFeedsALostBacklogInOneSweep(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_backlog")
	url, _ := testenv.RedisDB(t)
	opt, err := config.AsynqRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	client, inspector := asynq.NewClient(opt), asynq.NewInspector(opt)
	t.Cleanup(func() { _ = client.Close(); _ = inspector.Close() })
	f.putSequence("s", "name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	const n = 250
	f.exec(`INSERT INTO contacts (tenant_id, id, email) SELECT $1, 'cnt_' || g, 'c' || g || '@example.com'
		FROM generate_series(1, $2::int) g`, f.org, n)
	f.domain("acme.example", "verified", true)
	f.exec(`UPDATE tenants SET sending_status = 'enabled', default_from_address = 'a@acme.example' WHERE id = $1`, f.org)
	f.exec(`INSERT INTO enrolments (tenant_id, id, sequence_id, contact_id, current_step, current_step_index)
		SELECT $1, 'enr_' || g, 's', 'cnt_' || g, 'step-1', 1 FROM generate_series(1, $2::int) g`, f.org, n)
	f.exec(`INSERT INTO scheduled_sends (tenant_id, id, contact_id, enrolment_id, sequence_id, sequence_version, step_id,
		template_id, scheduled_for)
		SELECT $1, 'sch_' || g, 'cnt_' || g, 'enr_' || g, 's', 1, 'step-1', 'welcome', now() - interval '1 minute' + g * interval '1 millisecond'
		FROM generate_series(1, $2::int) g`, f.org, n)
	tc := tasks.NewClient(client, inspector, testLog())
	sweeper := &engine.Sweeper{DB: f.b.db, Tasks: tc, MaxAttempts: f.b.cfg.SendMaxAttempts, FanOut: 4, Log: testLog()}
	if got, err := sweeper.Sweep(context.Background(), time.Now()); err != nil || !got.Due || got.Queued != 4 {
		t.Fatalf("first sweep: %+v, %v; want the fan-out of 4 queued", got, err)
	}
	if q, err := inspector.GetQueueInfo(tasks.QueueCritical); err != nil || q.Pending+q.Scheduled != 4 {
		t.Fatalf("queue %+v, %v", q, err)
	}
	if got, err := sweeper.Sweep(context.Background(), time.Now()); err != nil || got.Queued != 0 {
		t.Fatalf("second sweep: %+v, %v; want nothing more queued", got, err)
	}
	// One dispatch task drains it all, batch after batch.
	if err := worker.HandleDispatch(f.b.svc).ProcessTask(context.Background(), asynq.NewTask(tasks.TypeDispatch, nil)); err != nil {
		t.Fatal(err)
	}
	if left := f.scheduled("status=pending"); len(left) != 0 {
		t.Fatalf("%d left pending", len(left))
	}
	if f.b.sg.Count() != n {
		t.Fatalf("sent %d of %d", f.b.sg.Count(), n)
	}
}

// One event triggering several sequences enrols in each the policy lets
// in, all in one go: a leading send (due now), a send after a delay, a
// sequence without email steps (completed at once); a sequence the contact
// is already in, and one it was in without reenroll, are processed but not
// entered again.
func TestSequenceEventEnrolsInManyAtOnce(t *testing.T) {
	t.Parallel()
	f := newSeqFixture(t, "org_seq_many")
	f.putSequence("a-now", "name: A\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.putSequence("b-later", "name: B\ntrigger: {event: go}\nsteps: [{delay: 1h}, {send: tips}]\n", true)
	f.putSequence("c-none", "name: C\ntrigger: {event: go}\nsteps: [{delay: 1h}]\n", true)
	f.putSequence("d-open", "name: D\ntrigger: {event: go, reenroll: true}\nsteps: [{delay: 1h}, {send: welcome}]\n", true)
	f.putSequence("e-once", "name: E\ntrigger: {event: go}\nsteps: [{send: welcome}]\n", true)
	f.b.expect("POST", "/api/sequences/d-open/contacts", f.key, map[string]any{"contactId": f.contactID}, 201)
	f.b.expect("POST", "/api/sequences/e-once/contacts", f.key, map[string]any{"contactId": f.contactID}, 201)
	f.b.expect("DELETE", "/api/sequences/e-once/contacts/"+f.contactID, f.key, nil, 204)

	r := f.event("go", map[string]any{"plan": "pro"})
	if got := strings.Join(toStrings(r.body["triggeredSequences"]), ","); got != "a-now,b-later,c-none" {
		t.Fatalf("triggered %s", got)
	}
	if got := strings.Join(toStrings(r.body["event"].(map[string]any)["processedSequences"]), ","); got != "a-now,b-later,c-none,d-open,e-once" {
		t.Fatalf("processed %s", got)
	}
	for seq, want := range map[string]string{"a-now": "active", "b-later": "active", "c-none": "completed", "d-open": "active"} {
		if e := f.enrolment(seq); e == nil || e["status"] != want {
			t.Errorf("%s: %v, want %s", seq, e, want)
		}
	}
	pending := f.scheduled("status=pending")
	bySeq := map[string]map[string]any{}
	for _, p := range pending {
		bySeq[p["sequenceId"].(string)] = p
	}
	if len(pending) != 3 || bySeq["a-now"] == nil || bySeq["b-later"] == nil || bySeq["d-open"] == nil {
		t.Fatalf("pending %v", pending)
	}
	at, _ := time.Parse(time.RFC3339Nano, bySeq["b-later"]["scheduledFor"].(string))
	if d := time.Until(at); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("b-later due in %v", d)
	}
	// Each scheduled send has its timeline entry naming its scheduledFor
	// as the API shows it; each entered sequence its sequence_entered.
	tl := f.b.expect("GET", "/api/contacts/"+f.contactID+"/timeline?limit=100", f.key, nil, 200)
	for _, seq := range []string{"a-now", "b-later"} {
		want := `"scheduledFor":"` + bySeq[seq]["scheduledFor"].(string) + `"`
		if !strings.Contains(string(tl.raw), want) {
			t.Errorf("timeline lacks %s for %s: %s", want, seq, tl.raw)
		}
	}
	if n := strings.Count(string(tl.raw), `"sequence_entered"`); n != 5 { // 3 now, d-open and e-once by hand
		t.Errorf("%d sequence_entered entries: %s", n, tl.raw)
	}
	m := f.b.expect("GET", "/api/metrics", f.key, nil, 200).body["metrics"].(map[string]any)
	if m["scheduled"] != float64(4) { // d-open and e-once by hand, a-now and b-later by the event
		t.Errorf("scheduled %v", m["scheduled"])
	}
	wantOutcomes(t, f.runDue(), engine.OutcomeSent)
}
