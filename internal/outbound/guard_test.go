package outbound

import (
	"context"
	"net/netip"
	"testing"
)

// Each address class of the issue, and the public addresses that must
// pass.
func TestPublic(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700:4700::1111": true, "93.184.216.34": true,
		"127.0.0.1": false, "127.1.2.3": false, "::1": false, // loopback
		"10.0.0.1": false, "172.16.5.4": false, "192.168.1.1": false, // RFC 1918
		"fd00::1": false, "fc12::3": false, // RFC 4193
		"169.254.169.254": false, "fe80::1": false, // link-local (cloud metadata)
		"100.64.0.1": false, "100.127.255.254": false, // CGNAT
		"224.0.0.1": false, "239.1.2.3": false, "ff02::1": false, // multicast
		"0.0.0.0": false, "::": false, // unspecified
		"::ffff:127.0.0.1": false, "::ffff:10.1.1.1": false, "::ffff:8.8.8.8": true, // IPv4-mapped
		"255.255.255.255": false, "240.0.0.1": false, "192.0.2.10": false, "64:ff9b::a00:1": false,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
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
