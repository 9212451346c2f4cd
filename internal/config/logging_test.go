package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// writes records every Write call it gets.
type writes struct {
	mu    sync.Mutex
	calls []string
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, string(p))
	return len(p), nil
}

func (w *writes) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...)
}

// A line at WARN or above is written at once, after the lines that were
// waiting, in one write; loggers derived with With keep doing so.
func TestLogOutputWritesWarningsAtOnce(t *testing.T) {
	t.Parallel()
	var w writes
	out := NewLogOutput(&w, time.Hour)
	log := slog.New(out.Handler(slog.NewTextHandler(out, nil))).With("service", "api")
	log.Info("request", "n", 1)
	log.Info("request", "n", 2)
	if got := w.get(); len(got) != 0 {
		t.Fatalf("info lines written before a flush: %q", got)
	}
	log.Warn("upstream failed")
	got := w.get()
	if len(got) != 1 || strings.Count(got[0], "\n") != 3 ||
		!(strings.Index(got[0], "n=1") < strings.Index(got[0], "n=2") && strings.Index(got[0], "n=2") < strings.Index(got[0], "upstream failed")) {
		t.Fatalf("writes %q, want the two info lines and the warning, in order, in one write", got)
	}
	log.Error("stopped")
	if got := w.get(); len(got) != 2 || !strings.Contains(got[1], "stopped") {
		t.Fatalf("writes %q, want the error written at once", got)
	}
}

// Lines go out in chunks of at most PIPE_BUF, cut between lines, so that
// a pipe never interleaves them with another writer's; together they are
// every line in order. A record longer than a chunk goes alone.
func TestLogOutputChunks(t *testing.T) {
	t.Parallel()
	var w writes
	out := NewLogOutput(&w, time.Hour)
	var want bytes.Buffer
	for i := range 200 {
		line := fmt.Sprintf("line %03d %s\n", i, strings.Repeat("x", 90))
		if i == 150 {
			line = strings.Repeat("y", 2*logChunk) + "\n"
		}
		want.WriteString(line)
		if _, err := out.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	out.Flush()
	got := w.get()
	if strings.Join(got, "") != want.String() {
		t.Fatal("the lines written are not the lines logged, in order")
	}
	for i, c := range got {
		if !strings.HasSuffix(c, "\n") || (len(c) > logChunk && strings.Count(c, "\n") > 1) {
			t.Fatalf("write %d: %d bytes, %d lines: not whole lines within %d bytes", i, len(c), strings.Count(c, "\n"), logChunk)
		}
	}
	if len(got) > 200/10 {
		t.Fatalf("%d writes for 200 lines of 100 bytes, want a chunk of about 40 lines each", len(got))
	}
}

// A line below WARN waits at most every.
func TestLogOutputFlushesOnItsOwn(t *testing.T) {
	t.Parallel()
	var w writes
	out := NewLogOutput(&w, 10*time.Millisecond)
	if _, err := out.Write([]byte("request\n")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(w.get()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a waiting line was never written")
		}
	}
	if got := w.get(); len(got) != 1 || got[0] != "request\n" {
		t.Fatalf("writes %q", got)
	}
}
