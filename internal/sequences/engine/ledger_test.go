package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"tidings/internal/app"
	"tidings/internal/app/apptest"
	"tidings/internal/config"
	"tidings/internal/events"
	"tidings/internal/provider"
	"tidings/internal/provider/providertest"
	"tidings/internal/sequences"
	"tidings/internal/store"
	"tidings/internal/templates"
	"tidings/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// ledgerFixture is one tenant that may send (enabled, a verified domain),
// one contact, one template, and a sequence "s" whose first step sends it,
// on services whose provider runs onSend after the fake SendGrid answered.
type ledgerFixture struct {
	t   *testing.T
	svc *app.Services
	sg  *providertest.SendGrid
	// onSend runs after each message the provider accepted; beforeSend
	// before the provider has it.
	onSend, beforeSend atomic.Pointer[func(provider.Message)]
}

const ledgerTenant = "ten_ledger"

// hookedProvider is the real sendgrid provider against the fake, with a
// hook after the answer: a fault that strikes once the message has left.
type hookedProvider struct {
	provider.Provider
	f *ledgerFixture
}

func (p hookedProvider) Send(ctx context.Context, m provider.Message) (string, error) {
	if fn := p.f.beforeSend.Load(); fn != nil {
		(*fn)(m)
	}
	id, err := p.Provider.Send(ctx, m)
	if fn := p.f.onSend.Load(); fn != nil {
		(*fn)(m)
	}
	return id, err
}

// newLedgerFixture builds the fixture; opts change the configuration
// before the services are built.
func newLedgerFixture(t *testing.T, opts ...func(*config.Config)) *ledgerFixture {
	t.Helper()
	return newLedgerFixtureOn(t, nil, opts...)
}

// newLedgerFixtureOn is newLedgerFixture on db (nil: a database of its own).
func newLedgerFixtureOn(t *testing.T, db *store.DB, opts ...func(*config.Config)) *ledgerFixture {
	t.Helper()
	ctx := context.Background()
	f := &ledgerFixture{t: t, sg: providertest.NewSendGrid(t)}
	cfg := apptest.Config(t)
	f.sg.Configure(cfg)
	for _, o := range opts {
		o(cfg)
	}
	prov, err := provider.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.svc = apptest.Services(t, app.Infra{Config: cfg, DB: db, Provider: hookedProvider{prov, f}, MJML: testenv.MJML(t)})
	f.exec(`INSERT INTO tenants (id, name, sending_status, default_from_address) VALUES ($1, 'L', 'enabled', 'L <l@ledger.example>')`, ledgerTenant)
	f.exec(`INSERT INTO domains (tenant_id, domain, status, sending_enabled, verification_token, dkim_tokens)
		VALUES ($1, 'ledger.example', 'verified', true, 't', '{a,b,c}')`, ledgerTenant)
	f.exec(`INSERT INTO contacts (tenant_id, id, email) VALUES ($1, 'cnt_1', 'ann@example.com')`, ledgerTenant)
	name, subject, content := "W", "Welcome", `<mjml><mj-body><mj-section><mj-column><mj-text>Hi</mj-text></mj-column></mj-section></mj-body></mjml>`
	if _, _, err := f.svc.Templates.Put(ctx, ledgerTenant, "welcome", templates.Put{Name: &name, Subject: &subject, Content: &content}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Sequences.Put(ctx, ledgerTenant, "s", sequences.Put{
		Content: []byte("name: S\ntrigger: {event: go}\nsteps: [{send: welcome}, {delay: 1d}, {send: welcome}]\n")}); err != nil {
		t.Fatal(err)
	}
	return f
}

// failWritesOnceSent makes the writes that triggers name fail from the
// moment the provider has accepted a message: the worker "dies" then, and
// nothing it writes after that commits. Each of triggers is a CREATE
// TRIGGER clause up to its function ("BEFORE UPDATE ON scheduled_sends FOR
// EACH ROW"). heal lets writes through again and stops arming.
func (f *ledgerFixture) failWritesOnceSent(triggers ...string) (heal func()) {
	f.t.Helper()
	f.exec(`CREATE TABLE fault (on_ boolean)`)
	f.exec(`CREATE FUNCTION fault() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF EXISTS (SELECT 1 FROM fault) THEN RAISE EXCEPTION 'injected fault'; END IF; RETURN NEW; END $$`)
	for i, tr := range triggers {
		f.exec(fmt.Sprintf(`CREATE TRIGGER fault_%d %s EXECUTE FUNCTION fault()`, i, tr))
	}
	arm := func(provider.Message) { f.exec(`INSERT INTO fault VALUES (true)`) }
	f.onSend.Store(&arm)
	return func() {
		f.onSend.Store(nil)
		f.exec(`DELETE FROM fault`)
	}
}

func (f *ledgerFixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.svc.DB.Pool.Exec(context.Background(), sql, args...); err != nil {
		f.t.Fatal(err)
	}
}

func (f *ledgerFixture) scalar(sql string, args ...any) any {
	f.t.Helper()
	var v any
	if err := f.svc.DB.Pool.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		f.t.Fatal(err)
	}
	return v
}

