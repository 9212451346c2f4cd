package templates_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"tidings/mjml"
)

// The tests share one MJML pool: starting node costs more than the tests.
var (
	poolOnce sync.Once
	pool     *mjml.Pool
	poolErr  error
)

// testPool returns the shared pool. Without node or node_modules the test
// fails, saying how to install them.
func testPool(t testing.TB) *mjml.Pool {
	t.Helper()
	poolOnce.Do(func() {
		pool, poolErr = mjml.NewPool(context.Background(), mjml.Options{Dir: filepath.Join("..", "mjml", "node")})
	})
	if poolErr != nil {
		t.Fatalf("MJML pool (run make mjml-deps): %v", poolErr)
	}
	return pool
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pool != nil {
		pool.Close()
	}
	os.Exit(code)
}
