package broadcasts_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"tidings/internal/broadcasts"
	"tidings/internal/provider"
	"tidings/internal/testenv"
	"tidings/queries"
)

// The recipient's status machine with records (ADDENDUM 19): a recipient
// whose message has its record is `sent`, never `queued`; a refusal turns
// it back; cancel cancels only recipients without a record; one
// recipient's conflict or failure is that recipient's alone; a claim taken
// over moves nothing.

const pro = `{"plan":"pro"}`

// holding hands each message to the fake SendGrid only once released:
// while it holds them, the provider has the messages and has not answered,
// and the test reads and moves the broadcast.
type holding struct {
	provider.Provider
	held    chan string   // the address of each message taken
	release chan struct{} // closed: every message goes on
}

func newHolding() *holding {
	return &holding{held: make(chan string, 100), release: make(chan struct{})}
}

func (h *holding) wrap(p provider.Provider) provider.Provider { h.Provider = p; return h }

func (h *holding) Send(ctx context.Context, m provider.Message) (string, error) {
	h.held <- m.To
	<-h.release
	return h.Provider.Send(ctx, m)
}

type dispatched struct {
	n   broadcasts.Counts
	err error
}

// dispatchAsync runs one dispatch of up to limit recipients in the
// background.
func (f *fixture) dispatchAsync(limit int) <-chan dispatched {
	done := make(chan dispatched, 1)
	go func() {
		n, err := f.svc.BroadcastDispatcher.Dispatch(f.ctx, limit)
		done <- dispatched{n, err}
	}()
	return done
}

