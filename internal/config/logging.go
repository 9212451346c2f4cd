package config

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// NewLogger returns the structured logger of a process: JSON on stderr, or
// text for humans with LOG_FORMAT=text. LOG_LEVEL (debug, info, warn, error;
// default info) sets the level; any other value is an error, so a typo
// stops the process instead of silently logging at the wrong level.
//
// Lines below WARN (the request log) are written in batches (LogOutput);
// flush writes what waits and must run before the process exits normally.
func NewLogger(service string) (log *slog.Logger, flush func(), err error) {
	var level slog.Level
	if v := os.Getenv("LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			return nil, nil, fmt.Errorf("LOG_LEVEL: %q is not one of debug, info, warn, error", v)
		}
	}
	out := NewLogOutput(os.Stderr, LogFlushEvery)
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch f := os.Getenv("LOG_FORMAT"); strings.ToLower(f) {
	case "", "json":
		h = slog.NewJSONHandler(out, opts)
	case "text":
		h = slog.NewTextHandler(out, opts)
	default:
		return nil, nil, fmt.Errorf("LOG_FORMAT: %q is not json or text", f)
	}
	return slog.New(out.Handler(h)).With("service", service), out.Flush, nil
}

// LogFlushEvery is the longest a line below WARN waits in LogOutput.
const LogFlushEvery = 100 * time.Millisecond

// logChunk is the most LogOutput writes at once: PIPE_BUF on Linux, so a
// write to a pipe is never split and interleaved with another writer's
// (the runtime's panic output, a library writing to stderr itself).
const logChunk = 4096

// LogOutput is a writer that batches log lines: a write system call per
// line cost about half of the request log's CPU time (docs/benchmarks.md,
// "Request log"). Lines wait until logChunk bytes wait, until every has
// passed since the first of them, or until a line at WARN or above (see
// Handler) or Flush writes them, in order. Every line is written; a
// process that dies without Flush (SIGKILL, a crash) loses what waits: at
// most every's worth of lines below WARN.
type LogOutput struct {
	w     io.Writer
	every time.Duration

	mu    sync.Mutex
	buf   []byte
	armed bool
	timer *time.Timer
}

// NewLogOutput batches the lines written to w.
func NewLogOutput(w io.Writer, every time.Duration) *LogOutput {
	o := &LogOutput{w: w, every: every, buf: make([]byte, 0, logChunk)}
	o.timer = time.AfterFunc(time.Hour, o.Flush)
	o.timer.Stop()
	return o
}

// Write holds p, one log record, or writes it with what waits when that
// makes a chunk.
func (o *LogOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.buf)+len(p) > logChunk {
		if err := o.flushLocked(); err != nil {
			return 0, err
		}
	}
	if len(p) >= logChunk {
		return o.w.Write(p)
	}
	o.buf = append(o.buf, p...)
	if !o.armed {
		o.armed = true
		o.timer.Reset(o.every)
	}
	return len(p), nil
}

// Flush writes every line that waits.
func (o *LogOutput) Flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.flushLocked()
}

func (o *LogOutput) flushLocked() error {
	if o.armed {
		o.timer.Stop()
		o.armed = false
	}
	if len(o.buf) == 0 {
		return nil
	}
	_, err := o.w.Write(o.buf)
	o.buf = o.buf[:0]
	return err
}

// Handler wraps h, which writes to o, so that a record at WARN or above is
// written at once, after the lines that wait: what an operator needs at
// the moment something fails (and before os.Exit) is never held back.
func (o *LogOutput) Handler(h slog.Handler) slog.Handler { return flushingHandler{h, o} }

type flushingHandler struct {
	slog.Handler
	out *LogOutput
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.out.Flush()
	}
	return err
}

func (h flushingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return flushingHandler{h.Handler.WithAttrs(as), h.out}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{h.Handler.WithGroup(name), h.out}
}
