package api

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"path"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"
)

// The API reference page: GET /docs renders GET /api/openapi.json with the
// Redoc bundle vendored in docsassets/ (README.md there says which release,
// its hashes and how to refresh it). Every file the page loads is served
// from here, and the page's Content-Security-Policy has the browser refuse
// anything else (docs/decisions.md "API reference page").

//go:embed docsassets/redoc.standalone.js docsassets/LICENSE docsassets/redoc.standalone.js.LICENSE.txt
var docsFiles embed.FS

// docsCSP lets the page load only what this service serves. Beyond 'self':
//   - style-src 'unsafe-inline': Redoc styles itself with styled-components,
//     which writes <style> elements at run time, and with React style
//     attributes. CSS cannot send anything anywhere here: img, font and
//     connect stay same-origin.
//   - img-src data:: Redoc's heading link icon is an inline SVG (a data:
//     URL in its CSS); a data: URL is no request.
//   - worker-src blob:: the search index runs in a Worker that Redoc
//     builds from a Blob of its own bundled code; the worker inherits this
//     policy.
//
// No 'unsafe-inline' or 'unsafe-eval' for scripts: the page has no inline
// script (the bundle starts itself on the <redoc> element).
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; worker-src blob:; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// docsSpecURL is the document the page renders.
const docsSpecURL = "/api/openapi.json"

// docsAssetPrefix is where the embedded files are served.
const docsAssetPrefix = "/docs/assets/"

// docsAsset is one embedded file, served under a name that carries its
// content hash, so it can be cached for good.
type docsAsset struct {
	body        []byte
	contentType string
	etag        string
	// gz is body gzipped, made at the first request that accepts it.
	gzOnce sync.Once
	gz     []byte
}

// docsSite serves the page and the allowlist of its assets.
type docsSite struct {
	page []byte
	// assets by served name (redoc.standalone.<hash>.js): only these
	// exact names are served, so no path reaches anything else.
	assets map[string]*docsAsset
}

var docsPageTemplate = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tidings API reference</title>
<link rel="icon" href="data:,">
<link rel="license" href="{{.License}}">
<link rel="license" href="{{.Notices}}">
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<noscript><p>This page needs JavaScript. The OpenAPI document it shows is <a href="{{.Spec}}">{{.Spec}}</a>.</p></noscript>
<redoc spec-url="{{.Spec}}"></redoc>
<script src="{{.Script}}"></script>
</body>
</html>
`))

// newDocsSite reads the embedded files and renders the page once.
func newDocsSite() (*docsSite, error) {
	d := &docsSite{assets: map[string]*docsAsset{}}
	served := map[string]string{}
	for _, f := range []struct{ name, contentType string }{
		{"redoc.standalone.js", "text/javascript; charset=utf-8"},
		{"LICENSE", "text/plain; charset=utf-8"},
		{"redoc.standalone.js.LICENSE.txt", "text/plain; charset=utf-8"},
	} {
		body, err := docsFiles.ReadFile("docsassets/" + f.name)
		if err != nil {
			return nil, fmt.Errorf("docs page: %w", err)
		}
		sum := sha256.Sum256(body)
		hash := hex.EncodeToString(sum[:8])
		name := hashedName(f.name, hash)
		d.assets[name] = &docsAsset{body: body, contentType: f.contentType, etag: `"` + hash + `"`}
		served[f.name] = docsAssetPrefix + name
	}
	var buf bytes.Buffer
	err := docsPageTemplate.Execute(&buf, map[string]string{"Spec": docsSpecURL, "Script": served["redoc.standalone.js"],
		"License": served["LICENSE"], "Notices": served["redoc.standalone.js.LICENSE.txt"]})
	if err != nil {
		return nil, fmt.Errorf("docs page: %w", err)
	}
	d.page = buf.Bytes()
	return d, nil
}

// hashedName puts the hash before the name's last extension:
// redoc.standalone.js becomes redoc.standalone.<hash>.js, LICENSE
// LICENSE.<hash>.
func hashedName(name, hash string) string {
	ext := path.Ext(name)
	return strings.TrimSuffix(name, ext) + "." + hash + ext
}

// pageHandler answers GET /docs.
func (d *docsSite) pageHandler(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentSecurityPolicy, docsCSP)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	// The page names the assets by hash: always ask, so a new release's
	// page (and so its bundle) is seen at once.
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Send(d.page)
}

// assetHandler answers GET /docs/assets/:file with one of the embedded
// files, gzipped for a client that takes it; any other name is the
// router's 404.
func (d *docsSite) assetHandler(c *fiber.Ctx) error {
	name := c.Params("file")
	a, ok := d.assets[name]
	// The router also matches name/ (routing is not strict): one URL a file.
	if !ok || c.Path() != docsAssetPrefix+name {
		return fiber.ErrNotFound
	}
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderCacheControl, "public, max-age=31536000, immutable")
	c.Set(fiber.HeaderVary, fiber.HeaderAcceptEncoding)
	// The gzipped body is another representation, with its own ETag.
	gz := c.Request().Header.HasAcceptEncoding("gzip")
	etag, body := a.etag, a.body
	if gz {
		etag = strings.TrimSuffix(a.etag, `"`) + `-gzip"`
	}
	c.Set(fiber.HeaderETag, etag)
	if etagMatches(c.Get(fiber.HeaderIfNoneMatch), etag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	if gz {
		c.Set(fiber.HeaderContentEncoding, "gzip")
		body = a.gzipped()
	}
	c.Set(fiber.HeaderContentType, a.contentType)
	return c.Send(body)
}

// gzipped is the body gzipped, made once.
func (a *docsAsset) gzipped() []byte {
	a.gzOnce.Do(func() {
		var buf bytes.Buffer
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = w.Write(a.body)
		_ = w.Close()
		a.gz = buf.Bytes()
	})
	return a.gz
}

// etagMatches reports whether an If-None-Match header names etag (weak
// comparison, as RFC 9110 13.1.2 asks for GET) or is "*".
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}
