package testenv

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Browser starts a headless Chromium for the test (make test installs it:
// scripts/ensure-browser.sh) and returns a browser context, closed when
// the test ends. CHROME_PATH names another binary. Without one the test
// fails: a page's browser test is never skipped.
func Browser(t testing.TB) context.Context {
	t.Helper()
	path := os.Getenv("CHROME_PATH")
	if path == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		t.Fatal("no Chromium: run make browser (or set CHROME_PATH)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("headless", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it lives as long as ctx (no
	// timeout on it: a test bounds its own steps).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}