// enrol sends the trigger event and returns the leading step's scheduled
// send (due now).
func (f *ledgerFixture) enrol() string {
	f.t.Helper()
	if _, err := f.svc.Events.RecordCustom(context.Background(), events.Custom{TenantID: ledgerTenant,
		Email: "ann@example.com", Name: "go", Properties: []byte(`{}`), Timestamp: time.Now()}); err != nil {
		f.t.Fatal(err)
	}
	return f.scalar(`SELECT id FROM scheduled_sends WHERE tenant_id = $1 AND status = 'pending' ORDER BY scheduled_for LIMIT 1`,
		ledgerTenant).(string)
}

// A database that fails every write to sends right after the provider
// accepted a step (issue 20, defect 2): the attempt fails, the claim goes
// stale, the sweep takes it back, and the next claim finds the step's
// record: it is marked sent (in doubt) and never goes out again.
func TestLedgerStepNotSentTwiceAfterADatabaseFailure(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	id := f.enrol()
	heal := f.failWritesOnceSent(`BEFORE INSERT OR UPDATE ON sends FOR EACH ROW`)

	if res, err := f.svc.Runner.Run(ctx, ledgerTenant, id); err == nil && res.Outcome == "sent" {
		t.Fatalf("the attempt succeeded through the fault: %+v", res)
	}
	heal()
	if n := f.sg.Count(); n != 1 {
		t.Fatalf("provider took %d messages, want 1", n)
	}
	// The worker is gone; its claim goes stale and the sweep takes it back.
	f.exec(`UPDATE scheduled_sends SET claimed_at = now() - interval '1 hour' WHERE tenant_id = $1 AND id = $2 AND status = 'claimed'`,
		ledgerTenant, id)
	if _, err := f.svc.Sweeper.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.Runner.Run(ctx, ledgerTenant, id)
	if err != nil || res.Outcome != "sent" {
		t.Fatalf("after the fault: %+v, %v; want sent", res, err)
	}
	if n := f.sg.Count(); n != 1 {
		t.Fatalf("the step went out %d times", n)
	}
	if st := f.scalar(`SELECT status FROM scheduled_sends WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id); st != "sent" {
		t.Fatalf("scheduled send %v", st)
	}
	// Its record is settled: one email.sent, counted once; the next step is
	// scheduled.
	if n := f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1 AND NOT sending`, ledgerTenant); n != int64(1) {
		t.Fatalf("%v settled records", n)
	}
	if n := f.scalar(`SELECT count(*) FROM events WHERE tenant_id = $1 AND name = 'email.sent'`, ledgerTenant); n != int64(1) {
		t.Fatalf("%v email.sent events", n)
	}
	if n := f.scalar(`SELECT count(*) FROM scheduled_sends WHERE tenant_id = $1 AND status = 'pending'`, ledgerTenant); n != int64(1) {
		t.Fatalf("next step: %v pending", n)
	}
}

