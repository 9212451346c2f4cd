// Package telemetrytest reads the metric names docs/operations.md
// documents, so each process's tests can check it serves them.
package telemetrytest

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// row is a table row of docs/operations.md naming a tidings_ metric:
// | `name` | type | labels | served by | meaning |
var row = regexp.MustCompile("^\\| `(tidings_[a-z_]+)` \\|[^|]*\\|[^|]*\\| ([a-z, ]+) \\|")

// Documented returns the documented metric names the process (api or
// worker) serves.
func Documented(t testing.TB, process string) []string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(raw), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, p := range strings.Split(m[2], ",") {
			if strings.TrimSpace(p) == process {
				names = append(names, m[1])
			}
		}
	}
	if len(names) < 3 {
		t.Fatalf("docs/operations.md documents only %v for %s", names, process)
	}
	return names
}

// Missing returns the names that a scrape body does not declare.
func Missing(body string, names []string) []string {
	var out []string
	for _, n := range names {
		if !strings.Contains(body, "# TYPE "+n+" ") {
			out = append(out, n)
		}
	}
	return out
}
