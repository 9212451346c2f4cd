// Package sanitize keeps, of HTML and MJML that tenants write, only what an
// allowlist allows (HTML from what MJML emits plus usual email HTML, MJML's
// own elements and attributes, URL schemes http, https, mailto, tel), and
// judges the result the way a browser will read it.
//
//   - HTML and MJML sanitise source byte for byte on tokens: anything
//     outside the list goes (script-like elements with their content), the
//     rest is kept exactly as written, so content with nothing to strip is
//     stored as given.
//   - Judge parses with the HTML5 tree builder (golang.org/x/net/html, SVG
//     and MathML included) and walks the tree against the same list: a
//     disagreement between the tokenizer and a browser is refused, not
//     stored.
//   - MayNeed is the cheap check of every rendered message: it says whether
//     values or Liquid logic could have added something HTML would remove;
//     Again re-sanitises a version saved under an older sanitiser, and
//     Clean makes a rendered message safe (falling back to rebuilding it
//     from the browser's tree).
//
// It does no I/O and knows nothing of Liquid beyond leaving its syntax in
// attributes alone (Mode.Liquid). The XSS corpus (testdata/xss) and the
// fuzz targets live here with it.
package sanitize
