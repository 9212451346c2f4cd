package domains_test

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// zone is an in-test authoritative DNS server on 127.0.0.1 (UDP and TCP on
// one port) whose records a test changes as it goes.
type zone struct {
	addr string

	mu       sync.Mutex
	rrs      map[string][]dns.RR // by lower-case FQDN
	truncate bool                // answer UDP with TC set and no records
	servfail bool                // answer everything with SERVFAIL
	tcp      int                 // queries that came over TCP
}

func newZone(t *testing.T) *zone {
	t.Helper()
	z := &zone{rrs: map[string][]dns.RR{}}
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
	z.addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: z}, {Listener: ln, Handler: z}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return z
}

// add publishes records given in zone-file syntax.
func (z *zone) add(t *testing.T, lines ...string) {
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

// remove withdraws every record of name.
func (z *zone) remove(name string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	delete(z.rrs, strings.ToLower(dns.Fqdn(name)))
}

func (z *zone) set(f func(z *zone)) {
	z.mu.Lock()
	defer z.mu.Unlock()
	f(z)
}

func (z *zone) tcpQueries() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.tcp
}

func (z *zone) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
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
