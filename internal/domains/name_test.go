package domains_test

import (
	"strings"
	"testing"

	"tidings/internal/domains"
)

func TestNormalize(t *testing.T) {
	t.Parallel()
	long := func(n int) string { // a name of n characters in 50-character labels
		var labels []string
		for n > 0 {
			l := min(n, 50)
			labels = append(labels, strings.Repeat("a", l))
			n -= l + 1
		}
		return strings.Join(labels, ".")
	}
	for _, tc := range []struct {
		desc, in, want, msg string
	}{
		{desc: "plain", in: "example.com", want: "example.com"},
		{desc: "trimmed and lower-cased", in: "  Mail.Example.COM \n", want: "mail.example.com"},
		{desc: "trailing dot dropped", in: "example.com.", want: "example.com"},
		{desc: "IDN to punycode", in: "Bücher.example", want: "xn--bcher-kva.example"},
		{desc: "punycode kept", in: "xn--bcher-kva.example", want: "xn--bcher-kva.example"},
		{desc: "inner hyphen", in: "my-shop.co.uk", want: "my-shop.co.uk"},
		{desc: "longest allowed", in: long(215), want: long(215)},
		{desc: "empty", in: "  ", msg: "is required"},
		{desc: "one label", in: "localhost", msg: "at least two labels"},
		{desc: "IPv4", in: "192.0.2.1", msg: "not an IP address"},
		{desc: "IPv6", in: "[2001:db8::1]", msg: "not an IP address"},
		{desc: "numeric top label", in: "example.123", msg: "not an IP address"},
		{desc: "underscore", in: "my_shop.com", msg: "not a valid domain name"},
		{desc: "leading hyphen", in: "-shop.com", msg: "not a valid domain name"},
		{desc: "trailing hyphen", in: "shop-.com", msg: "not a valid domain name"},
		{desc: "empty label", in: "shop..com", msg: "not a valid domain name"},
		{desc: "label of 64", in: strings.Repeat("a", 64) + ".com", msg: "not a valid domain name"},
		{desc: "email", in: "me@example.com", msg: "not a valid domain name"},
		{desc: "URL", in: "https://example.com/", msg: "not a valid domain name"},
		{desc: "space inside", in: "exa mple.com", msg: "not a valid domain name"},
		{desc: "too long for DKIM records", in: long(216), msg: "too long to carry its DKIM records"},
		{desc: "over 253", in: long(254), msg: "at most 253"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, msg := domains.Normalize(tc.in)
			if got != tc.want || (tc.msg == "") != (msg == "") || !strings.Contains(msg, tc.msg) {
				t.Fatalf("Normalize(%q) = %q, %q; want %q, %q", tc.in, got, msg, tc.want, tc.msg)
			}
		})
	}
}
