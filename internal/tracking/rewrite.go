package tracking

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"io"
	"strings"

	"golang.org/x/net/html"
)

// Rewrite returns the rendered HTML of one message with its links tracked
// and the open pixel added (ADDENDUM section 8). It runs once per recipient,
// so it makes one pass of the HTML5 tokenizer and copies everything it does
// not change from src byte for byte.
//
//   - The first href of every <a> element is rewritten to base/t/c/<token>
//     when, after the clean-up browsers do (CleanLink), it is an absolute
//     http or https URL. mailto:, tel:, javascript:, fragments, relative
//     links and links longer than MaxURLLen are left alone: the redirect
//     only ever goes where the email linked.
//   - Links that already point under base/t/ are left alone: the
//     unsubscribe link in particular stays a direct link, so following it
//     is not counted as a click (and is not wrapped twice).
//   - A rewritten <a> tag is written anew: lower-case attribute names,
//     double-quoted escaped values, a later duplicate href dropped (it never
//     applied, and a parser that takes the last one would bypass tracking),
//     and attributes with names no HTML serialiser would emit dropped. Every
//     other byte, including untouched <a> tags, is kept.
//   - The pixel goes just before the first </body>, or at the end if there
//     is none.
//
// Tags inside <script>, <style>, <textarea>, <title> and the other raw-text
// elements are text to the tokenizer as they are to a browser, and are not
// touched. The tokenizer assumes scripting is on, so an <a> inside
// <noscript> is left as it is.
func Rewrite(src, base string, s *Signer, ids IDs) (string, error) {
	base = strings.TrimRight(base, "/")
	openToken, err := s.OpenToken(ids)
	if err != nil {
		return "", err
	}
	pixel := `<img src="` + html.EscapeString(OpenURL(base, openToken)) +
		`" width="1" height="1" alt="" style="display:none">`

	rw := anchorRewriter{
		signer:    s,
		ids:       IDs{TenantID: ids.TenantID, SendID: ids.SendID},
		baseAttr:  html.EscapeString(base),
		ownPrefix: base + "/t/",
		mac:       hmac.New(sha256.New, s.key),
	}
	var out strings.Builder
	out.Grow(len(src) + len(src)/4 + len(pixel))
	z := html.NewTokenizer(strings.NewReader(src))
	// pos is the offset in src of the current token: tokens are contiguous,
	// so it is the sum of the raw lengths so far. last is how much of src
	// has been copied to out.
	pos, last, pixelDone := 0, 0, false
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if err := z.Err(); err != io.EOF {
				return "", err
			}
			break
		}
		raw := z.Raw()
		start := pos
		pos += len(raw)
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			if !tagIs(raw[1:], "a") {
				continue
			}
			if tag, ok := rw.rewrite(z, tt == html.SelfClosingTagToken, raw); ok {
				out.WriteString(src[last:start])
				out.WriteString(tag)
				last = pos
			}
		case html.EndTagToken:
			if !pixelDone && len(raw) > 2 && tagIs(raw[2:], "body") {
				out.WriteString(src[last:start])
				out.WriteString(pixel)
				last = start
				pixelDone = true
			}
		}
	}
	out.WriteString(src[last:])
	if !pixelDone {
		out.WriteString(pixel)
	}
	return out.String(), nil
}

// tagIs reports whether b, the bytes after "<" or "</" of a tag, start with
// the tag name name (lower case) followed by what ends a tag name. It saves
// the tokenizer's TagName, which allocates, on every tag that is not ours.
func tagIs(b []byte, name string) bool {
	if len(b) < len(name) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if b[i]|0x20 != name[i] {
			return false
		}
	}
	if len(b) == len(name) {
		return true
	}
	switch b[len(name)] {
	case ' ', '\t', '\n', '\f', '\r', '/', '>':
		return true
	}
	return false
}

type anchorRewriter struct {
	signer    *Signer
	ids       IDs
	baseAttr  string // base, escaped for an attribute value
	ownPrefix string
	mac       hash.Hash // reused across the links of one message
	buf       []byte
}

// rewrite returns the new text of the current <a> tag if its href is
// tracked, or false to keep the original bytes. It appends straight into
// one reused buffer: it runs for every link of every recipient.
func (rw *anchorRewriter) rewrite(z *html.Tokenizer, selfClosing bool, raw []byte) (string, bool) {
	_, more := z.TagName()
	b := append(rw.buf[:0], "<a"...)
	seenHref, tracked := false, false
	var val []byte
	for more {
		var key []byte
		key, val, more = z.TagAttr()
		isHref := string(key) == "href" // no allocation: compared in place
		if isHref && seenHref {
			continue
		}
		if !plainAttrName(key) {
			continue
		}
		b = append(b, ' ')
		b = append(b, key...)
		b = append(b, `="`...)
		if isHref {
			seenHref = true
			link, ok := CleanLink(string(val))
			if !ok || strings.HasPrefix(link, rw.ownPrefix) {
				return "", false
			}
			b = append(b, rw.baseAttr...)
			b = append(b, ClickPath...)
			var err error
			b, err = rw.signer.appendToken(b, rw.mac, Claims{Kind: KindClick, IDs: rw.ids, URL: link})
			if err != nil {
				return "", false
			}
			tracked = true
		} else {
			b = appendAttrEscaped(b, val)
		}
		b = append(b, '"')
	}
	if !tracked {
		return "", false
	}
	if selfClosing && slashClosesTag(raw, string(val)) {
		b = append(b, " />"...)
	} else {
		b = append(b, '>')
	}
	rw.buf = b
	return string(b), true
}

// appendAttrEscaped appends v escaped for a double-quoted attribute value,
// with the same escapes as html.EscapeString.
func appendAttrEscaped(b, v []byte) []byte {
	for _, c := range v {
		switch c {
		case '&':
			b = append(b, "&amp;"...)
		case '"':
			b = append(b, "&#34;"...)
		case '\'':
			b = append(b, "&#39;"...)
		case '<':
			b = append(b, "&lt;"...)
		case '>':
			b = append(b, "&gt;"...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// slashClosesTag reports whether the "/" before the ">" of a tag the
// tokenizer calls self-closing really is the self-closing flag, given the
// last attribute value. The tokenizer says self-closing whenever the tag
// ends in "/>", but in <a href=x/> a browser reads the "/" as part of the
// unquoted value. For an HTML <a> the flag means nothing; inside <svg> it
// decides whether the link element stays open, so it is kept only when a
// browser would see it: after a quoted value, or a value not ending in "/".
func slashClosesTag(raw []byte, lastVal string) bool {
	if !strings.HasSuffix(lastVal, "/") || len(raw) < 4 {
		return true
	}
	q := raw[len(raw)-3]
	if q != '"' && q != '\'' {
		return false // unquoted value ending in "/"
	}
	// A quoted value ending in "/" ("x/"/>), unless the quote itself ended
	// an unquoted value (href=x"/>).
	return !strings.HasSuffix(lastVal, string(q)+"/")
}

// plainAttrName reports whether an attribute name, as the tokenizer
// returned it, reads back as the same name when written unquoted. Names
// such as `"x` or `<y` are parse errors the tokenizer tolerates; writing
// them out again could change how the tag parses, so they are dropped.
func plainAttrName(k []byte) bool {
	if len(k) == 0 {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c <= 0x20, c == 0x7f, c == '"', c == '\'', c == '<', c == '>', c == '/', c == '=', c == '`':
			return false
		}
	}
	return true
}
