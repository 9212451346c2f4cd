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

// ErrPort is a webhook target on a port outside AllowedPort's.
var ErrPort = errors.New("port is not allowed (80, 443 or 1024-65535)")

// globalV6 is IPv6 global unicast, the only IPv6 space IANA allocates to
// the internet (its IPv6 address space registry): every other IPv6
// address (loopback, IPv4-compatible ::/96, IPv4-translated
// ::ffff:0:0:0/96, 100::/64, 5f00::/16, unique-local, link-local,
// site-local fec0::/10, multicast, the local-use NAT64 64:ff9b:1::/48...)
// is refused without being listed.
var globalV6 = netip.MustParsePrefix("2000::/3")

// nat64 is the well-known NAT64 prefix (RFC 6052): its address is judged
// as the IPv4 address it carries, which a translator may only map to a
// global one, so an IPv6-only worker behind DNS64 still reaches an
// IPv4-only receiver.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// deniedRanges are refused inside what is otherwise global: every entry of
// the IANA IPv4 special-purpose address registry (the whole of IPv4 space
// is judged by this list alone: no netip predicate stands in for a row),
// multicast, and the entries of the IPv6 special-purpose registry that lie
// inside 2000::/3. Entries the registry marks globally reachable (AS112,
// AMT, TURN and PCP anycast) are refused too: no webhook receiver lives
// there. 6to4 (2002::/16) is refused rather than judged by the IPv4
// address it carries: that address is the relay of the destination site,
// not the host, and 6to4 relays are deprecated (RFC 7526).
// guard_test.go has an address inside each.
var deniedRanges = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network"
	netip.MustParsePrefix("10.0.0.0/8"),         // private (RFC 1918)
	netip.MustParsePrefix("100.64.0.0/10"),      // shared address space (CGNAT)
	netip.MustParsePrefix("127.0.0.0/8"),        // loopback
	netip.MustParsePrefix("169.254.0.0/16"),     // link-local (cloud metadata)
	netip.MustParsePrefix("172.16.0.0/12"),      // private
	netip.MustParsePrefix("192.0.0.0/24"),       // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),       // documentation
	netip.MustParsePrefix("192.31.196.0/24"),    // AS112
	netip.MustParsePrefix("192.52.193.0/24"),    // AMT
	netip.MustParsePrefix("192.88.99.0/24"),     // 6to4 relay anycast (deprecated)
	netip.MustParsePrefix("192.168.0.0/16"),     // private
	netip.MustParsePrefix("192.175.48.0/24"),    // AS112 direct delegation
	netip.MustParsePrefix("198.18.0.0/15"),      // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"),    // documentation
	netip.MustParsePrefix("203.0.113.0/24"),     // documentation
	netip.MustParsePrefix("224.0.0.0/4"),        // multicast
	netip.MustParsePrefix("240.0.0.0/4"),        // reserved
	netip.MustParsePrefix("255.255.255.255/32"), // limited broadcast
	netip.MustParsePrefix("2001::/23"),          // IETF protocol assignments (Teredo, ORCHID, benchmarking...)
	netip.MustParsePrefix("2001:db8::/32"),      // documentation
	netip.MustParsePrefix("2002::/16"),          // 6to4
	netip.MustParsePrefix("2620:4f:8000::/48"),  // AS112 direct delegation
	netip.MustParsePrefix("3fff::/20"),          // documentation
}

// Public reports whether a is an address a webhook may reach: by an
// allowlist, global unicast (IPv4 outside every special-purpose range,
// IPv6 inside 2000::/3 and outside them) and nothing else. IPv4-mapped
// IPv6 addresses and those of the well-known NAT64 prefix are judged as
// the IPv4 address they carry; an address with a zone is refused.
func Public(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	a = a.Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	if a.Is6() && !globalV6.Contains(a) {
		return false
	}
	for _, p := range deniedRanges {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// AllowedPort reports whether a webhook may be sent to port p: the HTTP
// and HTTPS ports and the unprivileged ones. Below 1024 live the services
// (SSH, SMTP, DNS...) whose banner a failed delivery would otherwise
// answer with.
func AllowedPort(p uint16) bool {
	return p == 80 || p == 443 || p >= 1024
}

// Guard decides which addresses webhooks may reach. With AllowPrivate
// (WEBHOOK_ALLOW_PRIVATE_TARGETS, development and tests) every address is
// allowed; the port rule holds either way.
type Guard struct {
	AllowPrivate bool
	// Resolver looks hosts up, at create time and as deliveries dial;
	// nil: net.DefaultResolver.
	Resolver *net.Resolver
}

// control runs on every connection the delivery client opens, with the
// address actually being dialled, after DNS resolution: a name that
// resolved to a public address when the endpoint was created and to a
// private one now (DNS rebinding) is refused here, as is a port outside
// AllowedPort (an endpoint stored before the rule).
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook target: %w", ErrPrivateTarget)
	}
	if !AllowedPort(ap.Port()) {
		return ErrPort
	}
	if !g.AllowPrivate && !Public(ap.Addr()) {
		return ErrPrivateTarget
	}
	return nil
}

// errNoHost is a host name that does not resolve.
var errNoHost = errors.New("the host name does not resolve")

// Check resolves host and refuses it when any of its addresses is not
// public (create and update time; every delivery checks again as it
// dials). Its errors name no address: neither the resolver's nor the
// host's.
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
		return errNoHost
	}
	for _, a := range addrs {
		if !Public(a) {
			return ErrPrivateTarget
		}
	}
	return nil
}
