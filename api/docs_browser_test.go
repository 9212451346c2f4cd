package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"tidings/internal/testenv"
)

// The reference page in a real browser: Redoc renders every operation of
// the served document, its search (a worker) answers, and the page asks
// nothing of anywhere but the service, at load or while used: every
// request of the page and of its workers goes to the service's origin,
// and the browser reports no Content-Security-Policy violation (an attempt
// the policy blocked) and no error.
func TestDocsPageInBrowser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.Shutdown() })
	origin := "http://" + ln.Addr().String()
	summaries := docsSummaries(t, origin+"/api/openapi.json")

	browser := testenv.Browser(t)
	// Redoc renders the whole document, examples included (about 550 KB),
	// before the summaries appear: on a busy machine that took most of a
	// minute.
	ctx, cancel := context.WithTimeout(browser, 3*time.Minute)
	defer cancel()
	w := &docsWatch{}
	if err := chromedp.Listen(browser, w.event("page")); err != nil {
		t.Fatal(err)
	}
	// Violations as the page's own script would see them; a script the
	// test adds this way runs outside the page's policy.
	_, err = chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__violations = [];
			document.addEventListener('securitypolicyviolation',
				e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));`})
	if err != nil {
		t.Fatal(err)
	}

	// Load: every summary of the document is rendered.
	// Wide enough for Redoc's side menu and its search box.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(origin+"/docs")); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(summaries)
	w.waitFor(ctx, t, fmt.Sprintf(`(s => { const r = document.querySelector('redoc');
		return !!r && s.every(x => r.textContent.includes(x)); })(%s)`, want))

	// Run time: watch the workers the page started (the search index),
	// then search for an operation and open it.
	workers := 0
	infos, err := chromedp.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if !strings.Contains(info.Type, "worker") {
			continue
		}
		workers++
		wctx, wcancel := chromedp.NewContext(ctx, chromedp.WithTargetID(info.TargetID),
			chromedp.WithListener(w.event("worker "+info.URL)))
		defer wcancel()
		if err := chromedp.Do(wctx); err != nil {
			t.Fatal(err)
		}
	}
	if workers == 0 {
		t.Error("no search worker: the test watches less than it says")
	}
	// The longest word of a summary: Redoc searches from three characters
	// and leaves out stop words ("a", "the").
	term := ""
	for _, f := range strings.FieldsFunc(summaries[0], func(r rune) bool { return !unicode.IsLetter(r) }) {
		if len(f) > len(term) {
			term = f
		}
	}
	result := chromedp.CSS(`[data-role="search:results"] li[role="menuitem"]`)
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`input.search-input`), term),
		chromedp.WaitVisible(result),
		chromedp.Click(result),
	)
	if err != nil {
		w.fatal(t, "search %q: %v", term, err)
	}
	w.waitFor(ctx, t, `location.hash.includes('operation')`)
	violations, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__violations`))
	if err != nil {
		t.Fatal(err)
	}
	// Let late events arrive (a worker's answer, an image).
	if err := chromedp.Do(ctx, chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range violations {
		t.Errorf("Content-Security-Policy violation: %s", v)
	}
	for _, m := range w.console {
		t.Errorf("console: %s", m)
	}
	if !slices.ContainsFunc(w.requests, func(r string) bool { return strings.Contains(r, "/docs/assets/redoc.standalone.") }) ||
		!slices.ContainsFunc(w.requests, func(r string) bool { return strings.HasSuffix(r, "/api/openapi.json") }) {
		t.Errorf("the page did not load the bundle and the document: %v", w.requests)
	}
	for _, r := range w.requests {
		if !docsSameOrigin(r, origin) {
			t.Errorf("%s", r)
		}
	}
	t.Logf("%d operations rendered, %d worker(s); requests:\n\t%s", len(summaries), workers, strings.Join(w.requests, "\n\t"))
}

// docsWatch collects what a page and its workers request and log.
type docsWatch struct {
	mu       sync.Mutex
	requests []string // "<who> <url>"
	console  []string // errors, warnings, CSP reports
}

// event is a listener for one target's events.
func (w *docsWatch) event(who string) func(ev any) {
	return func(ev any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			u := e.Request.URL
			if strings.HasPrefix(u, "data:") && len(u) > 40 {
				u = u[:40] + "..."
			}
			w.requests = append(w.requests, who+" "+u)
		case *network.EventLoadingFailed:
			w.console = append(w.console, fmt.Sprintf("%s: a request failed: %s %s", who, e.ErrorText, e.BlockedReason))
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError || e.Entry.Level == log.EntryLevelWarning || e.Entry.Source == log.EntrySourceSecurity {
				w.console = append(w.console, fmt.Sprintf("%s: %s %s: %s %s", who, e.Entry.Source, e.Entry.Level, e.Entry.Text, e.Entry.URL))
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				w.console = append(w.console, fmt.Sprintf("%s: console.%s %s", who, e.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			w.console = append(w.console, fmt.Sprintf("%s: exception: %s", who, msg))
		}
	}
}

// docsSameOrigin reports whether a request (as docsWatch records it) stays
// in the service: its origin, a blob: of its origin, or a data: URL
// (no request at all).
func docsSameOrigin(request, origin string) bool {
	_, raw, _ := strings.Cut(request, " ")
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "data":
		return true
	case "blob":
		return strings.HasPrefix(raw, "blob:"+origin+"/")
	}
	return u.Scheme+"://"+u.Host == origin
}

// fatal ends the test with what the browser reported so far.
func (w *docsWatch) fatal(t *testing.T, format string, args ...any) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Fatalf(format+"\nrequests:\n\t%s\nconsole:\n\t%s", append(args, strings.Join(w.requests, "\n\t"),
		strings.Join(w.console, "\n\t"))...)
}

// waitFor evaluates expr until it is true. (chromedp.Poll builds its
// predicate with new Function, which the page's policy refuses.)
func (w *docsWatch) waitFor(ctx context.Context, t *testing.T, expr string) {
	t.Helper()
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err != nil {
			w.fatal(t, "waiting for %s: %v", expr, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			w.fatal(t, "waiting for %s: %v", expr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// docsSummaries reads the summaries of the operations of the served
// document, so the test holds for whatever document the service serves.
func docsSummaries(t *testing.T, specURL string) []string {
	t.Helper()
	res, err := http.Get(specURL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", specURL, res.StatusCode, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi %q, want 3.1.x", doc.OpenAPI)
	}
	var out []string
	for _, item := range doc.Paths {
		for method, op := range item {
			if !slices.Contains([]string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}, method) {
				continue
			}
			var o struct {
				Summary string `json:"summary"`
			}
			if json.Unmarshal(op, &o) == nil && strings.TrimSpace(o.Summary) != "" {
				out = append(out, strings.TrimSpace(o.Summary))
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("the document has no operation with a summary: %.500s", raw)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
