package sanitize

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"tidings/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newsletterSource is the 23 KB newsletter the mjml package benchmarks.
func newsletterSource(t testing.TB) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "mjml", "testdata", "newsletter.mjml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// compiledNewsletter is the newsletter compiled: ordinary email HTML.
func compiledNewsletter(t testing.TB) string {
	t.Helper()
	html, err := testenv.MJML(t).Compile(context.Background(), newsletterSource(t))
	if err != nil {
		t.Fatal(err)
	}
	return html
}
