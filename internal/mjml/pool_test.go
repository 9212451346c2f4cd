package mjml_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tidings/internal/mjml"
)

// newPool starts a pool on the worker in this package's node directory. A
// missing node_modules fails the test with the command that fixes it.
func newPool(t testing.TB, opts mjml.Options) *mjml.Pool {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = "node"
	}
	p, err := mjml.NewPool(context.Background(), opts)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

const simple = `<mjml><mj-body><mj-section><mj-column>
<mj-text>Hello {{ contact.properties.firstName }}</mj-text>
<mj-button href="{{ resetUrl }}">Reset</mj-button>
</mj-column></mj-section></mj-body></mjml>`

func TestCompileValid(t *testing.T) {
	t.Parallel()
	p := newPool(t, mjml.Options{Size: 1})
	html, err := p.Compile(context.Background(), simple)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!doctype html>", "Hello {{ contact.properties.firstName }}", `href="{{ resetUrl }}"`, "<!--[if mso | IE]>"} {
		if !strings.Contains(html, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestCompileStrictRejects(t *testing.T) {
	t.Parallel()
	p := newPool(t, mjml.Options{})
	tests := []struct {
		desc    string
		src     string
		wantMsg string
		wantTag string
	}{
		{
			desc:    "unknown mj- element",
			src:     `<mjml><mj-body><mj-section><mj-column><mj-foo>x</mj-foo></mj-column></mj-section></mj-body></mjml>`,
			wantMsg: "Element mj-foo doesn't exist or is not registered",
			wantTag: "mj-foo",
		},
		{
			desc:    "illegal attribute",
			src:     `<mjml><mj-body><mj-section><mj-column><mj-text foo="bar">x</mj-text></mj-column></mj-section></mj-body></mjml>`,
			wantMsg: "Attribute foo is illegal",
			wantTag: "mj-text",
		},
		{
			desc:    "wrong nesting",
			src:     `<mjml><mj-body><mj-text>x</mj-text></mj-body></mjml>`,
			wantMsg: "mj-text cannot be used inside mj-body",
			wantTag: "mj-text",
		},
		{
			desc:    "no mjml root",
			src:     `<mj-body><mj-section><mj-column><mj-text>x</mj-text></mj-column></mj-section></mj-body>`,
			wantMsg: "Malformed MJML",
		},
		{
			desc:    "empty document",
			src:     ``,
			wantMsg: "Parsing failed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			_, err := p.Compile(context.Background(), tt.src)
			var verr *mjml.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("err = %v, want *ValidationError", err)
			}
			if len(verr.Messages) == 0 {
				t.Fatal("no messages")
			}
			m := verr.Messages[0]
			if !strings.Contains(m.Message, tt.wantMsg) || m.TagName != tt.wantTag {
				t.Errorf("message = %+v, want %q about %q", m, tt.wantMsg, tt.wantTag)
			}
			if tt.wantTag != "" && m.Line != 1 {
				t.Errorf("line = %d, want 1", m.Line)
			}
		})
	}
}

