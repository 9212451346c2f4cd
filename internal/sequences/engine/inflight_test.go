package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"tidings/internal/contacts"
	"tidings/internal/delivery"
	"tidings/internal/provider"
	"tidings/internal/store"
	"tidings/internal/testenv"
)

// optOuts are the ways a contact leaves while its step's message is with
// the provider: each cancels the contact's open scheduled sends.
var optOuts = map[string]func(f *ledgerFixture){
	"deleted": func(f *ledgerFixture) {
		if err := f.svc.Contacts.Delete(context.Background(), ledgerTenant, "cnt_1"); err != nil {
			f.t.Error(err)
		}
	},
	"suppressed": func(f *ledgerFixture) {
		ctx := context.Background()
		if err := f.svc.DB.InTx(ctx, func(q *store.Tx) error {
			_, err := contacts.ApplyOptOut(ctx, q, contacts.OptOut{TenantID: ledgerTenant, ContactID: "cnt_1", Suppress: true})
			return err
		}); err != nil {
			f.t.Error(err)
		}
	},
}

// The in-flight cancel tells the truth (ADDENDUM 19): a contact deleted or
// suppressed while the provider has its step's message, whose worker then
// dies before writing the answer, ends with the step `sent` (naming the
// message's record), never `cancelled`, and no record left `sending`.
// Before the fix the cancel took the claimed row: it stayed cancelled
// though the provider took the message, and the suppressed contact's
// record stayed `sending` for good (the ledger sweep skipped step records
// and the row could no longer be claimed).
func TestInFlightCancelTellsTheTruth(t *testing.T) {
	t.Parallel()
	for name, optOut := range optOuts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newLedgerFixture(t)
			ctx := context.Background()
			id := f.enrol()
			var sendID atomic.Value
			// The contact leaves once the record is committed and the
			// provider is about to take the message.
			before := func(m provider.Message) { sendID.Store(m.SendID); optOut(f) }
			f.beforeSend.Store(&before)
			// The worker "dies" once the provider took it: nothing it writes
			// after that commits.
			heal := f.failWritesOnceSent(`BEFORE INSERT OR UPDATE ON sends FOR EACH ROW`,
				`BEFORE UPDATE ON scheduled_sends FOR EACH ROW`)

			_, _ = f.svc.Runner.Run(ctx, ledgerTenant, id)
			f.beforeSend.Store(nil)
			heal()
			if n := f.sg.Count(); n != 1 {
				t.Fatalf("the provider took %d messages, want 1", n)
			}

			// The worker is gone: its claim goes stale, the sweeps run, and
			// whatever is due runs again.
			f.exec(`UPDATE scheduled_sends SET claimed_at = now() - interval '1 hour' WHERE tenant_id = $1 AND status = 'claimed'`, ledgerTenant)
			if _, err := f.svc.Sweeper.Sweep(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
			if _, err := f.svc.Runner.Run(ctx, ledgerTenant, id); err != nil {
				t.Fatal(err)
			}
			if _, err := f.svc.Sender.SweepSending(ctx, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}

			var status, reason, named string
			if err := f.svc.DB.Pool.QueryRow(ctx, `SELECT status, coalesce(cancel_reason, ''), coalesce(send_id, '')
				FROM scheduled_sends WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id).Scan(&status, &reason, &named); err != nil {
				t.Fatal(err)
			}
			if status != "sent" || named != sendID.Load() {
				t.Errorf("the step is %s %s naming %q; the provider took %v", status, reason, named, sendID.Load())
			}
			if n := f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1 AND sending`, ledgerTenant); n != int64(0) {
				t.Errorf("%v records left sending", n)
			}
			if n := f.sg.Count(); n != 1 {
				t.Errorf("the provider took %d messages, want 1", n)
			}
		})
	}
}

