// Package enginetest sets the sequence engine up for a test: a tenant that
// may send to one contact, on services assembled as the binaries assemble
// them (apptest), a fake SendGrid behind them, and the engine's rows read
// back through the domain stores. The engine's own tests and the worker's
// tests of the queue around it share it, so both start from the same
// state; api tests that drive the engine over HTTP use its SQL helpers.
package enginetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/contacts"
	"tidings/internal/events"
	"tidings/internal/page"
	"tidings/internal/provider"
	"tidings/internal/provider/providertest"
	"tidings/internal/sequences/definition"
	"tidings/internal/sequences/engine"
	"tidings/internal/store"
	"tidings/internal/templates"
	"tidings/internal/testenv"
	"tidings/queries"
)

// Fixture is one tenant in sandbox with one contact, Ann
// (ann@example.com, firstName Ann, whitelisted), and two templates:
// welcome ("Hi Ann") and tips (its body shows the triggering event's
// plan).
type Fixture struct {
	T testing.TB
	// Svc are the services the engine runs on; Infra is what they were
	// built on, for a test that builds them again (with a queue).
	Svc   *app.Services
	Infra app.Infra
	// SG is the fake SendGrid every message goes to.
	SG        *providertest.SendGrid
	Tenant    string
	ContactID string
}

// Onboarding is a sequence of two steps on the event signed_up: welcome
// at once, then, a day later, tips (whose body shows the event's plan).
const Onboarding = `name: Onboarding
trigger: {event: signed_up}
steps:
  - send: welcome
  - delay: 1d
  - id: tips
    action: email
    template: tips
`

// Contact is the fixture contact's address.
const Contact = "ann@example.com"

// New builds the fixture for tenant on a database and Redis namespace of
// the test's own.
func New(t testing.TB, tenant string) *Fixture {
	t.Helper()
	ctx := context.Background()
	cfg := apptest.Config(t)
	sg := providertest.NewSendGrid(t)
	// The provider gets its own copy of the configuration: the services'
	// keeps its EMAIL_PROVIDER, so rules that read whether a real provider
	// is connected see the default.
	pcfg := *cfg
	sg.Configure(&pcfg)
	prov, err := provider.New(&pcfg)
	if err != nil {
		t.Fatal(err)
	}
	in := app.Infra{Config: cfg, DB: testenv.DB(t), Provider: prov, MJML: testenv.MJML(t)}
	in.Redis, in.RedisPrefix = testenv.Redis(t)
	f := &Fixture{T: t, Svc: apptest.Services(t, in), Infra: in, SG: sg, Tenant: tenant}
	if _, _, err := f.Svc.Tenants.Provision(ctx, tenant, "Org "+tenant); err != nil {
		t.Fatal(err)
	}
	c, err := f.Svc.Contacts.Create(ctx, tenant, contacts.Input{Email: Contact,
		Properties: contacts.Patch{Set: map[string]any{"firstName": "Ann"}}})
	if err != nil {
		t.Fatal(err)
	}
	f.ContactID = c.ID
	f.template("welcome", "Welcome", "Hi {{ contact.properties.firstName }}",
		`<mjml><mj-body><mj-section><mj-column><mj-text>Hello {{ name }}! <a href="https://example.com/docs?a=1&amp;b=2">Docs</a> <a href="{{ unsubscribeUrl }}">Unsubscribe</a></mj-text></mj-column></mj-section></mj-body></mjml>`)
	f.template("tips", "Tips", "Tips for {{ contact.email }}",
		`<mjml><mj-body><mj-section><mj-column><mj-text>Tip: {{ event.properties.plan }}</mj-text></mj-column></mj-section></mj-body></mjml>`)
	if _, err := f.Svc.Tenants.AddToWhitelist(ctx, tenant, Contact); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *Fixture) template(id, name, subject, content string) {
	f.T.Helper()
	if _, _, err := f.Svc.Templates.Put(context.Background(), f.Tenant, id,
		templates.Put{Name: &name, Subject: &subject, Content: &content}); err != nil {
		f.T.Fatal(err)
	}
}

// Exec runs SQL on the test's database, for states no domain call reaches
// in one step.
func (f *Fixture) Exec(sql string, args ...any) {
	f.T.Helper()
	if _, err := f.Svc.DB.Pool.Exec(context.Background(), sql, args...); err != nil {
		f.T.Fatal(err)
	}
}

// Tx runs fn in one transaction.
func (f *Fixture) Tx(fn func(q *store.Tx) error) {
	f.T.Helper()
	if err := f.Svc.DB.InTx(context.Background(), fn); err != nil {
		f.T.Fatal(err)
	}
}

