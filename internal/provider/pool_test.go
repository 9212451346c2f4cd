package provider

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// scripted is an outside provider that answers from a script: each
// answer is used once, then the last one sticks.
type scripted struct {
	name string
	mu   sync.Mutex
	errs []error
	got  []string // send ids it was handed
}

func (p *scripted) Name() string { return p.name }

func (p *scripted) Send(_ context.Context, m Message) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, m.SendID)
	var err error
	if len(p.errs) > 0 {
		err = p.errs[0]
		if len(p.errs) > 1 {
			p.errs = p.errs[1:]
		}
	}
	if err != nil {
		return "", err
	}
	return p.name + "-" + m.SendID, nil
}

func (p *scripted) answer(errs ...error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = errs
}

func (p *scripted) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

var (
	errDown    = &Error{Provider: "x", Status: 503, Transient: true, Down: true}
	errRefused = &Error{Provider: "x", Status: 400, Message: "bad sender"}
	errInDoubt = &Error{Provider: "x", Transient: true, InDoubt: true}
)

type poolFixture struct {
	a, b  *scripted
	pool  *Pool
	now   time.Time
	moves []string
}

func newPoolFixture(t *testing.T) *poolFixture {
	t.Helper()
	f := &poolFixture{a: &scripted{name: "sendgrid"}, b: &scripted{name: "ses"}, now: time.Unix(1_800_000_000, 0)}
	f.pool = NewPool(map[Stream][]Provider{Transactional: {f.a, f.b}, Marketing: {f.b, f.a}}, 30*time.Second)
	f.pool.SetClock(func() time.Time { return f.now })
	return f
}

func (f *poolFixture) send(stream Stream, id string) (string, error) {
	name, _, err := f.pool.Send(context.Background(), stream, f.pool.Plan(stream), Message{SendID: id},
		func(_ context.Context, name string) error { f.moves = append(f.moves, id+">"+name); return nil })
	return name, err
}

func (f *poolFixture) state(name string, s Stream) string {
	for _, st := range f.pool.States() {
		if st.Name == name && st.Stream == s {
			return st.State
		}
	}
	return "?"
}

// ADDENDUM 22: a definite failure moves the message on at once and opens
// the circuit of that provider and stream only; the next messages skip it
// until PROVIDER_RETRY_AFTER, when one message tries it (half_open): a
// success closes it.
func TestPoolFailoverAndCircuit(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t)
	f.a.answer(errDown)
	name, err := f.send(Transactional, "m1")
	if err != nil || name != "ses" || !slices.Equal(f.moves, []string{"m1>ses"}) {
		t.Fatalf("m1 went to %q (%v), moves %v; want ses after one move", name, err, f.moves)
	}
	if got := f.state("sendgrid", Transactional); got != StateOpen {
		t.Fatalf("sendgrid/transactional is %s, want open", got)
	}
	if got := f.state("sendgrid", Marketing); got != StateOK {
		t.Fatalf("sendgrid/marketing is %s: a circuit is per stream", got)
	}
	for _, id := range []string{"m2", "m3"} {
		if name, err := f.send(Transactional, id); err != nil || name != "ses" {
			t.Fatalf("%s: %q %v", id, name, err)
		}
	}
	if n := f.a.count(); n != 1 {
		t.Fatalf("sendgrid was tried %d times while open, want only the first", n)
	}
	f.now = f.now.Add(30 * time.Second)
	if got := f.state("sendgrid", Transactional); got != StateHalfOpen {
		t.Fatalf("after PROVIDER_RETRY_AFTER: %s, want half_open", got)
	}
	f.a.answer(nil)
	if name, err := f.send(Transactional, "m4"); err != nil || name != "sendgrid" {
		t.Fatalf("half-open try: %q %v", name, err)
	}
	if got := f.state("sendgrid", Transactional); got != StateOK {
		t.Fatalf("after one success: %s, want ok", got)
	}
}

// One failure while half-open opens the circuit again, from then.
func TestPoolHalfOpenFailureReopens(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t)
	f.a.answer(errDown)
	_, _ = f.send(Transactional, "m1")
	f.now = f.now.Add(31 * time.Second)
	if name, err := f.send(Transactional, "m2"); err != nil || name != "ses" {
		t.Fatalf("half-open failure must still move the message on: %q %v", name, err)
	}
	if got := f.state("sendgrid", Transactional); got != StateOpen {
		t.Fatalf("after a half-open failure: %s, want open", got)
	}
	f.now = f.now.Add(29 * time.Second)
	if got := f.state("sendgrid", Transactional); got != StateOpen {
		t.Fatalf("open counts from the last failure: %s", got)
	}
}

// A message in doubt may have left: it never goes to another provider,
// and it says nothing of the provider's health.
func TestPoolNeverFailsOverInDoubt(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t)
	f.a.answer(errInDoubt)
	name, err := f.send(Transactional, "m1")
	if !IsInDoubt(err) || name != "sendgrid" || f.b.count() != 0 || len(f.moves) != 0 {
		t.Fatalf("in doubt: %q %v, ses tried %d times, moves %v", name, err, f.b.count(), f.moves)
	}
	if got := f.state("sendgrid", Transactional); got != StateOK {
		t.Fatalf("in doubt opened the circuit: %s", got)
	}
}

