package sanitize

import (
	"strings"
)

// The allowlist: what Sanitize keeps and judge accepts. Anything else is
// removed. The HTML part is what MJML 4.15 emits for every component (each
// one compiled with every attribute it allows) plus the usual email HTML
// (tables, text, links, images, <style>); the MJML part is MJML's own
// components and each component's allowedAttributes, read from the
// compiler's node_modules (mjml-core's registry).

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// htmlElements are kept anywhere.
var htmlElements = set(
	// document
	"html", "head", "body", "title", "meta", "link", "style",
	// sections and blocks
	"address", "article", "aside", "blockquote", "center", "div", "footer", "h1", "h2", "h3",
	"h4", "h5", "h6", "header", "hr", "main", "nav", "p", "pre", "section",
	"figure", "figcaption",
	// lists
	"dd", "dl", "dt", "li", "ol", "ul",
	// text
	"a", "abbr", "acronym", "b", "bdi", "bdo", "big", "br", "cite", "code", "del", "dfn", "em",
	"font", "i", "ins", "kbd", "mark", "q", "rp", "rt", "ruby", "s", "samp", "small", "span",
	"strike", "strong", "sub", "sup", "time", "tt", "u", "var", "wbr",
	// tables
	"caption", "col", "colgroup", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
	// images and image maps
	"img", "map", "area",
	// MJML's CSS-only interactive components (navbar hamburger, carousel,
	// accordion) use checkboxes, radio buttons and labels; see inputTypes.
	"input", "label",
)

// msoElements are Outlook's: kept only inside comments (Outlook renders
// <!--[if mso]>...<![endif]-->, and MJML puts its VML and Office settings
// there). Outside a comment, noscript is dropped with its content.
var msoElements = set(
	"xml", "noscript", "o:officedocumentsettings", "o:allowpng", "o:pixelsperinch",
	"v:fill", "v:image", "v:oval", "v:rect", "v:roundrect", "v:shadow", "v:stroke", "v:textbox",
	"w:anchorlock",
)

// dropWithContent are removed together with everything inside them: script
// and the other raw-text elements a browser may parse differently from the
// tokenizer, foreign content (SVG and MathML, which major email clients do
// not render, and where CDATA sections and namespaces make the tokenizer and
// a browser disagree), frames, plugins, templates and form controls.
var dropWithContent = set(
	"script", "iframe", "noembed", "noframes", "noscript", "xmp", "plaintext", "textarea",
	"svg", "math", "template", "select", "object", "applet", "frameset", "audio", "video",
)

// htmlAttrs are allowed on every allowed element; urlAttrs among them hold
// URLs (urlAllowed), srcset a list of them, style CSS (cssDangerous).
var htmlAttrs = set(
	"abbr", "align", "alt", "axis", "background", "bgcolor", "border", "cellpadding",
	"cellspacing", "char", "charoff", "checked", "class", "clear", "color", "cols", "colspan",
	"compact", "coords", "datetime", "dir", "face", "for", "frame", "headers", "height", "href",
	"hspace", "id", "lang", "leftmargin", "marginheight", "marginwidth", "media", "name",
	"noshade", "nowrap", "rel", "reversed", "role", "rowspan", "rules", "scope", "shape", "size",
	"sizes", "span", "src", "srcset", "start", "style", "summary", "target", "title", "topmargin",
	"type", "usemap", "valign", "vspace", "width", "xml:lang", "xmlns", "xmlns:o", "xmlns:v",
	"xmlns:w",
	// meta, checked by metaAllowed
	"charset", "content", "http-equiv",
)

// msoAttrs are allowed on msoElements as well as htmlAttrs.
var msoAttrs = set(
	"arcsize", "aspect", "color2", "fill", "fillcolor", "inset", "opacity", "origin",
	"position", "stroke", "strokecolor", "strokeweight",
)

var urlAttrs = set("href", "src", "background", "usemap")

// mjmlElements are MJML's components, kept in MJML source only. mj-include
// is not among them: it reads files (and the compiler ignores it anyway).
var mjmlElements = set(
	"mjml", "mj-accordion", "mj-accordion-element", "mj-accordion-text", "mj-accordion-title",
	"mj-all", "mj-attributes", "mj-body", "mj-breakpoint", "mj-button", "mj-carousel",
	"mj-carousel-image", "mj-class", "mj-column", "mj-divider", "mj-font", "mj-group", "mj-head",
	"mj-hero", "mj-html-attribute", "mj-html-attributes", "mj-image", "mj-navbar",
	"mj-navbar-link", "mj-preview", "mj-raw", "mj-section", "mj-selector", "mj-social",
	"mj-social-element", "mj-spacer", "mj-style", "mj-table", "mj-text", "mj-title", "mj-wrapper",
)

