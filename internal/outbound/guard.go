package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// ErrPrivateTarget is a webhook target whose address is not public.
var ErrPrivateTarget = errors.New("address is not a public internet address")

// notPublic lists the ranges that are not public beyond what netip's
// predicates cover: shared address space (CGNAT), the IETF protocol
// block, benchmarking, documentation, reserved and NAT64 ranges.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("100::/64"),
}

// Public reports whether a is an address a webhook may reach: a global
// unicast address (an allowlist: anything else is refused) outside the
// private (RFC 1918, RFC 4193), shared and special ranges. IPv4-mapped
// IPv6 addresses are judged as the IPv4 address they carry.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() ||
		a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast() || a.IsLinkLocalMulticast() {
		return false
	}
	if a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Guard decides which addresses webhooks may reach. With AllowPrivate
// (WEBHOOK_ALLOW_PRIVATE_TARGETS, development and tests) every address is
// allowed.
type Guard struct {
	AllowPrivate bool
	// Resolver looks hosts up at create time; nil: net.DefaultResolver.
	Resolver *net.Resolver
}

// control runs on every connection the delivery client opens, with the
// address actually being dialled, after DNS resolution: a name that
// resolved to a public address when the endpoint was created and to a
// private one now (DNS rebinding) is refused here.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook target %s: %w", address, err)
	}
	if !Public(ap.Addr()) {
		return fmt.Errorf("webhook target %s: %w", ap.Addr(), ErrPrivateTarget)
	}
	return nil
}

// Check resolves host and refuses it when any of its addresses is not
// public (create and update time; every delivery checks again as it
// dials).
func (g *Guard) Check(ctx context.Context, host string) error {
	if g.AllowPrivate {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !Public(a) {
			return ErrPrivateTarget
		}
		return nil
	}
	r := g.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("host %s does not resolve: %w", host, err)
	}
	for _, a := range addrs {
		if !Public(a) {
			return ErrPrivateTarget
		}
	}
	return nil
}
