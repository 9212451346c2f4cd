package sanitize

import (
	"regexp"
	"strings"
	"testing"
)

func addSanitizeSeeds(f *testing.F) {
	for _, v := range xssVectors {
		f.Add(v.in)
	}
	for _, v := range keptVerbatim {
		f.Add(v.in)
	}
	f.Add(`<a href="java&#x3a;script:x">`)
	f.Add(`<a href="da&#00000000000000000000000000000000000000000116;a:x">`)
	f.Add(`<div style="x:expression&#40;alert(1))">`)
	f.Add(`<div style="background:url(da/* x */ /**/ta:image/png,x)">`)
	f.Add("<style>\n/* header */\n.a { color: red; /* brand */ }\n</style>")
	// An event handler right after a single-quoted value: the tokenizer
	// starts the attribute name at the quote (a mutation audit found the
	// guard's check of "'" untested).
	f.Add(`<a title='x'onclick=alert(1)>`)
}

// FuzzSanitize checks that Sanitize's output has nothing findDanger objects
// to and that a second Sanitize changes nothing.
//
//	go test -run '^$' -fuzz FuzzSanitize -fuzztime 60s ./render/
func FuzzSanitize(f *testing.F) {
	addSanitizeSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		out, changed := HTML(in)
		if changed != (out != in) {
			t.Fatalf("changed=%v but output %q for %q", changed, out, in)
		}
		if d := findDanger(out); d != "" {
			t.Fatalf("HTML(%q) = %q still has %s", in, out, d)
		}
		if again, _ := HTML(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
	})
}

// FuzzMayNeedSanitize checks the claim rendering relies on: when
// MayNeed says no, the HTML holds nothing that could run script
// (findScript, which does not count on* attributes without a value: they
// run nothing, and the guard does not look for them).
//
//	go test -run '^$' -fuzz FuzzMayNeedSanitize -fuzztime 60s ./internal/render/
func FuzzMayNeedSanitize(f *testing.F) {
	addSanitizeSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		if MayNeed(in) {
			return
		}
		if d := findScript(in); d != "" {
			t.Fatalf("MayNeed(%q) = false, but it has %s", in, d)
		}
	})
}

func TestMayNeedSanitize(t *testing.T) {
	t.Parallel()
	for _, v := range xssVectors {
		if findScript(v.in) != "" && !MayNeed(v.in) {
			t.Errorf("MayNeed misses %s: %q", v.desc, v.in)
		}
	}
	// Ordinary messages must take the fast path.
	for _, tt := range []struct{ desc, in string }{
		{"compiled newsletter", compiledNewsletter(t)},
		{"links and entities", `<a href="https://x.example/?a=1&amp;b=2">Tom&#39;s &nbsp;shop&hellip;</a>`},
		{"inline css", `<td style="font-size:0px;padding:10px 25px;font-family:Ubuntu, Helvetica, Arial, sans-serif;">`},
		{"mso comments", `<!--[if mso | IE]><table role="presentation"><tr><td><![endif]-->`},
		{"css comments", "<style>\n/* Header */\n.hdr { color: #333; /* brand */ }\n@media (max-width: 480px) { /* mobile */ .a { width: 100% } }\n</style>"},
	} {
		if MayNeed(tt.in) {
			t.Errorf("MayNeed(%s) = true, want the fast path", tt.desc)
		}
	}
}

// FuzzSanitizeMJML is FuzzSanitize for MJML source, as Prepare saves it
// (content starting with <mjml): the output is clean to the HTML5 judge in
// MJML mode and to findScript, and a second MJML changes nothing.
//
//	go test -run '^$' -fuzz FuzzSanitizeMJML -fuzztime 5m ./internal/render/
//
// leftToMJML matches a judge finding about an attribute name (not its
// value) on an mj- element, other than an event handler.
var leftToMJML = regexp.MustCompile(`^attribute (?:[^o=][^=]*|o[^n=][^=]*|o) on <mj-[a-z-]+>$`)

func FuzzSanitizeMJML(f *testing.F) {
	wrap := func(s string) string {
		return `<mjml><mj-head><mj-style>.a{color:red}</mj-style></mj-head><mj-body><mj-section><mj-column><mj-text>` +
			s + `</mj-text></mj-column></mj-section></mj-body></mjml>`
	}
	for _, v := range cdataVectors {
		f.Add(wrap(v.Vector))
	}
	for _, v := range xssVectors {
		f.Add(wrap(v.in))
	}
	f.Add(`<mjml><mj-body><mj-raw><script>alert(1)</script></mj-raw><mj-button href="javascript:alert(1)">x</mj-button></mj-body></mjml>`)
	f.Add(`<mjml><mj-head><mj-style>a{background:url(javascript:alert(1))}</mj-style><mj-attributes><mj-all font-family="x" /></mj-attributes>` +
		`<mj-html-attributes><mj-selector path=".a"><mj-html-attribute name="onclick">alert(1)</mj-html-attribute></mj-selector></mj-html-attributes></mj-head>` +
		`<mj-body><mj-image src="{{ u }}" href="data:text/html,x" /></mj-body></mjml>`)
	f.Fuzz(func(t *testing.T, in string) {
		out, changed := MJML(in)
		if changed != (out != in) {
			t.Fatalf("changed=%v but output %q for %q", changed, out, in)
		}
		// Unknown mj- elements, and attributes of mj- elements that are not
		// event handlers (mjmlLeftToMJML), are left for MJML's validator,
		// which Prepare runs before judge and which refuses them in its
		// own words.
		if d := Judge(out, Mode{MJML: true, Liquid: true}); d != "" && !strings.Contains(d, "element <mj-") &&
			!leftToMJML.MatchString(d) {
			t.Fatalf("MJML(%q) = %q: %s", in, out, d)
		}
		if d := findScript(out); d != "" {
			t.Fatalf("MJML(%q) = %q: %s", in, out, d)
		}
		if again, _ := MJML(out); again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
		}
	})
}