// mjmlAttrs are the attributes MJML components allow (the union: mj-all and
// mj-class carry any component's), plus MJML's own (mj-class, css-class,
// owa, lang and dir on <mjml>, path on mj-selector).
var mjmlAttrs = set(
	"align", "alt", "background-color", "background-height", "background-position",
	"background-position-x", "background-position-y", "background-repeat", "background-size",
	"background-url", "background-width", "base-url", "border", "border-bottom", "border-color",
	"border-left", "border-radius", "border-right", "border-style", "border-top", "border-width",
	"cellpadding", "cellspacing", "color", "container-background-color", "direction",
	"fluid-on-mobile", "font-family", "font-size", "font-style", "font-weight", "full-width",
	"hamburger", "height", "href", "ico-align", "ico-close", "ico-color", "ico-font-family",
	"ico-font-size", "ico-line-height", "ico-open", "ico-padding", "ico-padding-bottom",
	"ico-padding-left", "ico-padding-right", "ico-padding-top", "ico-text-decoration",
	"ico-text-transform", "icon-align", "icon-height", "icon-padding", "icon-position",
	"icon-size", "icon-unwrapped-alt", "icon-unwrapped-url", "icon-width", "icon-wrapped-alt",
	"icon-wrapped-url", "inline", "inner-background-color", "inner-border", "inner-border-bottom",
	"inner-border-left", "inner-border-radius", "inner-border-right", "inner-border-top",
	"inner-padding", "inner-padding-bottom", "inner-padding-left", "inner-padding-right",
	"inner-padding-top", "left-icon", "letter-spacing", "line-height", "max-height", "mode",
	"name", "padding", "padding-bottom", "padding-left", "padding-right", "padding-top",
	"position", "rel", "right-icon", "role", "sizes", "src", "srcset", "table-layout", "target",
	"tb-border", "tb-border-radius", "tb-hover-border-color", "tb-selected-border-color",
	"tb-width", "text-align", "text-decoration", "text-padding", "text-transform", "thumbnails",
	"thumbnails-src", "title", "usemap", "vertical-align", "width",
	"mj-class", "css-class", "owa", "lang", "dir", "path",
)

// mjmlURLAttrs hold URLs the compiler copies into href, src or CSS url().
var mjmlURLAttrs = set(
	"href", "src", "background-url", "base-url", "icon-wrapped-url", "icon-unwrapped-url",
	"thumbnails-src", "left-icon", "right-icon", "usemap",
)

// allowedSchemes are the URL schemes kept; relative URLs are kept too.
var allowedSchemes = set("http", "https", "mailto", "tel")

// metaNames and metaHTTPEquiv are the <meta> kinds kept (with charset);
// any other <meta> (refresh above all) goes.
var (
	metaNames     = set("viewport", "color-scheme", "supported-color-schemes", "format-detection", "x-apple-disable-message-reformatting")
	metaHTTPEquiv = set("content-type", "x-ua-compatible")
)

// inputTypes are the <input> kinds MJML emits; other inputs go.
var inputTypes = set("checkbox", "radio")

// elementAllowed reports whether an element (lower-case name) is kept in
// the given context.
func elementAllowed(name string, mjml, inComment bool) bool {
	return htmlElements[name] || inComment && msoElements[name] || mjml && mjmlElements[name]
}

// attrNameAllowed reports whether attribute key (lower-case) is allowed on
// element tag, before its value is looked at.
func attrNameAllowed(tag, key string, inComment bool) bool {
	if strings.HasPrefix(tag, "mj") && mjmlElements[tag] {
		return mjmlAttrs[key]
	}
	if htmlAttrs[key] || strings.HasPrefix(key, "data-") || strings.HasPrefix(key, "aria-") {
		return !strings.HasPrefix(key, "on")
	}
	return inComment && msoElements[tag] && msoAttrs[key]
}

