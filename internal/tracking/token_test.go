package tracking

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

var testIDs = IDs{TenantID: "ten_01j9zyx0abcdefghjkmnpqrstv", SendID: "snd_01j9zyx0abcdefghjkmnpqrstv", ContactID: "cnt_01j9zyx0abcdefghjkmnpqrstv"}

func newSigner(t testing.TB, secret string) *Signer {
	t.Helper()
	s, err := NewSigner([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewSignerEmptySecret(t *testing.T) {
	t.Parallel()
	if _, err := NewSigner(nil); err == nil {
		t.Fatal("want error for an empty secret")
	}
}

func TestTokenRoundTrip(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "secret")
	open, err := s.OpenToken(testIDs)
	if err != nil {
		t.Fatal(err)
	}
	click, err := s.ClickToken(testIDs, "https://example.com/a?b=1&c=%20#frag")
	if err != nil {
		t.Fatal(err)
	}
	unsub, err := s.UnsubscribeToken(testIDs)
	if err != nil {
		t.Fatal(err)
	}
	send := IDs{TenantID: testIDs.TenantID, SendID: testIDs.SendID}
	tests := []struct {
		desc  string
		kind  Kind
		token string
		want  Claims
	}{
		{desc: "open", kind: KindOpen, token: open, want: Claims{Kind: KindOpen, IDs: send}},
		{desc: "click", kind: KindClick, token: click, want: Claims{Kind: KindClick, IDs: send, URL: "https://example.com/a?b=1&c=%20#frag"}},
		{desc: "unsubscribe", kind: KindUnsubscribe, token: unsub, want: Claims{Kind: KindUnsubscribe, IDs: testIDs}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			got, err := s.Parse(tt.kind, tt.token)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if strings.Trim(tt.token, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
				t.Fatalf("token %q is not base64url", tt.token)
			}
		})
	}
	if len(open) > 120 {
		t.Errorf("open token is %d characters; want a compact token", len(open))
	}
}

func TestTokenDeterministic(t *testing.T) {
	t.Parallel()
	a, _ := newSigner(t, "secret").OpenToken(testIDs)
	b, _ := newSigner(t, "secret").OpenToken(testIDs)
	if a != b {
		t.Fatal("same secret and claims must give the same token")
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "secret")
	other := newSigner(t, "other secret")
	open, _ := s.OpenToken(testIDs)
	click, _ := s.ClickToken(testIDs, "https://example.com/")
	unsub, _ := s.UnsubscribeToken(testIDs)
	otherOpen, _ := other.OpenToken(testIDs)

	// A body signed with the right key but an unknown version: only the
	// version check can refuse it.
	body := append([]byte{2, byte(KindOpen)}, []byte("\x03ten\x03snd")...)
	m := hmac.New(sha256.New, s.key)
	m.Write(body)
	v2 := base64.RawURLEncoding.EncodeToString(append(body, m.Sum(nil)[:macLen]...))
	// Trailing bytes after the fields, correctly signed.
	body = append([]byte{1, byte(KindOpen)}, []byte("\x03ten\x03sndX")...)
	m.Reset()
	m.Write(body)
	trailing := base64.RawURLEncoding.EncodeToString(append(body, m.Sum(nil)[:macLen]...))

	tests := []struct {
		desc  string
		kind  Kind
		token string
	}{
		{desc: "empty", kind: KindOpen, token: ""},
		{desc: "other key", kind: KindOpen, token: otherOpen},
		{desc: "open as click", kind: KindClick, token: open},
		{desc: "open as unsubscribe", kind: KindUnsubscribe, token: open},
		{desc: "click as open", kind: KindOpen, token: click},
		{desc: "unsubscribe as open", kind: KindOpen, token: unsub},
		{desc: "unknown kind", kind: Kind(9), token: open},
		{desc: "truncated by one", kind: KindOpen, token: open[:len(open)-1]},
		{desc: "truncated by four", kind: KindOpen, token: open[:len(open)-4]},
		{desc: "first half", kind: KindOpen, token: open[:len(open)/2]},
		{desc: "extended", kind: KindOpen, token: open + "AAAA"},
		{desc: "padded", kind: KindOpen, token: open + "="},
		{desc: "newline appended", kind: KindOpen, token: open + "\n"},
		{desc: "carriage return inside", kind: KindOpen, token: open[:5] + "\r" + open[5:]},
		{desc: "std alphabet", kind: KindOpen, token: strings.NewReplacer("-", "+", "_", "/").Replace(open) + "+"},
		{desc: "whitespace", kind: KindOpen, token: " " + open},
		{desc: "not base64", kind: KindOpen, token: "%%%%"},
		{desc: "too long", kind: KindClick, token: strings.Repeat("A", MaxTokenLen+4)},
		{desc: "version 2", kind: KindOpen, token: v2},
		{desc: "trailing bytes", kind: KindOpen, token: trailing},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			if c, err := s.Parse(tt.kind, tt.token); err != ErrInvalidToken {
				t.Fatalf("Parse accepted %q: %+v, %v", tt.token, c, err)
			}
		})
	}
}

