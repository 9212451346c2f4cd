package api

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docsScript is the bundle's URL as the page names it.
var docsScript = regexp.MustCompile(`<script src="(/docs/assets/redoc\.standalone\.[0-9a-f]{16}\.js)"></script>`)

// getDocs sends a GET with the given headers through the app.
func getDocs(t *testing.T, b *bundle, path string, header ...string) resp {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := b.app.Test(req, -1)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, raw: raw}
}

func TestDocsPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := getDocs(t, b, "/docs")
	if r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("status %d, type %q", r.status, r.header.Get("Content-Type"))
	}
	csp := map[string]string{}
	for _, d := range strings.Split(r.header.Get("Content-Security-Policy"), ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		csp[name] = value
	}
	want := map[string]string{
		"default-src": "'none'", "script-src": "'self'", "style-src": "'self' 'unsafe-inline'",
		"img-src": "'self' data:", "font-src": "'self'", "connect-src": "'self'", "worker-src": "blob:",
		"frame-ancestors": "'none'", "base-uri": "'none'", "form-action": "'none'",
	}
	for name, value := range want {
		if csp[name] != value {
			t.Errorf("CSP %s = %q, want %q", name, csp[name], value)
		}
	}
	for name := range csp {
		if _, ok := want[name]; !ok {
			t.Errorf("CSP has %s %q, which the test does not know", name, csp[name])
		}
	}
	for h, v := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
		"Cache-Control": "no-cache"} {
		if got := r.header.Get(h); got != v {
			t.Errorf("%s: %q, want %q", h, got, v)
		}
	}
	page := string(r.raw)
	// Nothing on the page points outside the service.
	if strings.Contains(page, "//") {
		t.Errorf("the page names another origin:\n%s", page)
	}
	if !strings.Contains(page, `<redoc spec-url="/api/openapi.json"></redoc>`) || !docsScript.MatchString(page) {
		t.Errorf("the page does not load the bundle on /api/openapi.json:\n%s", page)
	}
	if strings.Contains(page, "<script>") {
		t.Errorf("the page has an inline script:\n%s", page)
	}
	// No credential is needed, and none changes anything.
	if r := b.do("GET", "/docs", "not-a-token", nil); r.status != 200 {
		t.Errorf("with a bad token: %d", r.status)
	}
}