// attrValueAllowed reports whether an allowed attribute's value (decoded)
// may stay.
func attrValueAllowed(tag, key, v string) bool {
	switch {
	case key == "style":
		return !cssDangerous(v)
	case key == "srcset":
		return srcsetAllowed(v)
	case mjmlElements[tag]:
		// MJML copies attribute values into style attributes, href, src
		// and url(): each must pass as CSS, and the URL ones as URLs.
		if mjmlURLAttrs[key] && !urlAllowed(v) {
			return false
		}
		return !cssDangerous(v) && !urlDangerous(v)
	case urlAttrs[key]:
		return urlAllowed(v)
	case key == "content" && tag == "meta":
		return !containsDangerousScheme(v)
	}
	return true
}

// elementAttrsAllowed applies the rules for elements that are kept only
// in some forms: <meta> (charset, viewport and the like), <link> (a style
// sheet), <input> (a checkbox or radio button). attr returns an
// attribute's decoded value and whether it is present.
func elementAttrsAllowed(tag string, attr func(string) (string, bool)) bool {
	switch tag {
	case "meta":
		if v, ok := attr("http-equiv"); ok && !metaHTTPEquiv[strings.ToLower(strings.TrimSpace(v))] {
			return false
		}
		if v, ok := attr("name"); ok && !metaNames[strings.ToLower(strings.TrimSpace(v))] {
			return false
		}
	case "link":
		v, _ := attr("rel")
		return strings.EqualFold(strings.TrimSpace(v), "stylesheet")
	case "input":
		v, _ := attr("type")
		return inputTypes[strings.ToLower(strings.TrimSpace(v))]
	}
	return true
}

// mjmlLeftToMJML reports, in MJML source, an element or attribute the
// allowlist does not have but whose name MJML itself will judge: an
// unknown mj- element or an illegal attribute on one is MJML's
// VALIDATION_ERROR, with MJML's message, and never gets stored.
func mjmlLeftToMJML(tag, key string) bool {
	return strings.HasPrefix(tag, "mj-") && (key == "" || !strings.HasPrefix(key, "on"))
}

// urlAllowed reports whether a URL attribute value (decoded) has an allowed
// scheme or none. A URL holding Liquid is judged by what precedes the
// Liquid: "https://x/{{ path }}" is fixed; "{{ url }}" is decided per
// message by the guard on the rendered HTML, as before.
func urlAllowed(v string) bool {
	if i := liquidStart(v); i >= 0 {
		v = v[:i]
	}
	n := normalizeURL(v, 0)
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c == ':':
			return i == 0 || allowedSchemes[n[:i]]
		case c == '/' || c == '?' || c == '#':
			return true // relative
		case isSchemeChar(c):
		default:
			return true // not a scheme: a relative path
		}
	}
	return true
}

func isSchemeChar(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// srcsetAllowed checks each URL of a srcset list.
func srcsetAllowed(v string) bool {
	for _, cand := range strings.Split(v, ",") {
		if f := strings.Fields(cand); len(f) > 0 && !urlAllowed(f[0]) {
			return false
		}
	}
	return true
}

// liquidStart returns the index of the first "{{" or "{%" in s, or -1.
func liquidStart(s string) int {
	for i := 0; ; {
		k := strings.IndexByte(s[i:], '{')
		if k < 0 || i+k+1 >= len(s) {
			return -1
		}
		i += k + 1
		if s[i] == '{' || s[i] == '%' {
			return i - 1
		}
	}
}

// liquidSpans returns the byte ranges of the Liquid outputs and tags in s
// ("{{ ... }}", "{% ... %}"); an unterminated one runs to the end and is
// marked by a third element of 1.
func liquidSpans(s string) [][3]int {
	var spans [][3]int
	for i := 0; ; {
		k := liquidStart(s[i:])
		if k < 0 {
			return spans
		}
		start := i + k
		closer := "}}"
		if s[start+1] == '%' {
			closer = "%}"
		}
		end := strings.Index(s[start+2:], closer)
		if end < 0 {
			return append(spans, [3]int{start, len(s), 1})
		}
		i = start + 2 + end + 2
		spans = append(spans, [3]int{start, i, 0})
	}
}

// meaninglessName reports attribute names that no element gives a meaning:
// every attribute HTML defines (data-* and aria-* included) is named with
// lower-case letters, digits, "-", "_", ":" and ".". A browser reads Liquid
// inside a tag as attributes ("<a {% if x %}class=y{% endif %}>" has "{%",
// "if", "x", "%}class", ...; href="{{ u | append: "?a=1" }}" has "?a");
// names like "{%" or "?a" mean nothing to it.
func meaninglessName(key string) bool {
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == ':' || c == '.') {
			return true
		}
	}
	return false
}
