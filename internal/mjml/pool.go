package mjml

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Pool. The zero value is usable.
type Options struct {
	// Size is the number of node processes; default 2. Each holds one compile
	// at a time, so Size bounds concurrent compiles.
	Size int
	// NodeBin is the node executable, looked up in PATH; default "node".
	NodeBin string
	// Dir holds worker.js and node_modules; see the package documentation for
	// the default.
	Dir string
	// Timeout bounds one compile, and separately the wait for a free worker;
	// default 10s. A worker whose compile overruns it is killed and replaced,
	// since a synchronous compile cannot be interrupted any other way.
	Timeout time.Duration
	// StartTimeout bounds the start of one node process; default 30s.
	StartTimeout time.Duration
}

const (
	defaultSize         = 2
	defaultTimeout      = 10 * time.Second
	defaultStartTimeout = 30 * time.Second
	stopGrace           = 5 * time.Second
	maxRestartBackoff   = 5 * time.Second
)

// Pool compiles MJML on a fixed number of node processes. It is safe for
// concurrent use. A process that dies is replaced and the compile it was
// running is tried once more; if that one dies too, the compile fails with
// an error wrapping ErrWorkerExited.
type Pool struct {
	opts Options
	dir  string

	reqs chan *request
	quit chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	procs    []*process // by slot; nil while the slot restarts its process
	lastErr  error      // why the last start failed, for callers left waiting
	restarts atomic.Uint64
	close    sync.Once
}

type request struct {
	ctx  context.Context
	src  string
	done chan result // buffered, so an abandoned request never blocks a slot
}

type result struct {
	html string
	err  error
}

// NewPool checks that node and the mjml package are installed, starts
// opts.Size worker processes and waits until each has loaded mjml. ctx bounds
// only the start-up; the processes run until Close.
func NewPool(ctx context.Context, opts Options) (*Pool, error) {
	if opts.Size <= 0 {
		opts.Size = defaultSize
	}
	if opts.NodeBin == "" {
		opts.NodeBin = "node"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	nodeBin, err := exec.LookPath(opts.NodeBin)
	if err != nil {
		return nil, fmt.Errorf("mjml: node executable %q not found (install Node.js 18 or later): %w", opts.NodeBin, err)
	}
	opts.NodeBin = nodeBin
	dir, err := resolveDir(opts.Dir)
	if err != nil {
		return nil, err
	}

	p := &Pool{
		opts:  opts,
		dir:   dir,
		reqs:  make(chan *request),
		quit:  make(chan struct{}),
		procs: make([]*process, opts.Size),
	}
	started := make([]*process, opts.Size)
	errs := make([]error, opts.Size)
	var wg sync.WaitGroup
	for i := range started {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
			defer cancel()
			started[i], errs[i] = startProcess(sctx, opts.NodeBin, dir)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, proc := range started {
			if proc != nil {
				proc.stop(stopGrace)
			}
		}
		return nil, err
	}
	// Stats sees the processes as soon as NewPool returns.
	copy(p.procs, started)
	for i, proc := range started {
		p.wg.Go(func() { p.runSlot(i, proc) })
	}
	return p, nil
}

// resolveDir finds the directory holding worker.js and node_modules/mjml.
func resolveDir(dir string) (string, error) {
	var candidates []string
	switch {
	case dir != "":
		candidates = []string{dir}
	case os.Getenv("MJML_DIR") != "":
		candidates = []string{os.Getenv("MJML_DIR")}
	default:
		if exe, err := os.Executable(); err == nil {
			exeDir := filepath.Dir(exe)
			candidates = append(candidates,
				filepath.Join(exeDir, "mjml", "node"),
				filepath.Join(exeDir, "..", "internal", "mjml", "node"))
		}
		candidates = append(candidates, filepath.Join("internal", "mjml", "node"))
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, "worker.js")); err != nil {
			continue
		}
		abs, err := filepath.Abs(c)
		if err != nil {
			return "", fmt.Errorf("mjml: %w", err)
		}
		if _, err := os.Stat(filepath.Join(abs, "node_modules", "mjml", "package.json")); err != nil {
			return "", fmt.Errorf("mjml: %s has no node_modules/mjml; run `make mjml-deps`", abs)
		}
		return abs, nil
	}
	return "", fmt.Errorf("mjml: worker.js not found in %v; set MJML_DIR to the internal/mjml/node directory and run `make mjml-deps`", candidates)
}

// Compile turns MJML into HTML. Invalid MJML returns a *ValidationError. The
// wait for a free worker is bounded by ctx and by Options.Timeout.
func (p *Pool) Compile(ctx context.Context, src string) (string, error) {
	html, err := p.compile(ctx, src)
	if errors.Is(err, ErrWorkerExited) && ctx.Err() == nil {
		// Compiling is pure, so the replacement of a worker that died under
		// this request (or just before taking it) tries it once more.
		html, err = p.compile(ctx, src)
	}
	return html, err
}

func (p *Pool) compile(ctx context.Context, src string) (string, error) {
	req := &request{ctx: ctx, src: src, done: make(chan result, 1)}
	wait := time.NewTimer(p.opts.Timeout)
	defer wait.Stop()
	select {
	case p.reqs <- req:
	case <-ctx.Done():
		return "", ctx.Err()
	case <-p.quit:
		return "", ErrClosed
	case <-wait.C:
		err := fmt.Errorf("%w: no MJML worker free within %s", ErrTimeout, p.opts.Timeout)
		p.mu.Lock()
		if p.lastErr != nil {
			err = fmt.Errorf("%w (last worker start failed: %v)", err, p.lastErr)
		}
		p.mu.Unlock()
		return "", err
	}
	select {
	case r := <-req.done:
		return r.html, r.err
	case <-ctx.Done():
		// The slot still finishes the compile and drops the answer.
		return "", ctx.Err()
	}
}

// runSlot keeps one worker process alive and feeds it requests until Close.
func (p *Pool) runSlot(slot int, proc *process) {
	backoff := 100 * time.Millisecond
	for {
		if proc == nil {
			ctx, cancel := context.WithTimeout(context.Background(), p.opts.StartTimeout)
			var err error
			proc, err = startProcess(ctx, p.opts.NodeBin, p.dir)
			cancel()
			if err != nil {
				p.mu.Lock()
				p.lastErr = err
				p.mu.Unlock()
				select {
				case <-p.quit:
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, maxRestartBackoff)
				continue
			}
			backoff = 100 * time.Millisecond
			p.restarts.Add(1)
		}
		p.setProc(slot, proc)
		p.serve(proc)
		p.setProc(slot, nil)
		proc.stop(stopGrace)
		proc = nil
		select {
		case <-p.quit:
			return
		default:
		}
	}
}

// serve hands requests to proc until it dies or the pool closes.
func (p *Pool) serve(proc *process) {
	for {
		select {
		case <-p.quit:
			return
		case <-proc.exited:
			return
		case req := <-p.reqs:
			if err := req.ctx.Err(); err != nil {
				// Given up on while waiting; don't spend a compile on it.
				req.done <- result{err: err}
				continue
			}
			html, alive, err := proc.compile(req.src, p.opts.Timeout)
			req.done <- result{html: html, err: err}
			if !alive {
				return
			}
		}
	}
}

func (p *Pool) setProc(slot int, proc *process) {
	p.mu.Lock()
	p.procs[slot] = proc
	p.mu.Unlock()
}

// Close stops accepting compiles, lets running ones finish and stops the
// processes. It is safe to call more than once.
func (p *Pool) Close() error {
	p.close.Do(func() { close(p.quit) })
	p.wg.Wait()
	return nil
}
