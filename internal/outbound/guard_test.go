package outbound

import (
	"context"
	"net/netip"
	"testing"
)

// denied has one address inside each range a webhook may not reach: every
// entry of the IANA IPv4 and IPv6 special-purpose address registries, and
// the IPv6 ranges outside global unicast (2000::/3) that netip's
// predicates let through. Each row names its range, so a range dropped
// from the guard fails its row (a mutation audit found nine ranges whose
// removal failed nothing).
var denied = []struct{ prefix, addr string }{
	// IPv4 special-purpose registry.
	{"0.0.0.0/8", "0.1.2.3"},
	{"10.0.0.0/8", "10.0.0.1"},
	{"100.64.0.0/10", "100.127.255.254"},
	{"127.0.0.0/8", "127.1.2.3"},
	{"169.254.0.0/16", "169.254.169.254"},
	{"172.16.0.0/12", "172.31.5.4"},
	{"192.0.0.0/24", "192.0.0.9"},
	{"192.0.2.0/24", "192.0.2.10"},
	{"192.31.196.0/24", "192.31.196.1"},
	{"192.52.193.0/24", "192.52.193.1"},
	{"192.88.99.0/24", "192.88.99.1"},
	{"192.168.0.0/16", "192.168.1.1"},
	{"192.175.48.0/24", "192.175.48.6"},
	{"198.18.0.0/15", "198.19.0.1"},
	{"198.51.100.0/24", "198.51.100.7"},
	{"203.0.113.0/24", "203.0.113.9"},
	{"224.0.0.0/4", "239.1.2.3"},
	{"240.0.0.0/4", "240.0.0.1"},
	{"255.255.255.255/32", "255.255.255.255"},
	// IPv6 special-purpose registry.
	{"::/128", "::"},
	{"::1/128", "::1"},
	{"::ffff:0:0/96", "::ffff:10.1.1.1"}, // IPv4-mapped: judged as its IPv4
	{"64:ff9b::/96", "64:ff9b::a00:1"},   // NAT64, well-known: judged as its IPv4 (10.0.0.1)
	{"64:ff9b:1::/48", "64:ff9b:1::808:808"},
	{"100::/64", "100::1"},
	{"100:0:0:1::/64", "100:0:0:1::1"},
	{"2001::/23", "2001:1::1"},
	{"2001::/32", "2001:0:4136:e378:8000:63bf:3fff:fdd2"}, // Teredo
	{"2001:2::/48", "2001:2::1"},
	{"2001:3::/32", "2001:3::1"},
	{"2001:4:112::/48", "2001:4:112::1"},
	{"2001:20::/28", "2001:20::1"},
	{"2001:30::/28", "2001:30::1"},
	{"2001:db8::/32", "2001:db8::1"},
	{"2002::/16", "2002:808:808::1"}, // 6to4: refused, even of a public IPv4
	{"2620:4f:8000::/48", "2620:4f:8000::1"},
	{"3fff::/20", "3fff::1"},
	{"5f00::/16", "5f00::1"},
	{"fc00::/7", "fd00::1"},
	{"fe80::/10", "fe80::1"},
	// Outside global unicast, let through by netip's IsGlobalUnicast.
	{"::/96", "::808:808"},                  // IPv4-compatible (deprecated)
	{"::ffff:0:0:0/96", "::ffff:0:808:808"}, // IPv4-translated
	{"fec0::/10", "fec0::1"},                // site-local (deprecated)
	{"ff00::/8", "ff02::1"},
	{"4000::/3", "4000::1"},
}

// allowed are global addresses, some next to a denied range.
var allowed = []string{
	"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.128.0.1", "192.0.1.1", "198.20.0.1", "223.255.255.254",
	"::ffff:8.8.8.8", "64:ff9b::808:808", "2606:4700:4700::1111", "2a00:1450:4001:81b::200e", "2001:200::1",
	"2003::1", "3ffe::1",
}

func TestPublic(t *testing.T) {
	t.Parallel()
	for _, tt := range denied {
		if Public(netip.MustParseAddr(tt.addr)) {
			t.Errorf("Public(%s) = true; %s must be refused", tt.addr, tt.prefix)
		}
		if p := netip.MustParsePrefix(tt.prefix); !p.Contains(netip.MustParseAddr(tt.addr)) {
			t.Errorf("row %s: %s is not inside it", tt.prefix, tt.addr)
		}
	}
	for _, a := range allowed {
		if !Public(netip.MustParseAddr(a)) {
			t.Errorf("Public(%s) = false, want true (global)", a)
		}
	}
	if Public(netip.MustParseAddr("fe80::1%eth0")) || Public(netip.Addr{}) {
		t.Error("a zoned or invalid address allowed")
	}
}

// Every range the guard refuses has a row in denied: a range added without
// an address to test it fails here.
func TestDeniedRangesHaveRows(t *testing.T) {
	t.Parallel()
	for _, p := range deniedRanges {
		found := false
		for _, tt := range denied {
			if p.Contains(netip.MustParseAddr(tt.addr)) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s has no address in the test table", p)
		}
	}
}

// The dial-time check refuses what resolution returned now, whatever the
// name resolved to at create time (DNS rebinding), and allows everything
// when private targets are allowed.
func TestGuardControl(t *testing.T) {
	t.Parallel()
	g := &Guard{}
	if err := g.control("tcp", "127.0.0.1:443", nil); err == nil {
		t.Fatal("loopback dialled")
	}
	if err := g.control("tcp", "[fd00::1]:443", nil); err == nil {
		t.Fatal("ULA dialled")
	}
	if err := g.control("tcp", "8.8.8.8:443", nil); err != nil {
		t.Fatal(err)
	}
	if err := (&Guard{AllowPrivate: true}).control("tcp", "127.0.0.1:443", nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Check(context.Background(), "localhost"); err == nil {
		t.Fatal("localhost accepted")
	}
	if err := g.Check(context.Background(), "10.1.2.3"); err == nil {
		t.Fatal("a private literal accepted")
	}
}
