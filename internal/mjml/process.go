package mjml

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// reply is one line the worker writes: the ready announcement or an answer.
type reply struct {
	Ready   bool      `json:"ready"`
	Version string    `json:"version"`
	ID      uint64    `json:"id"`
	HTML    string    `json:"html"`
	Errors  []Message `json:"errors"`
}

// process is one running node worker. Only the goroutine of the pool slot that
// owns it sends requests, one at a time: the worker compiles synchronously, so
// queueing more on it would only hide how long each compile takes.
type process struct {
	cmd     *exec.Cmd
	pid     int
	stdin   *os.File // our end of the worker's stdin; a pipe, so it takes deadlines
	stderr  *tailBuffer
	replies chan reply    // answers, in order
	killed  chan struct{} // closed by kill, so the reader never blocks on replies
	exited  chan struct{} // closed once the process has been waited for
	exitErr error         // set before exited is closed
	nextID  uint64
	version string

	killOnce sync.Once
}

// startProcess launches a worker and waits until it has loaded mjml.
func startProcess(ctx context.Context, nodeBin, dir string) (*process, error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("mjml: stdin pipe: %w", err)
	}
	cmd := exec.Command(nodeBin, filepath.Join(dir, "worker.js"))
	cmd.Dir = dir
	cmd.Stdin = stdinR
	p := &process{
		cmd:     cmd,
		stdin:   stdinW,
		stderr:  &tailBuffer{max: 4096},
		replies: make(chan reply, 1),
		killed:  make(chan struct{}),
		exited:  make(chan struct{}),
	}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("mjml: stdout pipe: %w", err)
	}
	if err := cmd.Start(); err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("mjml: start %s: %w", nodeBin, err)
	}
	// The child holds its own copy of the read end.
	stdinR.Close()
	p.pid = cmd.Process.Pid
	go p.read(stdout)

	select {
	case r := <-p.replies:
		if !r.Ready {
			p.kill()
			<-p.exited
			return nil, fmt.Errorf("mjml: worker %d did not announce itself", p.pid)
		}
		p.version = r.Version
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("mjml: worker exited during start-up (%v): %s", p.exitErr, p.stderr.String())
	case <-ctx.Done():
		p.kill()
		<-p.exited
		return nil, fmt.Errorf("mjml: waiting for worker to start: %w", ctx.Err())
	}
}

// read decodes the worker's stdout until it closes, then reaps the process.
func (p *process) read(stdout io.Reader) {
	dec := json.NewDecoder(bufio.NewReaderSize(stdout, 64<<10))
	for {
		var r reply
		if err := dec.Decode(&r); err != nil {
			break
		}
		select {
		case p.replies <- r:
		case <-p.killed:
		}
	}
	// A worker that wrote garbage is still running; make sure Wait returns.
	p.kill()
	p.exitErr = p.cmd.Wait()
	p.stdin.Close()
	close(p.exited)
}

// compile sends one request and waits for its answer, the process's death or
// the timeout. alive reports whether the process can take another request.
func (p *process) compile(src string, timeout time.Duration) (html string, alive bool, err error) {
	p.nextID++
	id := p.nextID
	line, err := json.Marshal(struct {
		ID   uint64 `json:"id"`
		MJML string `json:"mjml"`
	}{id, src})
	if err != nil {
		return "", true, fmt.Errorf("mjml: encode request: %w", err)
	}
	line = append(line, '\n')

	deadline := time.Now().Add(timeout)
	// A worker stuck in a compile stops reading; the deadline keeps the write
	// from blocking forever once the pipe buffer is full.
	_ = p.stdin.SetWriteDeadline(deadline)
	if _, err := p.stdin.Write(line); err != nil {
		p.kill()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return "", false, fmt.Errorf("%w: worker %d did not read the request within %s", ErrTimeout, p.pid, timeout)
		}
		<-p.exited
		return "", false, p.exitError()
	}

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case r := <-p.replies:
		if r.ID != id {
			p.kill()
			return "", false, fmt.Errorf("mjml: worker %d answered request %d, want %d", p.pid, r.ID, id)
		}
		if len(r.Errors) > 0 {
			return "", true, &ValidationError{Messages: r.Errors}
		}
		return r.HTML, true, nil
	case <-p.exited:
		return "", false, p.exitError()
	case <-timer.C:
		// A synchronous compile cannot be interrupted; the only way to get
		// the worker back is to replace it.
		p.kill()
		return "", false, fmt.Errorf("%w: compile took longer than %s; worker %d killed", ErrTimeout, timeout, p.pid)
	}
}

func (p *process) exitError() error {
	msg := fmt.Sprintf("%s: pid %d (%v)", ErrWorkerExited.Error(), p.pid, p.exitErr)
	if tail := strings.TrimSpace(p.stderr.String()); tail != "" {
		msg += ": " + tail
	}
	return &exitError{msg: msg}
}

// exitError lets errors.Is(err, ErrWorkerExited) hold while carrying details.
type exitError struct{ msg string }

func (e *exitError) Error() string        { return e.msg }
func (e *exitError) Is(target error) bool { return target == ErrWorkerExited }

// kill stops the process at once. Safe to call many times.
func (p *process) kill() {
	p.killOnce.Do(func() {
		close(p.killed)
		_ = p.cmd.Process.Kill()
	})
}

// stop asks the worker to exit by closing its stdin, and kills it if it has
// not exited within grace.
func (p *process) stop(grace time.Duration) {
	p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.kill()
		<-p.exited
	}
}

// tailBuffer keeps the last max bytes written to it: enough of node's stderr
// to explain a crash without growing without bound.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