// The same race with a worker that lives: the step ends `sent`, its
// enrolment stays exited, and the cancellation is not counted.
func TestInFlightCancelWithALiveWorker(t *testing.T) {
	t.Parallel()
	for name, optOut := range optOuts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newLedgerFixture(t)
			ctx := context.Background()
			id := f.enrol()
			before := func(provider.Message) { optOut(f) }
			f.beforeSend.Store(&before)
			res, err := f.svc.Runner.Run(ctx, ledgerTenant, id)
			if err != nil || res.Outcome != "sent" {
				t.Fatalf("%+v %v", res, err)
			}
			if st := f.scalar(`SELECT status FROM scheduled_sends WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id); st != "sent" {
				t.Errorf("the step is %v", st)
			}
			if n := f.scalar(`SELECT count(*) FROM scheduled_sends WHERE tenant_id = $1 AND status NOT IN ('sent', 'cancelled')`, ledgerTenant); n != int64(0) {
				t.Errorf("%v open scheduled sends after the contact left", n)
			}
			if n := f.scalar(`SELECT coalesce(sum(cancelled), 0)::bigint FROM metric_counts WHERE tenant_id = $1 AND scope = 'tenant'`, ledgerTenant); n != int64(0) {
				t.Errorf("%v cancellations counted", n)
			}
		})
	}
}

// A cancel that wins before the record: a step whose scheduled send was
// cancelled after its claim gets no record and its message never leaves
// (the record's write checks the claim under the lock the cancel takes).
// Before the fix the record was written and the message sent to a contact
// who had just unsubscribed.
func TestCancelBeforeTheRecordWithdrawsTheStep(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	id := f.enrol()
	f.exec(`UPDATE scheduled_sends SET status = 'claimed', claimed_at = now() WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id)
	if err := f.svc.DB.InTx(ctx, func(q *store.Tx) error {
		_, err := contacts.ApplyOptOut(ctx, q, contacts.OptOut{TenantID: ledgerTenant, ContactID: "cnt_1", Unsubscribe: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if st := f.scalar(`SELECT status FROM scheduled_sends WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id); st != "cancelled" {
		t.Fatalf("a claimed step without a record must be cancelled; it is %v", st)
	}
	step := delivery.Step{TenantID: ledgerTenant, ContactID: "cnt_1", TemplateID: "welcome", SequenceID: "s",
		StepID: "step-1", ScheduledSendID: id}
	for _, r := range f.svc.Sender.SendSteps(ctx, []delivery.Step{step}, 0, nil) {
		if r.Err == nil {
			t.Errorf("batch: the step was sent (%s)", r.SendID)
		}
	}
	if n := f.sg.Count(); n != 0 {
		t.Errorf("the provider took %d messages", n)
	}
	if n := f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1`, ledgerTenant); n != int64(0) {
		t.Errorf("%v records written", n)
	}
}

// The ledger sweep settles a step's record left `sending` whose scheduled
// send can no longer be claimed (finished by a path that could not settle
// it), and marks the step sent: in doubt counts as sent. Before the fix
// the sweep skipped every step record, so such a record stayed `sending`.
func TestSweepSettlesAStepRecordOfAFinishedRow(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	id := f.enrol()
	f.exec(`UPDATE scheduled_sends SET status = 'cancelled', cancel_reason = 'suppressed', finished_at = now()
		WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id)
	f.exec(`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version, sequence_id, step_id,
		scheduled_send_id, from_address, to_address, subject, sent_at, sending, in_doubt)
		VALUES ($1, 'snd_left', '', 'cnt_1', 'welcome', 1, 's', 'step-1', $2, 'l@ledger.example', 'ann@example.com', 'Welcome',
		now() - interval '1 hour', true, true)`, ledgerTenant, id)
	n, err := f.svc.Sender.SweepSending(ctx, time.Now().Add(-time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("swept %d, %v", n, err)
	}
	if d := f.scalar(`SELECT in_doubt AND NOT sending FROM sends WHERE tenant_id = $1 AND id = 'snd_left'`, ledgerTenant); d != true {
		t.Error("the record was not settled in doubt")
	}
	if st := f.scalar(`SELECT status || ' ' || coalesce(send_id, '') FROM scheduled_sends WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id); st != "sent snd_left" {
		t.Errorf("the step is %v", st)
	}
}

// A step the provider refused, whose worker dies after the refused record
// is deleted and before the row's finish, is tried again at its next claim
// and goes out once. Before the fix the row kept naming the deleted record
// (send_id, set by the record's gate), so its next claim took it for a
// message that had left and marked the step sent: never delivered, and
// reported sent with a record that does not exist (fault run, seed 17).
func TestARefusedStepIsNotMarkedSentAfterACrash(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	id := f.enrol()
	f.sg.FailNext(1, 500, 0)
	// The worker "dies" once the provider answered: the row's finish (a
	// change of status) never commits; what the refusal's delete writes
	// does.
	heal := f.failWritesOnceSent(`BEFORE UPDATE ON scheduled_sends FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)`)
	_, _ = f.svc.Runner.Run(ctx, ledgerTenant, id)
	heal()
	if n := f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1`, ledgerTenant); n != int64(0) {
		t.Fatalf("%v records after the refusal, want 0 (deleted as refused)", n)
	}

	// The claim goes stale, the sweep takes it back, and it runs again.
	f.exec(`UPDATE scheduled_sends SET claimed_at = now() - interval '1 hour', scheduled_for = now() - interval '1 second'
		WHERE tenant_id = $1 AND status = 'claimed'`, ledgerTenant)
	if _, err := f.svc.Sweeper.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE scheduled_sends SET scheduled_for = now() - interval '1 second' WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id)
	if _, err := f.svc.Runner.Run(ctx, ledgerTenant, id); err != nil {
		t.Fatal(err)
	}
	if n := f.sg.Count(); n != 1 {
		t.Errorf("the provider took %d messages, want 1 (the step was marked sent without leaving)", n)
	}
	var status, named string
	var recorded bool
	if err := f.svc.DB.Pool.QueryRow(ctx, `SELECT status, coalesce(send_id, ''),
			EXISTS (SELECT 1 FROM sends s WHERE s.tenant_id = ss.tenant_id AND s.id = ss.send_id)
		FROM scheduled_sends ss WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id).Scan(&status, &named, &recorded); err != nil {
		t.Fatal(err)
	}
	if status != "sent" || !recorded {
		t.Errorf("the step is %s naming %q (a record: %v)", status, named, recorded)
	}
}

// The records' COMMIT reaches PostgreSQL and commits, and its answer is
// lost with the connection: the step's message still goes out, once, and
// the step is sent naming it. Before the fix the write was taken as not
// written: the step was tried again later, its next claim found the
// record, and it was marked sent though the message never left (a record
// in doubt with no request: fault run seed 17, whose PostgreSQL backends
// are terminated at random).
func TestARecordCommitWhoseAnswerIsLostStillSends(t *testing.T) {
	t.Parallel()
	db, proxy := testenv.DBBehindProxy(t)
	f := newLedgerFixtureOn(t, db)
	ctx := context.Background()
	// A frequency cap makes the records' write a transaction of its own.
	f.exec(`UPDATE tenants SET frequency_cap_max = 100, frequency_cap_period = 'day' WHERE id = $1`, ledgerTenant)
	id := f.enrol()
	before := func(provider.Message) {}
	f.beforeSend.Store(&before)
	proxy.LoseCommitOf("INSERT INTO sends")
	_, _ = f.svc.Runner.Run(ctx, ledgerTenant, id)
	if proxy.Lost() != 1 {
		t.Fatalf("%d commits lost, want 1: the records were not written in a transaction", proxy.Lost())
	}
	// Whatever is left is taken back and run again, as the sweeps would.
	f.exec(`UPDATE scheduled_sends SET claimed_at = now() - interval '1 hour' WHERE tenant_id = $1 AND status = 'claimed'`, ledgerTenant)
	if _, err := f.svc.Sweeper.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE scheduled_sends SET scheduled_for = now() - interval '1 second' WHERE tenant_id = $1 AND status IN ('pending', 'failed')`, ledgerTenant)
	if _, err := f.svc.Runner.Run(ctx, ledgerTenant, id); err != nil {
		t.Fatal(err)
	}
	if n := f.sg.Count(); n != 1 {
		t.Errorf("the provider took %d messages, want 1", n)
	}
	var status string
	var inDoubt bool
	if err := f.svc.DB.Pool.QueryRow(ctx, `SELECT ss.status, s.in_doubt FROM scheduled_sends ss
		JOIN sends s ON s.tenant_id = ss.tenant_id AND s.id = ss.send_id
		WHERE ss.tenant_id = $1 AND ss.id = $2`, ledgerTenant, id).Scan(&status, &inDoubt); err != nil {
		t.Fatal(err)
	}
	if status != "sent" || inDoubt {
		t.Errorf("the step is %s, its record in doubt: %v (want sent, accepted)", status, inDoubt)
	}
}

// An attempt whose deadline passes while its records are written sends
// nothing, deletes them and tries the step again, as a worker of the
// provider pool runs it (no single Provider). Before the fix that path
// named the error after Sender.Provider (nil with a pool; the field is
// gone now, the Sender has only its pool): the dispatch
// panicked and left records `sending` that never reached the provider,
// which the ledger sweep put in doubt (fault run seed 17, in its settle).
func TestAnAttemptThatEndsWhileRecordingSendsNothing(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	id := f.enrol()
	f.exec(`CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1); RETURN NEW; END $$`)
	f.exec(`CREATE TRIGGER slow BEFORE INSERT ON sends FOR EACH ROW EXECUTE FUNCTION slow()`)
	actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, _ = f.svc.Runner.Run(actx, ledgerTenant, id)
	f.exec(`DROP TRIGGER slow ON sends`)
	if n := f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1`, ledgerTenant); n != int64(0) {
		t.Errorf("%v records left, want 0: nothing went to the provider", n)
	}
	if n := f.sg.Requests(); n != 0 {
		t.Errorf("the provider got %d requests", n)
	}
	if st := f.scalar(`SELECT status FROM scheduled_sends WHERE tenant_id = $1 AND id = $2`, ledgerTenant, id); st == "sent" {
		t.Errorf("the step is %v", st)
	}
}