// Every provider refusing: the error (temporary if any refusal was); a
// refusal of the message (4xx) moves it on without opening a circuit.
func TestPoolEveryProviderRefuses(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t)
	f.a.answer(errRefused)
	f.b.answer(errDown)
	_, err := f.send(Transactional, "m1")
	var pe *Error
	if !errors.As(err, &pe) || !pe.Temporary() {
		t.Fatalf("every provider refused: %v, want a temporary *Error", err)
	}
	if f.state("sendgrid", Transactional) != StateOK || f.state("ses", Transactional) != StateOpen {
		t.Fatalf("states %+v: a 4xx refusal is the message's, a 503 the provider's", f.pool.States())
	}
}

// When every provider of a stream is open, each message is tried in order
// as without circuits; a success there closes that circuit.
func TestPoolAllOpenTriesInOrder(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t)
	f.a.answer(errDown)
	f.b.answer(errDown)
	if _, err := f.send(Transactional, "m1"); err == nil {
		t.Fatal("both down: want an error")
	}
	f.a.answer(nil)
	name, err := f.send(Transactional, "m2")
	if err != nil || name != "sendgrid" {
		t.Fatalf("all open: %q %v, want the first of the list", name, err)
	}
	if f.state("sendgrid", Transactional) != StateOK {
		t.Fatal("a success closes the circuit")
	}
}

// A message the provider package itself refuses (not a provider's answer)
// is the same for every provider: no failover.
func TestPoolInvalidMessageStops(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t)
	f.a.answer(ErrInvalidMessage)
	if _, err := f.send(Transactional, "m1"); !errors.Is(err, ErrInvalidMessage) || f.b.count() != 0 {
		t.Fatalf("invalid message: %v, ses tried %d", err, f.b.count())
	}
}

// A failed move (the record could not name the next provider) hands the
// message to no one else.
func TestPoolMoveFailureStops(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t)
	f.a.answer(errDown)
	_, _, err := f.pool.Send(context.Background(), Transactional, f.pool.Plan(Transactional), Message{SendID: "m1"},
		func(context.Context, string) error { return errors.New("database down") })
	if err == nil || f.b.count() != 0 {
		t.Fatalf("move failed: %v, ses tried %d", err, f.b.count())
	}
}

// A plan made before another message opened SendGrid's circuit (the
// record was being written meanwhile) skips SendGrid: its answer is known,
// and trying it would cost the message a round trip to a provider that is
// down. The record is moved on first, as for any failover. With every
// later provider open too, the plan is tried as it is.
func TestPoolStalePlanSkipsOpenedCircuit(t *testing.T) {
	t.Parallel()
	f := newPoolFixture(t)
	stale := f.pool.Plan(Transactional) // sendgrid, ses
	f.a.answer(errDown)
	if name, err := f.send(Transactional, "m1"); err != nil || name != "ses" {
		t.Fatalf("m1: %q %v", name, err)
	}
	var moves []string
	name, _, err := f.pool.Send(context.Background(), Transactional, stale, Message{SendID: "m2"},
		func(_ context.Context, name string) error { moves = append(moves, "m2>"+name); return nil })
	if err != nil || name != "ses" || !slices.Equal(moves, []string{"m2>ses"}) {
		t.Fatalf("m2 went to %q (%v), moves %v", name, err, moves)
	}
	if n := f.a.count(); n != 1 {
		t.Fatalf("sendgrid was tried %d times, want only m1's", n)
	}

	// Both open: the stale plan is tried in order, and SendGrid's answer
	// (a success) closes its circuit.
	f.b.answer(errDown)
	f.a.answer(errDown)
	if _, err := f.send(Transactional, "m3"); err == nil {
		t.Fatal("m3: every provider down, want an error")
	}
	f.a.answer(nil)
	if name, _, err := f.pool.Send(context.Background(), Transactional, stale, Message{SendID: "m4"},
		func(context.Context, string) error { return nil }); err != nil || name != "sendgrid" {
		t.Fatalf("m4 with every circuit open: %q %v", name, err)
	}

	// moveTo failing after a skip: the message is refused, temporary.
	f.now = f.now.Add(30 * time.Second) // SES half-open
	f.a.answer(errDown)
	f.b.answer(nil)
	if name, err := f.send(Transactional, "m5"); err != nil || name != "ses" {
		t.Fatalf("m5: %q %v", name, err)
	}
	tried := f.a.count()
	_, _, err = f.pool.Send(context.Background(), Transactional, stale, Message{SendID: "m6"},
		func(context.Context, string) error { return errors.New("database gone") })
	if !IsTemporary(err) || f.a.count() != tried {
		t.Fatalf("m6: %v (sendgrid tried %d more), want a temporary refusal without trying it", err, f.a.count()-tried)
	}
}
