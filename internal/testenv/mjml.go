package testenv

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"tidings/internal/mjml"
)

// One MJML pool per test binary: starting node costs more than most tests.
var (
	mjmlOnce sync.Once
	mjmlPool *mjml.Pool
	mjmlErr  error
)

// MJML returns the test binary's shared MJML compiler pool, started on
// first use. Without node or the installed mjml package the test fails,
// saying how to install them.
func MJML(t testing.TB) *mjml.Pool {
	t.Helper()
	mjmlOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir := filepath.Join(filepath.Dir(file), "..", "mjml", "node")
		mjmlPool, mjmlErr = mjml.NewPool(context.Background(), mjml.Options{Dir: dir})
	})
	if mjmlErr != nil {
		t.Fatalf("MJML pool (run make mjml-deps): %v", mjmlErr)
	}
	return mjmlPool
}

// Main runs a package's tests and then stops the shared MJML pool, so no
// node process outlives the test binary. Use it as TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if mjmlPool != nil {
		mjmlPool.Close()
	}
	os.Exit(code)
}
