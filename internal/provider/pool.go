package provider

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"tidings/internal/telemetry"
)

// Stream is a kind of mail with its own ordered list of providers
// (ADDENDUM 22): transactional mail keeps apart from marketing mail, so a
// campaign's reputation never delays a password reset.
type Stream string

// The two streams. Sequences and broadcasts are marketing.
const (
	Transactional Stream = "transactional"
	Marketing     Stream = "marketing"
)

// Streams are both streams, in the order GET /api/tenant lists them.
var Streams = []Stream{Transactional, Marketing}

// Circuit states, as GET /api/tenant shows them.
const (
	StateOK       = "ok"
	StateOpen     = "open"
	StateHalfOpen = "half_open"
)

// DefaultRetryAfter is PROVIDER_RETRY_AFTER's default.
const DefaultRetryAfter = 30 * time.Second

// Pool hands each message to the providers of its stream in order of
// preference, with a circuit per provider and stream (ADDENDUM 22):
//
//   - a definite failure (Error.Down) opens the circuit, and the message
//     goes to the next provider at once;
//   - an open circuit's provider is skipped while another provider of the
//     stream is not open; after retryAfter it is half-open, and the next
//     message tries it: a success closes the circuit, a failure opens it
//     again;
//   - when every provider of the stream is open (always so with one), each
//     message is tried in order as without circuits;
//   - a message in doubt never goes to another provider: it may have left.
//
// Circuits live in the process (docs/decisions.md "Providers"): each api
// and worker process learns of an outage from its own first failure, which
// costs that one message a failover, never the message itself.
type Pool struct {
	streams    map[Stream][]*circuit
	retryAfter time.Duration
	now        func() time.Time
}

type circuit struct {
	p      Provider
	stream Stream
	mu     sync.Mutex
	open   bool
	since  time.Time // when it opened
}

// NewPool builds a pool from each stream's providers in order of
// preference; retryAfter <= 0 means DefaultRetryAfter.
func NewPool(streams map[Stream][]Provider, retryAfter time.Duration) *Pool {
	if retryAfter <= 0 {
		retryAfter = DefaultRetryAfter
	}
	p := &Pool{streams: map[Stream][]*circuit{}, retryAfter: retryAfter, now: time.Now}
	for _, s := range Streams {
		for _, prov := range streams[s] {
			p.streams[s] = append(p.streams[s], &circuit{p: prov, stream: s})
		}
	}
	return p
}

// PoolOf is a pool of one provider on both streams (EMAIL_PROVIDER alone).
func PoolOf(p Provider) *Pool {
	return NewPool(map[Stream][]Provider{Transactional: {p}, Marketing: {p}}, 0)
}

// SetClock replaces time.Now (tests).
func (p *Pool) SetClock(now func() time.Time) { p.now = now }

// State is one circuit's state.
type State struct {
	Name   string
	Stream Stream
	State  string
}

// States lists every circuit, per stream in order of preference.
func (p *Pool) States() []State {
	var out []State
	now := p.now()
	for _, s := range Streams {
		for _, c := range p.streams[s] {
			out = append(out, State{Name: c.p.Name(), Stream: s, State: c.state(now, p.retryAfter)})
		}
	}
	return out
}

// Names are the providers of the pool, each once, in order of preference.
func (p *Pool) Names() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range Streams {
		for _, c := range p.streams[s] {
			if !seen[c.p.Name()] {
				seen[c.p.Name()] = true
				out = append(out, c.p.Name())
			}
		}
	}
	return out
}

func (c *circuit) state(now time.Time, retryAfter time.Duration) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.open:
		return StateOK
	case now.Sub(c.since) >= retryAfter:
		return StateHalfOpen
	}
	return StateOpen
}