// A refused step's record whose delete meets a Postgres blip is deleted on
// a retry: nothing is left `sending` for the ledger sweep to report as
// maybe sent. Before the fix one failed delete left the record, and the
// sweep settled it in doubt with no request behind it (fault run seed 27,
// a backend terminated during the delete).
func TestARefusedRecordsDeleteIsRetried(t *testing.T) {
	t.Parallel()
	f := newLedgerFixture(t)
	ctx := context.Background()
	id := f.enrol()
	f.sg.FailNext(1, 400, 0)
	// The first delete of a send record fails; later ones go through.
	f.exec(`CREATE SEQUENCE fault_seq`)
	f.exec(`CREATE FUNCTION fault() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF nextval('fault_seq') = 1 THEN RAISE EXCEPTION 'injected blip'; END IF; RETURN OLD; END $$`)
	f.exec(`CREATE TRIGGER fault BEFORE DELETE ON sends FOR EACH ROW EXECUTE FUNCTION fault()`)
	_, _ = f.svc.Runner.Run(ctx, ledgerTenant, id)
	if n := f.scalar(`SELECT last_value FROM fault_seq`); n == int64(1) {
		t.Fatal("the refused record's delete was not tried again")
	}
	if n := f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1`, ledgerTenant); n != int64(0) {
		t.Errorf("%v records left after the refusal, want 0", n)
	}
	if n := f.sg.Count(); n != 0 {
		t.Errorf("the provider took %d messages", n)
	}
}
