package testenv

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// DNSZone is an in-test authoritative DNS server on 127.0.0.1 (UDP and TCP
// on one port) whose records a test changes as it goes. Point a
// domains.Checker (or DNS_RESOLVER) at Addr.
type DNSZone struct {
	// Addr is the server's host:port.
	Addr string

	mu       sync.Mutex
	rrs      map[string][]dns.RR // by lower-case FQDN
	truncate bool                // answer UDP with TC set and no records
	servfail bool                // answer everything with SERVFAIL
	tcp      int                 // queries that came over TCP
}

// DNS starts an empty zone, stopped when the test ends. A name it holds no
// record for is NXDOMAIN.
func DNS(t testing.TB) *DNSZone {
	t.Helper()
	z := &DNSZone{rrs: map[string][]dns.RR{}}
	var pc net.PacketConn
	var ln net.Listener
	for attempt := 0; ; attempt++ { // TCP on the port UDP got
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
		if attempt == 10 {
			t.Fatal(err)
		}
	}
	z.Addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: z}, {Listener: ln, Handler: z}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return z
}

// Add publishes records given in zone-file syntax.
func (z *DNSZone) Add(t testing.TB, lines ...string) {
	t.Helper()
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatalf("record %q: %v", l, err)
		}
		k := strings.ToLower(rr.Header().Name)
		z.rrs[k] = append(z.rrs[k], rr)
	}
}

// Publish adds one TXT or CNAME record as a sending domain's DNS records
// list it (type, name, value; names without the trailing dot).
func (z *DNSZone) Publish(t testing.TB, typ, name, value string) {
	t.Helper()
	switch typ {
	case "TXT":
		z.Add(t, fmt.Sprintf("%s. 300 IN TXT %q", name, value))
	case "CNAME":
		z.Add(t, fmt.Sprintf("%s. 300 IN CNAME %s.", name, value))
	default:
		t.Fatalf("record type %q: want TXT or CNAME", typ)
	}
}

// Remove withdraws every record of name.
func (z *DNSZone) Remove(name string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	delete(z.rrs, strings.ToLower(dns.Fqdn(name)))
}

// SetTruncate makes UDP answers truncated (TC set, no records), so that
// clients must ask again over TCP.
func (z *DNSZone) SetTruncate(on bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.truncate = on
}

// SetServFail makes every answer SERVFAIL: a resolver that is reachable but
// cannot answer.
func (z *DNSZone) SetServFail(on bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.servfail = on
}

// TCPQueries counts the queries that came over TCP.
func (z *DNSZone) TCPQueries() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.tcp
}

// ServeDNS answers one query from the zone's records.
func (z *DNSZone) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	z.mu.Lock()
	defer z.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	overTCP := w.LocalAddr().Network() == "tcp"
	if overTCP {
		z.tcp++
	}
	q := req.Question[0]
	switch {
	case z.servfail:
		m.Rcode = dns.RcodeServerFailure
	case z.truncate && !overTCP:
		m.Truncated = true
	default:
		name := strings.ToLower(q.Name)
		rrs, ok := z.rrs[name]
		if !ok {
			m.Rcode = dns.RcodeNameError
		}
		for _, rr := range rrs {
			if rr.Header().Rrtype == q.Qtype {
				m.Answer = append(m.Answer, rr)
			} else if cn, isCNAME := rr.(*dns.CNAME); isCNAME {
				// A resolver answers a TXT question at a CNAME with
				// the chain and the target's records.
				m.Answer = append(m.Answer, cn)
				for _, t := range z.rrs[strings.ToLower(cn.Target)] {
					if t.Header().Rrtype == q.Qtype {
						m.Answer = append(m.Answer, t)
					}
				}
			}
		}
	}
	_ = w.WriteMsg(m)
}
