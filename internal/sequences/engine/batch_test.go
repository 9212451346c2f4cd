package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"tidings/internal/apperr"
	"tidings/internal/contacts"
	"tidings/internal/events"
	"tidings/internal/sequences/engine/enginetest"
)

// The group commit of POST /api/events records a batch of events with
// engine.HookMany in one transaction. Whatever the batch holds, it must
// leave the database as the same events recorded one at a time by
// RecordCustom (engine.Hook) would: the same enrolments, exits,
// scheduled sends, timeline entries, processed sequences and metrics, in
// each tenant apart.

const (
	batchOther = "org_batch_other" // a second tenant in the same database
	dripSeq    = "name: Drip\ntrigger: {event: signed_up}\nsteps: [{send: welcome}, {delay: 1d}, {send: tips}]\n"
	exitingSeq = "name: Exiting\ntrigger: {event: signed_up}\n" +
		"exit: {operator: or, conditions: [{type: event, name: purchase, operator: occurred}]}\n" +
		"steps: [{delay: 1h}, {send: welcome}]\n"
	onceSeq  = "name: Once\ntrigger: {event: upgrade}\nsteps: [{send: welcome}]\n"
	offSeq   = "name: Off\ntrigger: {event: signed_up}\nsteps: [{send: welcome}]\n"
	otherSeq = "name: Other\ntrigger: {event: b_only}\nsteps: [{send: welcome}]\n"
)

var batchEmails = []string{"bob@example.com", "cat@example.com", "dan@example.com", "eve@example.com"}

