// Package render turns a template's stored source into per-recipient
// messages. Its only I/O is the MJML compiler Prepare is given.
//
// Saving a template (PUT /api/templates/{id}) calls Prepare: the content is
// sanitised by allowlist (package sanitize: HTML, MJML) and stored
// as given otherwise; raw HTML is wrapped in MJML; the MJML is compiled
// once; the compiled HTML is sanitised too and kept with its Liquid for
// sending; Prepared.RequiredVariables lists what subject and content read. The
// sanitiser works on tokens, byte for byte; sanitize.Judge then parses the stored
// content and the compiled HTML the way a browser does (the HTML5 tree
// builder, foreign content included) and walks the tree, so that a
// disagreement between tokenizer and browser is refused, not stored.
// Whatever MJML, Liquid or the judge rejects is a *ValidationError.
//
// Sending calls Renderer.Render with the bindings of Context.Bindings (or
// BindingsForPreview for a preview). Liquid runs in package liquid, the
// bounded runtime: standard, non-strict Liquid (github.com/osteele/liquid),
// where a missing variable is empty, and values are inserted as they are;
// a template applies `| escape` to text it does not trust. What values or Liquid logic could add that sanitize.HTML would remove
// (a <script> in a contact property, a javascript: URL in a variable) is
// caught by a cheap check of every rendered message, and only then is the
// message sanitised (and judged, and rebuilt from the browser's tree if
// need be). A version saved under an older sanitiser is sanitised and
// judged again when a Renderer first parses it. The text part is what
// HTMLToText makes of the HTML.
//
// Templates come from tenants, so a render has a budget of loop iterations,
// string bytes made by filters and capture, output bytes and time (one
// liquid.Budget for the subject, HTML and text of a message), and stops
// with a *liquid.LimitError (liquid.ErrBudget) naming the field when a
// template needs more, or when the caller's context ends.
//
// Rendering is built to send thousands of messages a second from one
// template version: each version is parsed once, its long runs of literal
// HTML are set aside so that Liquid and the check see only their ends, and
// its text is converted from HTML once, leaving the values to fill in
// (see skeleton).
package render
