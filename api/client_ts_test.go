package api

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The TypeScript client generated from the document (clients/ts:
// openapi-typescript's types, openapi-fetch's requests) drives a contact,
// a template and a send against this test's service: tsc type-checks the
// test against the generated types, then node runs it. make test installs
// its packages (make ts-client-deps); without node or them the test is
// skipped.
func TestGeneratedTSClient(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs("../clients/ts")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	tsc := filepath.Join(dir, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Skip("clients/ts has no node_modules: run make ts-client-deps")
	}
	b := setup(t)
	key := b.apiKey(b.tenant("org_ts_client"))
	origin := b.serve(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := t.TempDir()
	build := exec.CommandContext(ctx, tsc, "-p", "tsconfig.json", "--outDir", out)
	build.Dir = dir
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, msg)
	}
	// The compiled test imports openapi-fetch: node finds it from a
	// node_modules beside the output.
	if err := os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(out, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "package.json"), []byte(`{"type": "module"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.CommandContext(ctx, node, "--test", filepath.Join(out, "client.test.js"))
	run.Env = append(os.Environ(), "TIDINGS_URL="+origin, "TIDINGS_API_KEY="+key)
	msg, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, msg)
	}
	t.Logf("%s", msg)
}
