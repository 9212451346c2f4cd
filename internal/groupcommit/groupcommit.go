// Package groupcommit writes many callers' items in one transaction (group
// commit): each caller hands its item to a Committer and waits; a batch of
// items is written by one call of the flush function, and every caller is
// answered only once that call has returned, i.e. after its transaction
// committed (or failed). What a batch does to the database is the flush
// function's business (internal/events for POST /api/events); this package
// knows nothing of it, and only bounds the work:
//
//   - a batch holds at most MaxBatch items and waits at most MaxWait for
//     company after its first item (not at all when no flush is running and
//     the last batch was a lone item, so a lone request is not delayed);
//   - at most Writers flushes run at once; while all are busy the next
//     batch keeps filling, then the queue (Queue items) fills, and past it
//     Submit refuses at once with ErrFull: memory stays bounded however
//     slow the database is, and the caller can say "try again later";
//   - an item whose caller gave up before a batch took it is dropped and
//     never written (ErrAbandoned); once taken, the caller waits for the
//     outcome whatever its context says, so no answer is ever given for an
//     item whose fate is still open;
//   - Close stops taking items, writes every item already queued and waits
//     for the flushes in flight (the api's SIGTERM drain).
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of items that were not written: the caller may simply try again.
var (
	// ErrFull: the queue was full (the database is slower than the load).
	ErrFull = errors.New("groupcommit: queue full")
	// ErrClosed: the committer is closing or closed.
	ErrClosed = errors.New("groupcommit: closed")
	// ErrAbandoned: the caller's context ended before a batch took the
	// item; it was dropped.
	ErrAbandoned = errors.New("groupcommit: abandoned before it was written")
)

// NotWritten reports whether err says the item was certainly not written
// (ErrFull, ErrClosed, ErrAbandoned).
func NotWritten(err error) bool {
	return errors.Is(err, ErrFull) || errors.Is(err, ErrClosed) || errors.Is(err, ErrAbandoned)
}

// Flush writes a batch and returns one value and one error per item, in
// the batch's order (both slices as long as the batch). It decides how a
// failure of one item affects the others; it runs with a context of its
// own (Options.Timeout), never a caller's.
type Flush[In, Out any] func(ctx context.Context, batch []In) ([]Out, []error)

// Options bound a Committer. Zero values take the defaults below.
type Options struct {
	// MaxBatch is the most items one flush writes (default 100).
	MaxBatch int
	// MaxWait is the longest a batch waits for more items after its first
	// while another flush is running (default 2 ms; a negative value
	// never waits).
	MaxWait time.Duration
	// Queue is how many items may wait beyond the batch being gathered
	// (default 1000); Submit answers ErrFull past it.
	Queue int
	// Writers is how many flushes may run at once (default 2).
	Writers int
	// Timeout bounds one flush (default 30 s).
	Timeout time.Duration
}

// Defaults of Options.
const (
	DefaultMaxBatch = 100
	DefaultMaxWait  = 2 * time.Millisecond
	DefaultQueue    = 1000
	DefaultWriters  = 2
	DefaultTimeout  = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.Writers <= 0 {
		o.Writers = DefaultWriters
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// Item states: queued until a batch takes it or its caller abandons it.
const (
	queued int32 = iota
	taken
	abandoned
)

type item[In, Out any] struct {
	v     In
	state atomic.Int32
	done  chan struct{} // closed once out and err are set
	out   Out
	err   error
}

// Committer gathers items into batches and flushes them (see the package
// documentation). Its goroutine starts with the first Submit, so a
// Committer nobody uses costs nothing.
type Committer[In, Out any] struct {
	flush Flush[In, Out]
	o     Options

	mu     sync.RWMutex // guards closed against a send on the closed queue
	closed bool
	queue  chan *item[In, Out]

	start   sync.Once
	stopped chan struct{} // closed when the loop and every flush are done
	slots   chan struct{} // one token per running flush
	running atomic.Int32  // flushes running
	flushes sync.WaitGroup

	stats Stats
}

// Stats counts what a Committer did, for metrics and tests.
type Stats struct {
	Batches  atomic.Int64 // flushes
	Taken    atomic.Int64 // items taken into a batch
	Items    atomic.Int64 // items flushed
	Full     atomic.Int64 // Submits refused with ErrFull
	Abandons atomic.Int64 // items dropped as abandoned
}

// New returns a Committer writing through flush.
func New[In, Out any](flush Flush[In, Out], o Options) *Committer[In, Out] {
	o = o.withDefaults()
	return &Committer[In, Out]{flush: flush, o: o, queue: make(chan *item[In, Out], o.Queue),
		stopped: make(chan struct{}), slots: make(chan struct{}, o.Writers)}
}

// Options returns the committer's bounds, defaults filled in.
func (c *Committer[In, Out]) Options() Options { return c.o }

// Stats returns the committer's counters.
func (c *Committer[In, Out]) Stats() *Stats { return &c.stats }

// Queued is how many items wait in the queue now.
func (c *Committer[In, Out]) Queued() int { return len(c.queue) }

// Submit hands v to the next batch and waits until the batch holding it has
// been flushed, returning what the flush said of v. It returns ErrFull or
// ErrClosed at once when v cannot be queued, and ErrAbandoned when ctx ends
// before a batch took v (v is then never written). Once a batch has taken
// v, Submit waits for the flush whatever ctx says: its answer is the
// outcome, never a guess.
func (c *Committer[In, Out]) Submit(ctx context.Context, v In) (Out, error) {
	var zero Out
	c.start.Do(c.run)
	it := &item[In, Out]{v: v, done: make(chan struct{})}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return zero, ErrClosed
	}
	select {
	case c.queue <- it:
		c.mu.RUnlock()
	default:
		c.mu.RUnlock()
		c.stats.Full.Add(1)
		return zero, ErrFull
	}
	select {
	case <-it.done:
		return it.out, it.err
	case <-ctx.Done():
		if it.state.CompareAndSwap(queued, abandoned) {
			c.stats.Abandons.Add(1)
			return zero, fmt.Errorf("%w: %w", ErrAbandoned, context.Cause(ctx))
		}
		<-it.done
		return it.out, it.err
	}
}

// Close stops taking items (Submit answers ErrClosed), flushes every item
// already queued, waits for every flush to return, and then returns. It is
// safe to call more than once.
func (c *Committer[In, Out]) Close() {
	c.start.Do(c.run)
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.queue)
	}
	c.mu.Unlock()
	<-c.stopped
}