// Every single-character change of a token is refused, including changes
// to the last character's unused bits (non-canonical base64).
func TestParseRejectsEveryTamperedCharacter(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "secret")
	for _, kind := range []Kind{KindOpen, KindClick, KindUnsubscribe} {
		var token string
		switch kind {
		case KindOpen:
			token, _ = s.OpenToken(testIDs)
		case KindClick:
			token, _ = s.ClickToken(testIDs, "https://example.com/x")
		case KindUnsubscribe:
			token, _ = s.UnsubscribeToken(testIDs)
		}
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		for i := range token {
			for _, c := range alphabet {
				if byte(c) == token[i] {
					continue
				}
				tampered := token[:i] + string(c) + token[i+1:]
				if _, err := s.Parse(kind, tampered); err == nil {
					t.Fatalf("%v: tampered token %q accepted", kind, tampered)
				}
			}
		}
	}
}

// A click token cannot be made to redirect anywhere else: swapping the URL
// bytes inside the token, even keeping its length, breaks the MAC.
func TestClickTokenBindsURL(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "secret")
	token, _ := s.ClickToken(testIDs, "https://example.com/")
	raw, _ := base64.RawURLEncoding.DecodeString(token)
	i := strings.Index(string(raw), "example.com")
	for _, evil := range []string{"evilxxx.com", "example.co/", "EXAMPLE.COM"} {
		b := append([]byte(nil), raw...)
		copy(b[i:], evil)
		if c, err := s.Parse(KindClick, base64.RawURLEncoding.EncodeToString(b)); err == nil {
			t.Fatalf("modified click token accepted: %+v", c)
		}
	}
}

func TestTokenInputErrors(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "secret")
	long := strings.Repeat("x", MaxIDLen+1)
	tests := []struct {
		desc string
		make func() (string, error)
	}{
		{desc: "open without send", make: func() (string, error) { return s.OpenToken(IDs{TenantID: "t"}) }},
		{desc: "open without tenant", make: func() (string, error) { return s.OpenToken(IDs{SendID: "s"}) }},
		{desc: "open long id", make: func() (string, error) { return s.OpenToken(IDs{TenantID: long, SendID: "s"}) }},
		{desc: "unsubscribe without contact", make: func() (string, error) { return s.UnsubscribeToken(IDs{TenantID: "t", SendID: "s"}) }},
		{desc: "unsubscribe long contact", make: func() (string, error) {
			return s.UnsubscribeToken(IDs{TenantID: "t", SendID: "s", ContactID: long})
		}},
		{desc: "click javascript", make: func() (string, error) { return s.ClickToken(testIDs, "javascript:alert(1)") }},
		{desc: "click ftp", make: func() (string, error) { return s.ClickToken(testIDs, "ftp://example.com/") }},
		{desc: "click relative", make: func() (string, error) { return s.ClickToken(testIDs, "/path") }},
		{desc: "click no host", make: func() (string, error) { return s.ClickToken(testIDs, "http:///path") }},
		{desc: "click opaque", make: func() (string, error) { return s.ClickToken(testIDs, "http:example.com") }},
		{desc: "click CRLF", make: func() (string, error) { return s.ClickToken(testIDs, "https://example.com/\r\nSet-Cookie: a=b") }},
		{desc: "click NUL", make: func() (string, error) { return s.ClickToken(testIDs, "https://example.com/\x00") }},
		{desc: "click too long", make: func() (string, error) {
			return s.ClickToken(testIDs, "https://example.com/"+strings.Repeat("a", MaxURLLen))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			if tok, err := tt.make(); err == nil {
				t.Fatalf("want error, got token %q", tok)
			}
		})
	}
}