// batchFixture is the same state in a database of its own: the
// fixture's tenant with Ann and four more contacts, four sequences (one
// disabled), a second tenant holding an Ann of its own and a sequence of
// the same id on another event, and a history: Dan signed up (enrolled in
// drip and exiting), Eve upgraded (enrolled in once).
func batchFixture(t *testing.T, tenant string) *enginetest.Fixture {
	t.Helper()
	ctx := context.Background()
	f := enginetest.New(t, tenant)
	for _, e := range batchEmails {
		if _, err := f.Svc.Contacts.Create(ctx, tenant, contacts.Input{Email: e}); err != nil {
			t.Fatal(err)
		}
	}
	f.PutSequence("drip", dripSeq, true)
	f.PutSequence("exiting", exitingSeq, true)
	f.PutSequence("once", onceSeq, true)
	f.PutSequence("off", offSeq, false)
	if _, _, err := f.Svc.Tenants.Provision(ctx, batchOther, "Other"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Svc.Contacts.Create(ctx, batchOther, contacts.Input{Email: enginetest.Contact}); err != nil {
		t.Fatal(err)
	}
	enginetest.PutSequence(t, f.Svc.DB, batchOther, "drip", otherSeq, true)
	for _, ev := range []events.Custom{ev(tenant, "dan@example.com", "signed_up"), ev(tenant, "eve@example.com", "upgrade")} {
		if _, err := f.Svc.Events.RecordCustom(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func ev(tenant, email, name string) events.Custom {
	return events.Custom{TenantID: tenant, Email: email, Name: name, Properties: []byte(`{"plan":"pro"}`),
		Timestamp: time.Now(), UpdateContact: true}
}

// batchEvents is the batch: new enrolments, a disabled sequence, an exit
// by a later event, no re-enrolment, an event nothing reacts to, a
// contact's second event exiting what its first started, an unknown
// contact, and the other tenant's events of the same names.
func batchEvents(tenant string) []events.Custom {
	return []events.Custom{
		ev(tenant, enginetest.Contact, "signed_up"),
		ev(tenant, "bob@example.com", "signed_up"),
		ev(tenant, "dan@example.com", "purchase"),
		ev(tenant, "eve@example.com", "upgrade"),
		ev(tenant, "cat@example.com", "page_view"),
		ev(batchOther, enginetest.Contact, "signed_up"),
		later(ev(tenant, enginetest.Contact, "purchase")),
		ev(tenant, "ghost@example.com", "signed_up"),
		ev(batchOther, enginetest.Contact, "b_only"),
	}
}

// later dates in after the enrolments its batch makes: an exit condition
// counts events at or after the enrolment (rules.Env.Since), and the
// batch's enrolments are made at its transaction's time, after the
// handler stamped the events it holds (as concurrent requests would be).
func later(in events.Custom) events.Custom {
	in.Timestamp = in.Timestamp.Add(time.Minute)
	return in
}

// engineState is everything the engine wrote, ids replaced by what they
// stand for, one sorted line per row.
func engineState(t *testing.T, f *enginetest.Fixture) []string {
	t.Helper()
	rows, err := f.Svc.DB.Pool.Query(context.Background(), `
		SELECT 'enrolment ' || e.tenant_id || ' ' || c.email || ' ' || e.sequence_id || ' ' || e.status || ' ' ||
			coalesce(e.exit_reason, '-') || ' ' || e.current_step || ' by ' || coalesce(ev.name, '-')
		FROM enrolments e JOIN contacts c ON c.tenant_id = e.tenant_id AND c.id = e.contact_id
		LEFT JOIN events ev ON ev.tenant_id = e.tenant_id AND ev.id = e.trigger_event_id
		UNION ALL
		SELECT 'send ' || s.tenant_id || ' ' || c.email || ' ' || s.sequence_id || ' ' || s.step_id || ' ' || s.status || ' ' ||
			coalesce(s.cancel_reason, '-') || ' in ' || round(extract(epoch FROM s.scheduled_for - s.created_at) / 60)::text || ' min'
		FROM scheduled_sends s JOIN contacts c ON c.tenant_id = s.tenant_id AND c.id = s.contact_id
		UNION ALL
		SELECT 'timeline ' || te.tenant_id || ' ' || c.email || ' ' || te.type || ' ' ||
			coalesce(te.data->>'sequenceId', '-') || ' ' || coalesce(te.data->>'eventName', '-') || ' ' ||
			coalesce(te.data->>'stepId', '-') || ' ' || coalesce(te.data->>'exitReason', te.data->>'reason', '-')
		FROM timeline_entries te JOIN contacts c ON c.tenant_id = te.tenant_id AND c.id = te.contact_id
		UNION ALL
		SELECT 'event ' || e.tenant_id || ' ' || c.email || ' ' || e.name || ' processed ' || array_to_string(e.processed_sequences, ',')
			|| ' last ' || (c.last_event_at IS NOT NULL)::text
		FROM events e JOIN contacts c ON c.tenant_id = e.tenant_id AND c.id = e.contact_id
		UNION ALL
		SELECT 'metrics ' || tenant_id || ' ' || scope || ' ' || scope_id || ' scheduled ' || sum(scheduled)::text ||
			' cancelled ' || sum(cancelled)::text
		FROM metric_counts GROUP BY tenant_id, scope, scope_id
		UNION ALL
		SELECT 'outbox ' || tenant_id || ' ' || type FROM webhook_outbox`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Replace(line, f.Tenant, "T", -1))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func outcomes(recs []*events.Recorded, errs []error) []string {
	var out []string
	for i := range recs {
		switch {
		case errs[i] != nil:
			e, _ := apperr.As(errs[i])
			code := "?"
			if e != nil {
				code = e.Code
			}
			out = append(out, fmt.Sprintf("%d: %s", i, code))
		default:
			out = append(out, fmt.Sprintf("%d: processed %v triggered %v contact %s", i,
				recs[i].ProcessedSequences, recs[i].TriggeredSequences, recs[i].Contact.Email))
		}
	}
	return out
}

func TestBatchOfEventsAsOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const tenant = "org_batch"
	one := batchFixture(t, tenant)
	batch := batchFixture(t, tenant)
	// Webhook endpoints, so the facts' outbox rows are compared too.
	for _, f := range []*enginetest.Fixture{one, batch} {
		for _, tn := range []string{tenant, batchOther} {
			f.Exec(`INSERT INTO webhook_endpoints (tenant_id, id, url, secret) VALUES ($1, 'whk_' || $1, 'https://example.com/h', 'whsec_x')`, tn)
		}
	}

	var oneRecs []*events.Recorded
	var oneErrs []error
	for _, in := range batchEvents(tenant) {
		rec, err := one.Svc.Events.RecordCustom(ctx, in)
		oneRecs, oneErrs = append(oneRecs, rec), append(oneErrs, err)
	}
	recs, errs := batch.Svc.Events.RecordCustomMany(ctx, batchEvents(tenant))

	if a, b := outcomes(oneRecs, oneErrs), outcomes(recs, errs); !slices.Equal(a, b) {
		t.Fatalf("one by one:\n%s\nbatch:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	a, b := engineState(t, one), engineState(t, batch)
	if !slices.Equal(a, b) {
		t.Fatalf("one by one:\n%s\n\nbatch:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	// What the scenario means, so the comparison compares something.
	for _, want := range []string{
		"enrolment T ann@example.com drip active - step-1 by signed_up",
		"enrolment T ann@example.com exiting exited exit_condition step-2 by signed_up",
		"enrolment T bob@example.com exiting active - step-2 by signed_up",
		"enrolment T dan@example.com exiting exited exit_condition step-2 by signed_up",
		"enrolment T_other ann@example.com drip active - step-1 by b_only",
		"event T eve@example.com upgrade processed once last true",
	} {
		if !slices.Contains(b, want) {
			t.Errorf("missing %q in\n%s", want, strings.Join(b, "\n"))
		}
	}
	for _, line := range b {
		if strings.Contains(line, " off ") || (strings.Contains(line, "T_other") && strings.Contains(line, "signed_up processed drip")) {
			t.Errorf("unexpected %q", line)
		}
	}
	if errs[7] == nil || !apperr.IsCode(errs[7], "CONTACT_NOT_FOUND") {
		t.Fatalf("ghost: %v", errs[7])
	}
}