// A reclaimed claim on its last attempt whose message has its record is
// not dead (issue 20, defect 6): the record says the message may have
// left, so the step is marked sent and the enrolment moves on.
func TestLedgerReclaimOnLastAttemptWithARecordIsNotDead(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	id := f.enrol()
	// An attempt whose worker died after writing the record, on the last
	// attempt.
	f.exec(`UPDATE scheduled_sends SET status = 'claimed', claimed_at = now() - interval '1 hour', attempts = $3
		WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id, f.svc.Config.SendMaxAttempts)
	f.exec(`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version, sequence_id, step_id,
		scheduled_send_id, from_address, to_address, subject, sent_at, sending, in_doubt)
		VALUES ($1, 'snd_died', '', 'cnt_1', 'welcome', 1, 's', 'step-1', $2, 'l@ledger.example', 'ann@example.com', 'Welcome', now(), true, true)`,
		ledgerTenant, id)
	res, err := f.svc.Sweeper.Sweep(ctx, time.Now())
	if err != nil || res.Dead != 0 {
		t.Fatalf("sweep %+v, %v: a claim with a record must not be dead", res, err)
	}
	run, err := f.svc.Runner.Run(ctx, ledgerTenant, id)
	if err != nil || run.Outcome != "sent" {
		t.Fatalf("%+v, %v", run, err)
	}
	if f.sg.Count() != 0 {
		t.Fatal("the step was sent again")
	}
	if d := f.scalar(`SELECT in_doubt AND NOT sending FROM sends WHERE tenant_id = $1 AND id = 'snd_died'`, ledgerTenant); d != true {
		t.Fatal("the record was not settled in doubt")
	}
	if st := f.scalar(`SELECT status FROM enrolments WHERE tenant_id = $1`, ledgerTenant); st != "active" {
		t.Fatalf("enrolment %v", st)
	}
}

// A send going dead while an unsubscribe cancels the contact's sends
// (issue 20, defect 7): both take the enrolment before its scheduled send,
// so one waits for the other instead of deadlocking.
func TestFailedAttemptAndUnsubscribeDoNotDeadlock(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	id := f.enrol()
	f.sg.FailNext(1, 400, 0) // refused for good: the send goes dead and its enrolment exits

	// The unsubscribe's transaction, as contacts.cancelPending orders it:
	// the enrolments first...
	tx, err := f.svc.DB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `UPDATE enrolments SET updated_at = now() WHERE tenant_id = $1`, ledgerTenant); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.svc.Runner.Run(ctx, ledgerTenant, id)
		done <- err
	}()
	// ...then, once the failing attempt is recording its failure, the sends.
	deadline := time.Now().Add(10 * time.Second)
	for f.sg.Requests() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := tx.Exec(ctx, `UPDATE scheduled_sends SET status = 'cancelled', cancel_reason = 'unsubscribed',
		finished_at = now() WHERE tenant_id = $1 AND status IN ('pending', 'claimed', 'failed')`, ledgerTenant); err != nil {
		t.Fatalf("the unsubscribe's cancel: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the unsubscribe's commit: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the failing attempt: %v", err)
	}
}

// A batch of due steps leaves through one claim, one context read, one
// insert of records, concurrent provider calls and one settling
// transaction: every record settled as accepted (not in doubt: no step
// fell back to being settled on its own), one email.sent each, counted
// once, and each enrolment moved on to its next step.
func TestDispatchRunsABatch(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	const n = 30
	f.exec(`INSERT INTO contacts (tenant_id, id, email) SELECT $1, 'cnt_b' || g, 'b' || g || '@example.com'
		FROM generate_series(1, $2::int) g`, ledgerTenant, n)
	for i := 1; i <= n; i++ {
		if _, err := f.svc.Events.RecordCustom(ctx, events.Custom{TenantID: ledgerTenant,
			Email: "b" + strconv.Itoa(i) + "@example.com", Name: "go", Properties: []byte(`{}`), Timestamp: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := f.svc.Runner.Dispatch(ctx, 100)
	if err != nil || len(res) != n {
		t.Fatalf("dispatch: %d results, %v", len(res), err)
	}
	for _, r := range res {
		if r.Outcome != "sent" {
			t.Fatalf("outcome %+v", r)
		}
	}
	if f.sg.Count() != n {
		t.Fatalf("provider took %d", f.sg.Count())
	}
	if got := f.scalar(`SELECT count(*) FILTER (WHERE NOT sending AND NOT in_doubt AND message_id <> '')::text || ' ' || count(*)::text
		FROM sends WHERE tenant_id = $1`, ledgerTenant); got != "30 30" {
		t.Fatalf("records settled as accepted / all: %v", got)
	}
	if got := f.scalar(`SELECT count(*) FROM events WHERE tenant_id = $1 AND name = 'email.sent'`, ledgerTenant); got != int64(n) {
		t.Fatalf("email.sent events %v", got)
	}
	if got := f.scalar(`SELECT count(*) FROM scheduled_sends WHERE tenant_id = $1 AND status = 'pending' AND step_id = 'step-3'`,
		ledgerTenant); got != int64(n) {
		t.Fatalf("next steps scheduled %v", got)
	}
	if got := f.scalar(`SELECT sum(total_sends)::int8 FROM contacts WHERE tenant_id = $1`, ledgerTenant); got != int64(n) {
		t.Fatalf("totalSends %v", got)
	}
	if got := f.scalar(`SELECT sum(sent)::int8 FROM metric_counts WHERE tenant_id = $1 AND scope = 'tenant'`, ledgerTenant); got != int64(n) {
		t.Fatalf("sent counted %v", got)
	}
	if res, err := f.svc.Runner.Dispatch(ctx, 100); err != nil || len(res) != 0 {
		t.Fatalf("second dispatch: %v %v", res, err)
	}
}

// ADDENDUM 6 (changed): a paused tenant is not a gate. Its due sequence
// sends wait, untried and uncancelled, with their enrolments active, and go
// out once sending resumes.
func TestPausedTenantHoldsSequenceSends(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	id := f.enrol()
	f.exec(`UPDATE tenants SET sending_status = 'paused' WHERE id = $1`, ledgerTenant)
	if res, err := f.svc.Runner.Run(ctx, ledgerTenant, id); err != nil || res.Outcome != "held" {
		t.Fatalf("run while paused: %+v, %v; want held", res, err)
	}
	if res, err := f.svc.Runner.Dispatch(ctx, 100); err != nil || len(res) != 0 {
		t.Fatalf("dispatch while paused claimed %v, %v", res, err)
	}
	if sw, err := f.svc.Sweeper.Sweep(ctx, time.Now()); err != nil || sw.Due {
		t.Fatalf("sweep while paused: %+v, %v; the held row must not count as due", sw, err)
	}
	if got := f.scalar(`SELECT ss.status || ' ' || ss.attempts || ' ' || e.status FROM scheduled_sends ss
		JOIN enrolments e ON e.tenant_id = ss.tenant_id AND e.id = ss.enrolment_id WHERE ss.tenant_id = $1 AND ss.id = $2`,
		ledgerTenant, id); got != "pending 0 active" {
		t.Fatalf("held send: %v", got)
	}
	if f.sg.Requests() != 0 {
		t.Fatal("a paused tenant's step was sent")
	}
	f.exec(`UPDATE tenants SET sending_status = 'enabled' WHERE id = $1`, ledgerTenant)
	if res, err := f.svc.Runner.Dispatch(ctx, 100); err != nil || len(res) != 1 || res[0].Outcome != "sent" {
		t.Fatalf("after resuming: %+v, %v", res, err)
	}
}

// A sequence deleted and created again under the same id is a new
// sequence: the contacts its predecessor had (exited, sequence_deleted)
// enrol afresh, and its status counts only its own enrolments.
func TestRecreatedSequenceEnrolsAfresh(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	f.enrol()
	if err := f.svc.Sequences.Delete(ctx, ledgerTenant, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Sequences.Put(ctx, ledgerTenant, "s", sequences.Put{
		Content: []byte("name: S\ntrigger: {event: go}\nsteps: [{send: welcome}]\n")}); err != nil {
		t.Fatal(err)
	}
	st, err := f.svc.Enrolments.Status(ctx, ledgerTenant, "s")
	if err != nil || st.Active+st.Paused+st.Completed+st.Exited != 0 {
		t.Fatalf("status of the new sequence: %+v, %v", st, err)
	}
	rec, err := f.svc.Events.RecordCustom(ctx, events.Custom{TenantID: ledgerTenant, Email: "ann@example.com", Name: "go",
		Properties: []byte(`{}`), Timestamp: time.Now()})
	if err != nil || len(rec.TriggeredSequences) != 1 {
		t.Fatalf("the contact was not enrolled afresh: %+v, %v", rec, err)
	}
	if st, err := f.svc.Enrolments.Status(ctx, ledgerTenant, "s"); err != nil || st.Active != 1 || st.Exited != 0 {
		t.Fatalf("status after enrolling: %+v, %v", st, err)
	}
	if _, created, err := f.svc.Enrolments.Enrol(ctx, ledgerTenant, "s", "cnt_1"); err != nil || created {
		t.Fatalf("a second manual enrolment: created %v, %v; want the open one", created, err)
	}
}

// ADDENDUM 6: storing a version without a step cancels that step's pending
// send (step_removed) at once, not when it comes due.
func TestNewVersionCancelsRemovedStepsAtOnce(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	id := f.enrol()
	if res, err := f.svc.Runner.Run(ctx, ledgerTenant, id); err != nil || res.Outcome != "sent" {
		t.Fatalf("%+v %v", res, err)
	}
	// step-3, a day away, is pending; the new version drops it.
	if _, err := f.svc.Sequences.Put(ctx, ledgerTenant, "s", sequences.Put{
		Content: []byte("name: S\ntrigger: {event: go}\nsteps: [{send: welcome}, {delay: 1d}]\n")}); err != nil {
		t.Fatal(err)
	}
	if got := f.scalar(`SELECT status || ' ' || coalesce(cancel_reason, '') FROM scheduled_sends
		WHERE tenant_id = $1 AND step_id = 'step-3'`, ledgerTenant); got != "cancelled step_removed" {
		t.Fatalf("the removed step's send: %v", got)
	}
	if got := f.scalar(`SELECT status || ' ' || coalesce(exit_reason, '') FROM enrolments WHERE tenant_id = $1`,
		ledgerTenant); got != "exited step_removed" {
		t.Fatalf("enrolment: %v", got)
	}
	// A new version that keeps the step changes nothing for its sends.
	f.exec(`INSERT INTO contacts (tenant_id, id, email) VALUES ($1, 'cnt_k', 'k@example.com')`, ledgerTenant)
	if _, err := f.svc.Sequences.Put(ctx, ledgerTenant, "s", sequences.Put{
		Content: []byte("name: S\ntrigger: {event: go}\nsteps: [{delay: 1h}, {send: welcome}]\n")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Events.RecordCustom(ctx, events.Custom{TenantID: ledgerTenant, Email: "k@example.com", Name: "go",
		Properties: []byte(`{}`), Timestamp: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Sequences.Put(ctx, ledgerTenant, "s", sequences.Put{
		Content: []byte("name: S renamed\ntrigger: {event: go}\nsteps: [{delay: 2h}, {send: welcome}]\n")}); err != nil {
		t.Fatal(err)
	}
	if got := f.scalar(`SELECT status FROM scheduled_sends WHERE tenant_id = $1 AND contact_id = 'cnt_k'`, ledgerTenant); got != "pending" {
		t.Fatalf("a kept step's send: %v", got)
	}
}