func TestLongestClickTokenFitsMaxTokenLen(t *testing.T) {
	t.Parallel()
	s := newSigner(t, "secret")
	long := strings.Repeat("x", MaxIDLen)
	u := "https://example.com/" + strings.Repeat("a", MaxURLLen-len("https://example.com/"))
	tok, err := s.ClickToken(IDs{TenantID: long, SendID: long}, u)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) > MaxTokenLen {
		t.Fatalf("token of %d > MaxTokenLen %d", len(tok), MaxTokenLen)
	}
	if c, err := s.Parse(KindClick, tok); err != nil || c.URL != u {
		t.Fatalf("Parse: %+v, %v", c, err)
	}
}

func TestCleanLink(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc   string
		href   string
		want   string
		wantOK bool
	}{
		{desc: "plain", href: "https://example.com/a", want: "https://example.com/a", wantOK: true},
		{desc: "upper scheme", href: "HTTP://Example.com/A", want: "HTTP://Example.com/A", wantOK: true},
		{desc: "mixed scheme", href: "hTtPs://example.com", want: "hTtPs://example.com", wantOK: true},
		{desc: "surrounding space", href: " \n\t https://example.com/ \r\n", want: "https://example.com/", wantOK: true},
		{desc: "newline inside", href: "https://exa\nmple.com/p\tq", want: "https://example.com/pq", wantOK: true},
		{desc: "leading control", href: "\x01https://example.com/", want: "https://example.com/", wantOK: true},
		{desc: "mailto", href: "mailto:a@example.com"},
		{desc: "tel", href: "tel:+123"},
		{desc: "fragment", href: "#top"},
		{desc: "relative", href: "/a/b"},
		{desc: "protocol relative", href: "//example.com/"},
		{desc: "javascript", href: "javascript:alert(1)"},
		{desc: "javascript with tab", href: "java\tscript:alert(1)"},
		{desc: "data", href: "data:text/html,hi"},
		{desc: "no host", href: "http://"},
		{desc: "opaque http", href: "http:example.com"},
		{desc: "backslashes", href: `http:\\example.com`},
		{desc: "inner NUL", href: "https://example.com/a\x00b"},
		{desc: "trailing NUL trimmed", href: "https://example.com/\x00", want: "https://example.com/", wantOK: true},
		{desc: "empty", href: ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			t.Parallel()
			got, ok := CleanLink(tt.href)
			if ok != tt.wantOK || (ok && got != tt.want) {
				t.Fatalf("CleanLink(%q) = %q, %v; want %q, %v", tt.href, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestURLsAndHeaders(t *testing.T) {
	t.Parallel()
	if got := UnsubscribeURL("https://t.example.com/", "TOK"); got != "https://t.example.com/t/u/TOK" {
		t.Fatalf("UnsubscribeURL = %q", got)
	}
	if got := OpenURL("https://t.example.com", "TOK"); got != "https://t.example.com/t/o/TOK" {
		t.Fatalf("OpenURL = %q", got)
	}
	if got := ClickURL("https://t.example.com", "TOK"); got != "https://t.example.com/t/c/TOK" {
		t.Fatalf("ClickURL = %q", got)
	}
	h := ListUnsubscribeHeaders("https://t.example.com/t/u/TOK")
	if len(h) != 2 || h["List-Unsubscribe"] != "<https://t.example.com/t/u/TOK>" ||
		h["List-Unsubscribe-Post"] != "List-Unsubscribe=One-Click" {
		t.Fatalf("headers = %v", h)
	}
}

func FuzzParseToken(f *testing.F) {
	s, err := NewSigner([]byte("fuzz secret"))
	if err != nil {
		f.Fatal(err)
	}
	open, _ := s.OpenToken(testIDs)
	click, _ := s.ClickToken(testIDs, "https://example.com/a?b=c")
	unsub, _ := s.UnsubscribeToken(testIDs)
	for _, tok := range []string{open, click, unsub, "", "AAAA", open[:10], click + "A"} {
		for k := range 4 {
			f.Add(byte(k), tok)
		}
	}
	f.Fuzz(func(t *testing.T, kind byte, token string) {
		c, err := s.Parse(Kind(kind), token)
		if err != nil {
			if err != ErrInvalidToken {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		// Accepted: then the token must be exactly what the signer makes
		// for these claims, so no variation of a real token gets through.
		again, err := s.sign(nil, c)
		if err != nil || again != token {
			t.Fatalf("accepted %q, but signing its claims %+v gives %q (%v)", token, c, again, err)
		}
	})
}

// FuzzTokenTamper signs a token for fuzzed ids (and URL), then changes it:
// one byte of its payload or MAC (xor mask), a character of its text, a
// cut, or bytes appended. Only the untouched token verifies, to exactly
// its claims, for its own kind and key; every changed one is refused.
//
//	go test -run '^$' -fuzz FuzzTokenTamper -fuzztime 5m ./internal/tracking/
func FuzzTokenTamper(f *testing.F) {
	f.Add(byte(KindClick), "ten_1", "snd_1", "cnt_1", "https://example.com/a?b=c", uint16(3), byte(1), "")
	f.Add(byte(KindOpen), "t", "s", "", "", uint16(0), byte(0x80), "A")
	f.Add(byte(KindUnsubscribe), "ten_"+strings.Repeat("x", 60), "snd_\x00", "cnt_\xff", "", uint16(200), byte(0xff), "==")
	f.Add(byte(KindClick), "a", "b", "c", "http://x/"+strings.Repeat("y", 2000), uint16(1000), byte(4), "AAAA")
	s, err := NewSigner([]byte("fuzz secret"))
	if err != nil {
		f.Fatal(err)
	}
	other, _ := NewSigner([]byte("another secret"))
	f.Fuzz(func(t *testing.T, kind byte, tenant, send, contact, target string, at uint16, mask byte, suffix string) {
		k := Kind(kind%3 + 1)
		ids := IDs{TenantID: tenant, SendID: send, ContactID: contact}
		var tok string
		var err error
		switch k {
		case KindOpen:
			tok, err = s.OpenToken(ids)
			ids.ContactID = ""
		case KindClick:
			tok, err = s.ClickToken(ids, target)
			ids.ContactID = ""
		case KindUnsubscribe:
			tok, err = s.UnsubscribeToken(ids)
		}
		if err != nil {
			return // ids or URL a token cannot carry
		}
		c, err := s.Parse(k, tok)
		if err != nil || c.IDs != ids || c.Kind != k || (k == KindClick && c.URL != target) {
			t.Fatalf("own token: %+v %v, want %+v", c, err, ids)
		}
		for _, wrong := range []Kind{KindOpen, KindClick, KindUnsubscribe} {
			if _, err := s.Parse(wrong, tok); wrong != k && err == nil {
				t.Fatalf("a %v token verifies as %v", k, wrong)
			}
		}
		if _, err := other.Parse(k, tok); err == nil {
			t.Fatal("verifies under another key")
		}
		refused := func(how, changed string) {
			t.Helper()
			if changed == tok {
				return
			}
			if c, err := s.Parse(k, changed); err == nil {
				t.Fatalf("%s: %q verifies as %+v (original %q)", how, changed, c, tok)
			}
		}
		raw, _ := base64.RawURLEncoding.DecodeString(tok)
		if mask != 0 {
			b := []byte(raw)
			b[int(at)%len(b)] ^= mask
			refused("payload byte changed", base64.RawURLEncoding.EncodeToString(b))
		}
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		i := int(at) % len(tok)
		refused("character changed", tok[:i]+string(alphabet[int(mask)%64])+tok[i+1:])
		refused("cut", tok[:i])
		refused("appended", tok+suffix)
		refused("inserted", tok[:i]+suffix+tok[i:])
	})
}