func TestCompileIgnoresIncludes(t *testing.T) {
	t.Parallel()
	p := newPool(t, mjml.Options{Size: 1})
	html, err := p.Compile(context.Background(), `<mjml><mj-body><mj-include path="/etc/passwd" /></mj-body></mjml>`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(html, "root:") {
		t.Fatal("mj-include read a file from disk")
	}
}

func TestConcurrentCompiles(t *testing.T) {
	t.Parallel()
	p := newPool(t, mjml.Options{Size: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			src := simple
			if i%4 == 0 {
				src = `<mjml><mj-body><mj-nope/></mj-body></mjml>`
			}
			html, err := p.Compile(context.Background(), src)
			var verr *mjml.ValidationError
			switch {
			case i%4 == 0 && !errors.As(err, &verr):
				errs <- errors.New("invalid source compiled: " + html)
			case i%4 != 0 && (err != nil || !strings.Contains(html, "Hello")):
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRecoversFromKilledProcess(t *testing.T) {
	t.Parallel()
	p := newPool(t, mjml.Options{Size: 1})
	before := p.Stats()
	if before.Running != 1 {
		t.Fatalf("running = %d, want 1", before.Running)
	}
	if err := syscall.Kill(before.Processes[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The next compile lands on the replacement, or races the death and is
	// tried again there: either way it succeeds.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if html, err := p.Compile(ctx, simple); err != nil || !strings.Contains(html, "Hello") {
		t.Fatalf("compile after kill: %v", err)
	}
	after := p.Stats()
	if after.Restarts < 1 || after.Processes[0].PID == before.Processes[0].PID {
		t.Errorf("stats after restart = %+v, before %+v", after, before)
	}
}

// bigMJML repeats the newsletter's body until one compile takes seconds.
func bigMJML(t testing.TB, copies int) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "newsletter.mjml"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	open := strings.Index(s, "<mj-body")
	open += strings.Index(s[open:], ">") + 1
	end := strings.Index(s, "</mj-body>")
	return s[:end] + strings.Repeat(s[open:end], copies) + s[end:]
}

func TestInFlightCompileIsRetriedWhenProcessDies(t *testing.T) {
	t.Parallel()
	// The deadline is far beyond any machine's load: the test is about the
	// retry, and with the default 10 s a busy CI machine ran the big compile
	// (twice, with the retry) into the timeout.
	p := newPool(t, mjml.Options{Size: 1, Timeout: 5 * time.Minute})
	pid := p.Stats().Processes[0].PID
	big := bigMJML(t, 20)
	done := make(chan error, 1)
	go func() {
		_, err := p.Compile(context.Background(), big)
		done <- err
	}()
	// The big compile takes seconds; kill the worker once it is busy.
	waitForCPU(t, pid, 200*time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("compile whose worker died was not retried on the replacement: %v", err)
		}
	case <-time.After(10 * time.Minute):
		t.Fatal("in-flight compile hung after its worker died")
	}
	if st := p.Stats(); st.Restarts < 1 || st.Processes[0].PID == pid {
		t.Fatalf("no replacement: %+v", st)
	}
}

// waitForCPU waits until process pid has used busy more CPU time than when
// called, so a test knows a compile is running in it.
func waitForCPU(t *testing.T, pid int, busy time.Duration) {
	t.Helper()
	cpu := func() time.Duration {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// Fields after the command name, which is in parentheses:
		// utime and stime are the 12th and 13th, in clock ticks (100/s).
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		utime, _ := strconv.Atoi(fields[11])
		stime, _ := strconv.Atoi(fields[12])
		return time.Duration(utime+stime) * 10 * time.Millisecond
	}
	start := cpu()
	deadline := time.Now().Add(5 * time.Minute)
	for cpu()-start < busy {
		if time.Now().After(deadline) {
			t.Fatal("worker never got busy")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTimeoutKillsAndReplacesWorker(t *testing.T) {
	t.Parallel()
	// A fake worker that never answers "HANG" and answers anything else at
	// once: the test is about the pool, and with real MJML it depended on
	// how fast a loaded machine compiles.
	p := newPool(t, mjml.Options{Size: 1, Timeout: 2 * time.Second,
		Dir: filepath.Join("testdata", "fakeworker")})
	pid := p.Stats().Processes[0].PID
	_, err := p.Compile(context.Background(), "<mjml>HANG</mjml>")
	if !errors.Is(err, mjml.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for p.Stats().Running == 0 || p.Stats().Processes[0].PID == pid {
		if time.Now().After(deadline) {
			t.Fatal("worker not replaced after a timeout")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := p.Compile(context.Background(), simple); err != nil {
		t.Fatalf("compile on the replacement: %v", err)
	}
	if st := p.Stats(); st.Restarts < 1 {
		t.Fatalf("no restart counted: %+v", st)
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	p := newPool(t, mjml.Options{Size: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Compile(ctx, simple); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	p := newPool(t, mjml.Options{Size: 2})
	pids := p.Stats().Processes
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Compile(context.Background(), simple); !errors.Is(err, mjml.ErrClosed) {
		t.Fatalf("compile after Close: %v, want ErrClosed", err)
	}
	for _, proc := range pids {
		// Signal 0 only checks that the process exists.
		if err := syscall.Kill(proc.PID, 0); err == nil {
			t.Errorf("worker %d still running after Close", proc.PID)
		}
	}
	if got := p.Stats().Running; got != 0 {
		t.Errorf("running after Close = %d", got)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	p := newPool(t, mjml.Options{Size: 2})
	s := p.Stats()
	if s.Running != 2 || len(s.Processes) != 2 {
		t.Fatalf("stats = %+v, want 2 processes", s)
	}
	if s.RSSBytes <= 0 || s.Processes[0].RSSBytes <= 0 {
		t.Errorf("RSS not reported: %+v", s)
	}
	if s.Version != "4.15.3" {
		t.Errorf("mjml version = %q, want the pinned 4.15.3", s.Version)
	}
}

func TestNewPoolErrors(t *testing.T) {
	t.Parallel()
	// A directory with worker.js but no node_modules.
	bare := t.TempDir()
	src, err := os.ReadFile(filepath.Join("node", "worker.js"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bare, "worker.js"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc string
		opts mjml.Options
		want string
	}{
		{"missing node", mjml.Options{NodeBin: "/nonexistent/node", Dir: "node"}, "node executable"},
		{"missing node_modules", mjml.Options{Dir: bare}, "make mjml-deps"},
		{"missing worker", mjml.Options{Dir: t.TempDir()}, "worker.js not found"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			p, err := mjml.NewPool(context.Background(), tt.opts)
			if err == nil {
				p.Close()
				t.Fatal("NewPool succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestMJMLDirEnv(t *testing.T) {
	abs, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MJML_DIR", abs)
	p, err := mjml.NewPool(context.Background(), mjml.Options{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Compile(context.Background(), simple); err != nil {
		t.Fatal(err)
	}
}