// PutSequence stores sequence id of the fixture's tenant (see PutSequence).
func (f *Fixture) PutSequence(id, src string, enabled bool) {
	f.T.Helper()
	PutSequence(f.T, f.Svc.DB, f.Tenant, id, src, enabled)
}

// PutSequence stores a sequence as the definitions store would (its parse
// as definition, the version counting up), without the store's hooks: a
// new version that drops a step leaves that step's sends to the engine
// to find when they come due.
func PutSequence(t testing.TB, db *store.DB, tenant, id, src string, enabled bool) {
	t.Helper()
	def, err := definition.Parse([]byte(src), definition.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO sequences (tenant_id, id, name, content, definition, trigger_event, enabled, version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 1)
		ON CONFLICT (tenant_id, id) DO UPDATE SET definition = EXCLUDED.definition, content = EXCLUDED.content,
		version = sequences.version + 1`, tenant, id, id, src, j, def.Trigger.Event, enabled); err != nil {
		t.Fatal(err)
	}
}

// Event records the custom event name for the contact, as POST
// /api/events does (the contact updated, the engine's hook run).
func (f *Fixture) Event(name string, props map[string]any) *events.Recorded {
	f.T.Helper()
	raw := map[string]json.RawMessage{}
	for k, v := range props {
		j, err := json.Marshal(v)
		if err != nil {
			f.T.Fatal(err)
		}
		raw[k] = j
	}
	p, err := events.ValidateProperties(raw)
	if err != nil {
		f.T.Fatal(err)
	}
	rec, err := f.Svc.Events.RecordCustom(context.Background(), events.Custom{TenantID: f.Tenant, Email: Contact,
		Name: name, Properties: p, Timestamp: time.Now(), UpdateContact: true})
	if err != nil {
		f.T.Fatal(err)
	}
	return rec
}

// RunDue runs every due scheduled send of the fixture's tenant once.
func (f *Fixture) RunDue() []engine.Outcome {
	f.T.Helper()
	return RunDue(f.T, f.Svc.DB, f.Svc.Runner, f.Tenant)
}

// RunDue runs every due scheduled send of tenant once, oldest first, by
// hand (as the send's task would) and returns the outcomes.
func RunDue(t testing.TB, db *store.DB, r *engine.Runner, tenant string) []engine.Outcome {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT id FROM scheduled_sends
		WHERE tenant_id = $1 AND status IN ('pending','failed') AND scheduled_for <= now() ORDER BY scheduled_for`, tenant)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	var out []engine.Outcome
	for _, id := range ids {
		res, err := r.Run(ctx, tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.Outcome)
	}
	return out
}

// MakeDue moves the tenant's open sends to the past, as if their delay
// had passed.
func (f *Fixture) MakeDue() {
	f.Exec(`UPDATE scheduled_sends SET scheduled_for = date_trunc('milliseconds', now()) - interval '1 second'
		WHERE tenant_id = $1 AND status IN ('pending','failed')`, f.Tenant)
}

// Scheduled lists the tenant's scheduled sends in status, of cancelReason
// when it is not "", as GET /api/scheduled?status=&cancelReason= does.
func (f *Fixture) Scheduled(status, cancelReason string) []queries.ScheduledSend {
	f.T.Helper()
	filter := engine.ScheduledFilter{Status: &status}
	if cancelReason != "" {
		filter.CancelReason = &cancelReason
	}
	return f.scheduled(filter)
}

// Open lists the contact's open scheduled sends (pending, claimed, failed,
// dead), as GET /api/scheduled?contactId= does.
func (f *Fixture) Open() []queries.ScheduledSend {
	f.T.Helper()
	id := f.ContactID
	return f.scheduled(engine.ScheduledFilter{ContactID: &id})
}

func (f *Fixture) scheduled(filter engine.ScheduledFilter) []queries.ScheduledSend {
	f.T.Helper()
	if err := filter.Check(); err != nil {
		f.T.Fatal(err)
	}
	filter.Limit = page.DefaultLimit
	rows, _, err := f.Svc.Enrolments.Scheduled(context.Background(), f.Tenant, filter)
	if err != nil {
		f.T.Fatal(err)
	}
	return rows
}

// Enrolment is the contact's latest enrolment in sequence seqID; nil when
// it has none.
func (f *Fixture) Enrolment(seqID string) *queries.Enrolment {
	f.T.Helper()
	rows, err := f.Svc.Enrolments.OfContact(context.Background(), f.Tenant, f.ContactID)
	if err != nil {
		f.T.Fatal(err)
	}
	for _, e := range rows {
		if e.SequenceID == seqID {
			return &e
		}
	}
	return nil
}

// WantOutcomes fails t unless got is want, in order.
func WantOutcomes(t testing.TB, got []engine.Outcome, want ...engine.Outcome) {
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