func TestDocsAssets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	page := string(getDocs(t, b, "/docs").raw)
	script := docsScript.FindStringSubmatch(page)[1]
	vendored, err := os.ReadFile("docsassets/redoc.standalone.js")
	if err != nil {
		t.Fatal(err)
	}

	r := getDocs(t, b, script)
	if r.status != 200 || !bytes.Equal(r.raw, vendored) {
		t.Fatalf("GET %s: status %d, %d bytes, want the %d of the vendored bundle", script, r.status, len(r.raw), len(vendored))
	}
	for h, v := range map[string]string{"Content-Type": "text/javascript; charset=utf-8", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "public, max-age=31536000, immutable", "Vary": "Accept-Encoding", "Content-Encoding": ""} {
		if got := r.header.Get(h); got != v {
			t.Errorf("%s: %q, want %q", h, got, v)
		}
	}
	sum := sha256.Sum256(vendored)
	etag := r.header.Get("ETag")
	if etag != `"`+hex.EncodeToString(sum[:8])+`"` || !strings.Contains(script, hex.EncodeToString(sum[:8])) {
		t.Errorf("ETag %s, URL %s: want the content's hash", etag, script)
	}
	if r := getDocs(t, b, script, "If-None-Match", `"x", W/`+etag); r.status != 304 || len(r.raw) != 0 || r.header.Get("ETag") != etag {
		t.Errorf("If-None-Match: status %d, %d bytes, ETag %q", r.status, len(r.raw), r.header.Get("ETag"))
	}

	// Gzipped for a client that takes it, with its own ETag.
	gz := getDocs(t, b, script, "Accept-Encoding", "gzip, br")
	if gz.status != 200 || gz.header.Get("Content-Encoding") != "gzip" || gz.header.Get("ETag") == etag ||
		len(gz.raw) > len(vendored)/2 {
		t.Fatalf("gzip: status %d, encoding %q, ETag %q, %d bytes", gz.status, gz.header.Get("Content-Encoding"),
			gz.header.Get("ETag"), len(gz.raw))
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz.raw))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := io.ReadAll(zr); err != nil || !bytes.Equal(plain, vendored) {
		t.Fatalf("gunzipped: %v, %d bytes", err, len(plain))
	}
	if r := getDocs(t, b, script, "Accept-Encoding", "gzip", "If-None-Match", gz.header.Get("ETag")); r.status != 304 {
		t.Errorf("If-None-Match, gzip: %d", r.status)
	}

	// The licenses the page links to.
	for _, m := range regexp.MustCompile(`<link rel="license" href="([^"]+)">`).FindAllStringSubmatch(page, -1) {
		r := getDocs(t, b, m[1])
		if r.status != 200 || r.header.Get("Content-Type") != "text/plain; charset=utf-8" || !bytes.Contains(r.raw, []byte("MIT")) {
			t.Errorf("GET %s: %d %q", m[1], r.status, r.header.Get("Content-Type"))
		}
	}

	// The bundle is the one docsassets/README.md names.
	readme, err := os.ReadFile("docsassets/README.md")
	if err != nil {
		t.Fatal(err)
	}
	if hex := hex.EncodeToString(sum[:]); !strings.Contains(string(readme), "| vendored `redoc.standalone.js` sha256 | `"+hex+"` |") {
		t.Errorf("docsassets/README.md does not record the bundle's sha256 %s: run make docs-assets", hex)
	}
	for _, s := range []string{"cdn.redoc.ly", "fonts.googleapis", "sourceMappingURL=redoc.standalone.js.map"} {
		if bytes.Contains(vendored, []byte(s)) {
			t.Errorf("the vendored bundle names %s", s)
		}
	}
}

func TestDocsAssetsOnlyTheEmbeddedFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	script := docsScript.FindStringSubmatch(string(getDocs(t, b, "/docs").raw))[1]
	name := strings.TrimPrefix(script, "/docs/assets/")
	for _, path := range []string{
		"/docs/assets/redoc.standalone.js", // the name without its hash
		"/docs/assets/redoc.standalone.0000000000000000.js",
		"/docs/assets/README.md",
		"/docs/assets/docs.go",
		"/docs/assets/docsassets/LICENSE",
		"/docs/assets/",
		"/docs/assets/../app.go",
		"/docs/assets/..%2fapp.go",
		"/docs/assets/%2e%2e%2f%2e%2e%2fgo.mod",
		"/docs/assets/..%5c..%5cgo.mod",
		"/docs/assets//etc/passwd",
		"/docs/assets/%2fetc%2fpasswd",
		"/docs/assets/" + name + "/",
		"/docs/assets/" + name + "%00",
		"/docs/assets/." + name,
		"/docs/assets/x/" + name,
		"/docs/assets/" + strings.ToUpper(name),
		"/docs/" + name,
	} {
		r := getDocs(t, b, path)
		if r.status != 404 || bytes.Contains(r.raw, []byte("Redoc")) || bytes.Contains(r.raw, []byte("package api")) {
			t.Errorf("GET %s: status %d, %d bytes, want a 404", path, r.status, len(r.raw))
		}
	}
	// Only GET (and HEAD).
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		if r := b.do(m, script, "", nil); r.status != 405 {
			t.Errorf("%s %s: %d", m, script, r.status)
		}
	}
	if r := b.do("HEAD", script, "", nil); r.status != 200 || len(r.raw) != 0 ||
		!slices.Contains([]string{"text/javascript; charset=utf-8"}, r.header.Get("Content-Type")) {
		t.Errorf("HEAD %s: %d %q", script, r.status, r.header.Get("Content-Type"))
	}
}