func (c *Committer[In, Out]) run() { go c.loop() }

// loop gathers batches and starts their flushes until the queue is closed
// and drained, then waits for the flushes.
func (c *Committer[In, Out]) loop() {
	defer close(c.stopped)
	defer c.flushes.Wait()
	limit := c.o.MaxBatch
	last := 0 // the size of the last batch
	for {
		first, ok := c.next()
		if !ok {
			return
		}
		batch := make([]*item[In, Out], 1, limit)
		batch[0] = first
		open := true // the queue is not closed
		add := func(it *item[In, Out], ok bool) {
			if !ok {
				open = false
			} else if c.take(it) {
				batch = append(batch, it)
			}
		}
		// Whatever is queued already joins at once.
	ready:
		for open && len(batch) < limit {
			select {
			case it, ok := <-c.queue:
				add(it, ok)
			default:
				break ready
			}
		}
		// While another flush runs, or the last batch had company (callers
		// come in crowds: those it answered come back together), waiting a
		// little for company makes the next transaction carry more; a lone
		// caller of a quiet committer is written at once.
		if open && len(batch) < limit && (c.running.Load() > 0 || last > 1) && c.o.MaxWait > 0 {
			t := time.NewTimer(c.o.MaxWait)
		wait:
			for open && len(batch) < limit {
				select {
				case it, ok := <-c.queue:
					add(it, ok)
				case <-t.C:
					break wait
				}
			}
			t.Stop()
		}
		// A writer: while all are busy, the batch keeps filling.
	acquire:
		for {
			if !open || len(batch) >= limit {
				c.slots <- struct{}{}
				break
			}
			select {
			case c.slots <- struct{}{}:
				break acquire
			case it, ok := <-c.queue:
				add(it, ok)
			}
		}
		last = len(batch)
		c.running.Add(1)
		c.flushes.Add(1)
		go c.write(batch)
	}
}

// next waits for the first item of a batch, skipping abandoned ones; false
// once the queue is closed and empty.
func (c *Committer[In, Out]) next() (*item[In, Out], bool) {
	for it := range c.queue {
		if c.take(it) {
			return it, true
		}
	}
	return nil, false
}

// take moves a queued item into a batch; false if its caller gave up.
func (c *Committer[In, Out]) take(it *item[In, Out]) bool {
	if !it.state.CompareAndSwap(queued, taken) {
		return false
	}
	c.stats.Taken.Add(1)
	return true
}

// write flushes one batch and answers its callers. A panicking flush
// answers them all with an error rather than leave them waiting.
func (c *Committer[In, Out]) write(batch []*item[In, Out]) {
	defer func() {
		<-c.slots
		c.running.Add(-1)
		c.flushes.Done()
	}()
	in := make([]In, len(batch))
	for i, it := range batch {
		in[i] = it.v
	}
	var outs []Out
	var errs []error
	func() {
		defer func() {
			if r := recover(); r != nil {
				outs, errs = nil, nil
				err := fmt.Errorf("groupcommit: flush panicked: %v", r)
				for range batch {
					errs = append(errs, err)
				}
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), c.o.Timeout)
		defer cancel()
		outs, errs = c.flush(ctx, in)
	}()
	c.stats.Batches.Add(1)
	c.stats.Items.Add(int64(len(batch)))
	for i, it := range batch {
		switch {
		case i < len(errs) && errs[i] != nil:
			it.err = errs[i]
		case i < len(outs):
			it.out = outs[i]
		default:
			it.err = fmt.Errorf("groupcommit: flush returned %d results for %d items", len(outs), len(batch))
		}
		close(it.done)
	}
}
