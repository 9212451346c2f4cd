package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"tidings/internal/config"
	"tidings/internal/delivery"
	"tidings/internal/events"
	"tidings/internal/provider"
	"tidings/internal/sequences"
)

// The promise itself (ADDENDUM 12): while the provider holds a message,
// its record is committed. The provider here looks for the record on a
// connection of its own (so only a committed row counts) before it takes
// each message, on every path that sends: a step run alone, a batch of due
// steps, a transactional send and a transactional batch. Moving the
// record's write after the provider call fails this test.
func TestRecordCommittedWhileTheProviderHasTheMessage(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	var mu sync.Mutex
	var seen, missing []string
	check := func(m provider.Message) {
		var n int
		err := f.svc.DB.Pool.QueryRow(ctx, `SELECT count(*) FROM sends WHERE tenant_id = $1 AND id = $2`, m.TenantID, m.SendID).Scan(&n)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m.SendID)
		if err != nil || n != 1 {
			missing = append(missing, fmt.Sprintf("%s (%v)", m.SendID, err))
		}
	}
	f.beforeSend.Store(&check)
	f.exec(`INSERT INTO contacts (tenant_id, id, email) VALUES ($1, 'cnt_2', 'bob@example.com')`, ledgerTenant)

	// A step run alone, then a batch of due steps.
	if res, err := f.svc.Runner.Run(ctx, ledgerTenant, f.enrol()); err != nil || res.Outcome != "sent" {
		t.Fatalf("step: %+v %v", res, err)
	}
	if _, err := f.svc.Events.RecordCustom(ctx, events.Custom{TenantID: ledgerTenant, Email: "bob@example.com", Name: "go",
		Properties: []byte(`{}`), Timestamp: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if res, err := f.svc.Runner.Dispatch(ctx, 10); err != nil || len(res) != 1 || res[0].Outcome != "sent" {
		t.Fatalf("dispatch: %+v %v", res, err)
	}
	// A transactional send and a batch of them.
	if _, err := f.svc.Sender.Send(ctx, ledgerTenant, delivery.Request{To: "ann@example.com", TemplateID: "welcome"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.svc.Sender.SendBatch(ctx, ledgerTenant, []delivery.Request{
		{To: "ann@example.com", TemplateID: "welcome"}, {To: "bob@example.com", TemplateID: "welcome"}}, 0, nil) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 5 || len(missing) > 0 {
		t.Fatalf("the provider took %d messages; without a committed record: %v", len(seen), missing)
	}
}

// No record waits for the shared provider rate (ADDENDUM 19): a batch of
// due steps whose rate wait is cut short (the bucket held by a 429) wrote
// no record at any moment, sent nothing, and its step is tried again. With
// the record written before the wait, an attempt outliving its claim
// would have its step taken over, settled in doubt and marked sent though
// the message never left: the review's "step lost but recorded sent".
func TestNoRecordWaitsForTheProviderRate(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t, func(c *config.Config) { c.ProviderRatePerSecond = 1 })
	ctx := context.Background()
	// Every record ever inserted, even one deleted since.
	f.exec(`CREATE TABLE sends_seen (id text)`)
	f.exec(`CREATE FUNCTION sends_seen() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO sends_seen VALUES (NEW.id); RETURN NEW; END $$`)
	f.exec(`CREATE TRIGGER sends_seen AFTER INSERT ON sends FOR EACH ROW EXECUTE FUNCTION sends_seen()`)
	id := f.enrol()
	if err := f.svc.Sender.Rate.Backoff(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := f.svc.Runner.Dispatch(actx, 10)
	if err != nil || len(res) != 1 || res[0].Outcome == "sent" {
		t.Fatalf("dispatch under a held rate: %+v %v", res, err)
	}
	if n := f.scalar(`SELECT count(*) FROM sends_seen`); n != int64(0) {
		t.Fatalf("%v records were written while their messages waited for the rate", n)
	}
	if n := f.sg.Count(); n != 0 {
		t.Fatalf("the provider took %d messages", n)
	}
	if st := f.scalar(`SELECT status FROM scheduled_sends WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id); st == "sent" || st == "dead" {
		t.Fatalf("the step is %v; it should be tried again", st)
	}
	if !errors.Is(actx.Err(), context.DeadlineExceeded) {
		t.Fatal("the dispatch returned before its wait was cut")
	}
}

// An exit condition never counts the very event that enrolled the contact,
// even when that event is stamped ahead of the server's clock (the API
// takes timestamps up to 5 minutes ahead, so the event is "after" the
// enrolment): the contact who just entered gets the step. A later event of
// the same name does end it.
func TestExitConditionIgnoresTheEnrollingEvent(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	if _, err := f.svc.Sequences.Put(ctx, ledgerTenant, "again", sequences.Put{Content: []byte(`name: Again
trigger: {event: signed_up}
exit: {operator: and, conditions: [{type: event, name: signed_up, operator: occurred}]}
steps: [{send: welcome}, {delay: 1d}, {send: welcome}]
`)}); err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().Add(2 * time.Minute)
	if _, err := f.svc.Events.RecordCustom(ctx, events.Custom{TenantID: ledgerTenant, Email: "ann@example.com",
		Name: "signed_up", Properties: []byte(`{}`), Timestamp: ahead}); err != nil {
		t.Fatal(err)
	}
	res, err := f.svc.Runner.Dispatch(ctx, 10)
	if err != nil || len(res) != 1 || res[0].Outcome != "sent" {
		t.Fatalf("the first step: %+v %v; want sent", res, err)
	}
	status := func() any {
		return f.scalar(`SELECT status FROM enrolments WHERE tenant_id = $1 AND sequence_id = 'again'`, ledgerTenant)
	}
	if st := status(); st != "active" {
		t.Fatalf("enrolment %v after its first step", st)
	}
	// A second signed_up is not the enrolling one: it ends the enrolment.
	if _, err := f.svc.Events.RecordCustom(ctx, events.Custom{TenantID: ledgerTenant, Email: "ann@example.com",
		Name: "signed_up", Properties: []byte(`{}`), Timestamp: ahead.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if st := status(); st != "exited" {
		t.Fatalf("enrolment %v after a second signed_up", st)
	}
}