// report moves the circuit by one answer: a success closes it, a definite
// failure opens it (again, from now); anything else (a refusal of this
// message, an answer in doubt) says nothing of the provider's health.
func (c *circuit) report(err error, now time.Time) {
	var pe *Error
	down := errors.As(err, &pe) && pe.Down
	if err != nil && !down {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if down {
		c.open, c.since = true, now
	} else {
		c.open = false
	}
}

// Plan is the order in which the providers of stream would take a message
// now: those whose circuit is not open, in order of preference, or all of
// them when every one is open.
func (p *Pool) Plan(stream Stream) []Provider {
	cs := p.streams[stream]
	now := p.now()
	out := make([]Provider, 0, len(cs))
	for _, c := range cs {
		if c.state(now, p.retryAfter) != StateOpen {
			out = append(out, c.p)
		}
	}
	if len(out) == 0 {
		for _, c := range cs {
			out = append(out, c.p)
		}
	}
	return out
}

func (p *Pool) circuitOf(stream Stream, name string) *circuit {
	for _, c := range p.streams[stream] {
		if c.p.Name() == name {
			return c
		}
	}
	return nil
}

// Send hands msg to the providers of plan (from Plan) in turn until one
// takes it, skipping one whose circuit has opened since Plan while a later
// one's has not. The message's record names plan[0] when Send is called; before
// each next provider, moveTo records that provider's name on it, so the
// record always names the provider that may have the message. moveTo
// failing ends the tries with the last refusal (nothing was sent).
//
// It returns the provider that took the message (or left it in doubt) and
// its message id. The error is the last provider's (*Error) when every one
// refused: temporary if any refusal was, so a later attempt may succeed.
// A validation error (ErrInvalidMessage) is the same for every provider
// and ends the tries at once.
func (p *Pool) Send(ctx context.Context, stream Stream, plan []Provider, msg Message,
	moveTo func(ctx context.Context, name string) error) (name, messageID string, err error) {
	var refusals []*Error
	for i, prov := range plan {
		name = prov.Name()
		if p.openSince(stream, plan[i:]) {
			// Its circuit opened after the plan was made (another
			// message's failure while this one's record was written): its
			// answer is known, and a later provider of the plan is not
			// open. Trying it would cost the message a round trip to a
			// provider that is down.
			refusals = append(refusals, &Error{Provider: name, Transient: true, Down: true, Message: "circuit open"})
			continue
		}
		if i > 0 {
			telemetry.ProviderFailover(plan[i-1].Name(), string(stream))
			if err := moveTo(ctx, name); err != nil {
				return plan[i-1].Name(), "", joinRefusals(refusals)
			}
		}
		messageID, err = prov.Send(ctx, msg)
		if c := p.circuitOf(stream, name); c != nil {
			c.report(err, p.now())
		}
		var pe *Error
		switch {
		case err == nil:
			telemetry.ProviderSend(name, string(stream), "accepted")
			return name, messageID, nil
		case !errors.As(err, &pe):
			// Not the provider's answer (an invalid message): no other
			// provider would take it either.
			return name, "", err
		case pe.InDoubt:
			telemetry.ProviderSend(name, string(stream), "in_doubt")
			return name, "", err
		}
		telemetry.ProviderSend(name, string(stream), "refused")
		refusals = append(refusals, pe)
		if ctx.Err() != nil {
			// The caller has gone (or its deadline passed): a next
			// provider would fail at once, without its fault.
			break
		}
	}
	return name, "", joinRefusals(refusals)
}

// openSince says whether plan[0]'s circuit is open now while a later
// provider of plan is not: the one case where Send skips a provider of
// its plan.
func (p *Pool) openSince(stream Stream, plan []Provider) bool {
	if len(plan) < 2 {
		return false
	}
	now := p.now()
	if c := p.circuitOf(stream, plan[0].Name()); c == nil || c.state(now, p.retryAfter) != StateOpen {
		return false
	}
	for _, prov := range plan[1:] {
		if c := p.circuitOf(stream, prov.Name()); c == nil || c.state(now, p.retryAfter) != StateOpen {
			return true
		}
	}
	return false
}

// joinRefusals is the error of a message every provider refused: the last
// refusal, naming the others, temporary if any was.
func joinRefusals(rs []*Error) error {
	if len(rs) == 0 {
		return &Error{Provider: "pool", Message: "no provider for the stream"}
	}
	last := *rs[len(rs)-1]
	if len(rs) == 1 {
		return &last
	}
	msgs := make([]string, 0, len(rs))
	for _, r := range rs {
		last.Transient = last.Transient || r.Transient
		msgs = append(msgs, r.Error())
	}
	last.Provider, last.Message, last.Err = "every provider", strings.Join(msgs, "; "), nil
	return &last
}