// started is a broadcast to the fixture's segment, sending, its audience
// written.
func (f *fixture) started() queries.Broadcast {
	f.t.Helper()
	b := f.create(broadcasts.Input{})
	if _, err := f.svc.Broadcasts.Send(f.ctx, tenant, b.ID, nil); err != nil {
		f.t.Fatal(err)
	}
	if err := f.svc.Broadcasts.Start(f.ctx, tenant, b.ID); err != nil {
		f.t.Fatal(err)
	}
	b, err := f.svc.Broadcasts.Get(f.ctx, tenant, b.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f *fixture) get(id string) queries.Broadcast {
	f.t.Helper()
	b, err := f.svc.Broadcasts.Get(f.ctx, tenant, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// While the provider holds their messages the recipients read `sent` with
// their records' ids; a cancel then cancels only the recipient without a
// record, and its stats say so; a refusal afterwards turns its recipient
// `failed`, and only that one.
func TestInFlightRecipientsAreSent(t *testing.T) {
	t.Parallel()
	h := newHolding()
	f := newFixtureWith(t, map[string]string{"a@example.com": pro, "b@example.com": pro, "c@example.com": pro}, h.wrap)
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	})
	b := f.started()
	done := f.dispatchAsync(2)
	held := []string{<-h.held, <-h.held}

	rs := f.recipients(b.ID)
	for _, email := range held {
		rec := f.scalar(`SELECT id FROM sends WHERE tenant_id = $1 AND to_address = $2`, tenant, email)
		if r := rs[email]; r.Status != broadcasts.RecipientSent || r.SendID == nil || *r.SendID != rec {
			t.Errorf("%s while the provider holds its message: %s, sendId %v (record %v)", email, r.Status, r.SendID, rec)
		}
	}
	if st := f.st(b); st.Sent != 2 || st.Queued != 1 {
		t.Errorf("stats while two messages are held: %+v", st)
	}

	b, err := f.svc.Broadcasts.Cancel(f.ctx, tenant, b.ID)
	if err != nil || b.Status != broadcasts.Cancelled {
		t.Fatalf("cancel: %+v %v", b, err)
	}
	if st := f.st(b); st.Sent != 2 || st.Cancelled != 1 || st.Queued != 0 {
		t.Errorf("cancel answered %+v, want sent 2, cancelled 1", st)
	}
	for email, r := range f.recipients(b.ID) {
		if want := broadcasts.RecipientSent; !slices.Contains(held, email) {
			want = broadcasts.RecipientCancelled
			if r.Status != want {
				t.Errorf("%s after cancel: %s, want %s", email, r.Status, want)
			}
		} else if r.Status != want {
			t.Errorf("%s after cancel: %s, want %s", email, r.Status, want)
		}
	}

	// One of the two is refused for good.
	f.sg.FailNext(1, http.StatusBadRequest, 0)
	close(h.release)
	if d := <-done; d.err != nil || d.n.Sent != 1 || d.n.Failed != 1 {
		t.Fatalf("dispatch: %+v %v", d.n, d.err)
	}
	statuses := map[string]int{}
	for email, r := range f.recipients(b.ID) {
		statuses[r.Status]++
		if r.Status == broadcasts.RecipientFailed && (r.SendID != nil ||
			f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1 AND to_address = $2`, tenant, email) != int64(0)) {
			t.Errorf("%s failed but keeps a send: %v", email, r.SendID)
		}
	}
	if statuses[broadcasts.RecipientSent] != 1 || statuses[broadcasts.RecipientFailed] != 1 || statuses[broadcasts.RecipientCancelled] != 1 {
		t.Errorf("recipients end %v", statuses)
	}
	if st := f.st(f.get(b.ID)); st.Sent != 1 || st.Failed != 1 || st.Cancelled != 1 || st.Queued != 0 || f.sg.Count() != 1 {
		t.Errorf("stats at the end %+v, provider %d", st, f.sg.Count())
	}
}

// A temporary refusal after the record turns the recipient back to
// `queued`, its record gone, and the broadcast did not complete while the
// answer was awaited; on a broadcast cancelled meanwhile it is cancelled
// instead (nothing more leaves a cancelled broadcast).
func TestTemporaryRefusalAfterRecord(t *testing.T) {
	t.Parallel()
	for _, cancel := range []bool{false, true} {
		h := newHolding()
		f := newFixtureWith(t, map[string]string{"ann@example.com": pro}, h.wrap)
		b := f.started()
		done := f.dispatchAsync(1)
		<-h.held
		if r := f.recipients(b.ID)["ann@example.com"]; r.Status != broadcasts.RecipientSent || r.SendID == nil {
			t.Errorf("cancel %v: held message's recipient %s", cancel, r.Status)
		}
		// Every recipient counted, one awaiting the provider's answer: the
		// broadcast is not complete (the refusal below queues it again).
		if _, err := f.svc.Broadcasts.Complete(f.ctx); err != nil || f.get(b.ID).Status != broadcasts.Sending {
			t.Errorf("cancel %v: completed while a message awaits its answer (%v)", cancel, err)
		}
		want := broadcasts.RecipientQueued
		if cancel {
			want = broadcasts.RecipientCancelled
			b, err := f.svc.Broadcasts.Cancel(f.ctx, tenant, b.ID)
			if st := f.st(b); err != nil || st.Sent != 1 || st.Cancelled != 0 {
				t.Errorf("cancel answered %+v %v, want sent 1", st, err)
			}
		}
		f.sg.FailNext(1, http.StatusServiceUnavailable, 0)
		close(h.release)
		if d := <-done; d.err != nil || d.n.Retry != 1 {
			t.Fatalf("cancel %v: dispatch %+v %v", cancel, d.n, d.err)
		}
		r := f.recipients(b.ID)["ann@example.com"]
		if r.Status != want || r.SendID != nil || r.LastError == nil ||
			f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1`, tenant) != int64(0) {
			t.Errorf("cancel %v: after a temporary refusal %+v, want %s without a record", cancel, r, want)
		}
		st := f.st(f.get(b.ID))
		if (!cancel && (st.Queued != 1 || st.Sent != 0)) || (cancel && (st.Cancelled != 1 || st.Sent != 0)) {
			t.Errorf("cancel %v: stats %+v", cancel, st)
		}
		if !cancel && !r.ScheduledFor.After(time.Now()) {
			t.Errorf("requeued for %v", r.ScheduledFor)
		}
	}
}

// A recipient whose record already exists (requeued after a temporary
// refusal whose record survived, or one left by an earlier attempt) is
// settled from that record, with no second message; the recipients
// claimed with it are sent as if it were not there.
func TestExistingRecordIsThatRecipientsAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": pro, "bob@example.com": pro, "cy@example.com": pro, "dan@example.com": pro})
	b := f.started()
	// ann: requeued after a temporary refusal (claim released, one
	// attempt), her record still there; dan: never claimed, a record all
	// the same.
	f.exec(`UPDATE broadcast_recipients SET attempts = 1, last_error = 'temporary', claimed_at = NULL
		WHERE tenant_id = $1 AND email = 'ann@example.com'`, tenant)
	for _, who := range []string{"ann", "dan"} {
		f.exec(`INSERT INTO sends (tenant_id, id, message_id, contact_id, template_id, template_version, broadcast_id,
			from_address, to_address, subject, sent_at, sending, in_doubt)
			SELECT tenant_id, 'snd_' || $3, '', contact_id, 'news', 1, broadcast_id, 'b@b.example', email, 's',
				now() - interval '1 hour', true, true
			FROM broadcast_recipients WHERE tenant_id = $1 AND broadcast_id = $2 AND email = $3 || '@example.com'`, tenant, b.ID, who)
	}
	n, err := f.svc.BroadcastDispatcher.Dispatch(f.ctx, 100)
	if err != nil || n.Failed != 0 || n.Sent != 4 {
		t.Errorf("dispatch: %+v %v", n, err)
	}
	rs := f.recipients(b.ID)
	for email, r := range rs {
		switch {
		case r.Status != broadcasts.RecipientSent || r.SendID == nil:
			t.Errorf("%s: %s %v", email, r.Status, r.LastError)
		case (email == "ann@example.com" || email == "dan@example.com") && *r.SendID != "snd_"+email[:3]:
			t.Errorf("%s: sent as %s, not from its record", email, *r.SendID)
		}
	}
	if f.sg.Count() != 2 {
		t.Errorf("provider took %d messages, want 2 (bob and cy)", f.sg.Count())
	}
	if n := f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1 AND broadcast_id = $2`, tenant, b.ID); n != int64(4) {
		t.Errorf("%v records, want 4", n)
	}
	if b = f.get(b.ID); b.Status != broadcasts.Sent || f.st(b).Sent != 4 || f.st(b).Failed != 0 {
		t.Errorf("broadcast %s, stats %+v", b.Status, f.st(b))
	}
}

// A claim taken over (its worker slow past SEND_CLAIM_TIMEOUT, another
// claim holding its recipients now) neither sends nor finishes them: they
// stay as the other claim holds them.
func TestTakenOverClaimMovesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, map[string]string{"ann@example.com": pro, "bob@example.com": pro})
	b := f.started()
	// The first claim stalls between its claim and its re-check (the
	// contacts read waits on this lock); meanwhile bob unsubscribes.
	tx, err := f.svc.DB.Pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(f.ctx) }()
	if _, err := tx.Exec(f.ctx, `LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(f.ctx, `UPDATE contacts SET subscribed = false WHERE tenant_id = $1 AND email = 'bob@example.com'`, tenant); err != nil {
		t.Fatal(err)
	}
	done := f.dispatchAsync(100)
	testenv.WaitForLockWait(t, f.svc.DB, "the dispatch never reached the contacts")
	if n := f.scalar(`SELECT count(*) FROM broadcast_recipients WHERE tenant_id = $1 AND claimed_at IS NOT NULL`, tenant); n != int64(2) {
		t.Fatalf("%v recipients claimed", n)
	}
	// Another claim takes both over, as BroadcastClaim does after the
	// claim timeout.
	var takenAt time.Time
	if err := f.svc.DB.Pool.QueryRow(f.ctx, `UPDATE broadcast_recipients SET claimed_at = now(), attempts = attempts + 1
		WHERE tenant_id = $1 RETURNING claimed_at`, tenant).Scan(&takenAt); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	if d := <-done; d.err != nil {
		t.Fatal(d.err)
	}
	if f.sg.Count() != 0 || f.scalar(`SELECT count(*) FROM sends WHERE tenant_id = $1`, tenant) != int64(0) {
		t.Errorf("the stale claim sent %d messages", f.sg.Count())
	}
	for email, r := range f.recipients(b.ID) {
		if r.Status != broadcasts.RecipientQueued || r.ClaimedAt == nil || !r.ClaimedAt.Equal(takenAt) || r.SendID != nil {
			t.Errorf("%s after the stale claim: %s, claimed %v (taken over at %v)", email, r.Status, r.ClaimedAt, takenAt)
		}
	}
	// The other claim's worker died: after the claim timeout the
	// recipients go, once.
	f.exec(`UPDATE broadcast_recipients SET claimed_at = now() - interval '1 hour' WHERE tenant_id = $1`, tenant)
	if b = f.drain(b.ID); b.Status != broadcasts.Sent || f.sg.Count() != 1 || f.st(b).Sent != 1 || f.st(b).Skipped != 1 {
		t.Errorf("after the takeover lapsed: %s, stats %+v, provider %d", b.Status, f.st(b), f.sg.Count())
	}
}
