package api

import (
	"context"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"tidings/internal/testenv"
	"tidings/internal/tracking"
)

// The preference page in a real browser with JavaScript turned off: the
// forms work (leave the topic, save preferences), and the page makes no
// request to anywhere but the service.
func TestPreferencePageInBrowser(t *testing.T) {
	t.Parallel()
	b := setupOutcomeAPI(t, true)
	b.sql(`INSERT INTO topics (tenant_id, id, name, default_mode) VALUES
		('ten_a', 'news', 'Product news', 'opt_out'), ('ten_a', 'digest', 'Weekly digest', 'opt_in')`)
	tok, err := b.signer.UnsubscribeToken(tracking.IDs{TenantID: "ten_a", SendID: "snd_1", ContactID: "cnt_1", Topic: "news"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.Shutdown() })
	base := "http://" + ln.Addr().String()

	browser := testenv.Browser(t)
	ctx, cancel := context.WithTimeout(browser, time.Minute)
	defer cancel()
	var mu sync.Mutex
	var requested []string
	err = chromedp.Listen(browser, func(ev any) {
		var u string
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			u = e.Request.URL
		case network.EventRequestWillBeSent:
			u = e.Request.URL
		default:
			return
		}
		mu.Lock()
		requested = append(requested, u)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	// The first form: leave the message's topic.
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/t/u/"+tok),
		chromedp.WaitReady(chromedp.CSS(`input[value="digest"]`)),
		chromedp.Click(chromedp.CSS(`form:nth-of-type(1) button`)),
		chromedp.WaitReady(chromedp.CSS(`p[role="status"]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS(`body`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html, "You left <strong>Product news</strong>") {
		t.Fatalf("after leaving the topic:\n%s", html)
	}
	if got := b.scalar(`SELECT subscribed::text || ' ' || topics::text FROM contacts WHERE tenant_id = 'ten_a'`); got != `true {"news": false}` {
		t.Fatalf("after the browser's POST: %s", got)
	}
	// Join the digest with the checkbox and save.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`input[value="digest"]`)),
		chromedp.Click(chromedp.CSS(`input[name="preferences"] ~ fieldset button`)),
		chromedp.WaitReady(chromedp.CSS(`input[value="digest"][checked]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if html, err = chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS(`body`))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html, "Your preferences are saved") {
		t.Fatalf("after saving:\n%s", html)
	}
	if got := b.scalar(`SELECT topics->>'digest' FROM contacts WHERE tenant_id = 'ten_a'`); got != "true" {
		t.Fatalf("digest after saving: %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requested) < 3 {
		t.Fatalf("requests seen: %v", requested)
	}
	for _, r := range requested {
		u, err := url.Parse(r)
		if err != nil || u.Host != ln.Addr().String() {
			t.Errorf("the page requested %s", r)
		}
	}
}
