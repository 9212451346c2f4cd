package domains

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Resolver looks records up in DNS; *Checker is the real one.
type Resolver interface {
	Lookup(ctx context.Context, records []DNSRecord) []Found
}

// Checker asks one DNS server (DNS_RESOLVER) for records: UDP with EDNS0,
// again over TCP when the answer is truncated.
type Checker struct {
	// Server is host:port; empty means the first nameserver of
	// /etc/resolv.conf.
	Server string
	// Timeout bounds each query; zero means DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout bounds one DNS query when Checker.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// Lookup looks all records up at once; the result is in record order.
func (c *Checker) Lookup(ctx context.Context, records []DNSRecord) []Found {
	out := make([]Found, len(records))
	server, err := c.server()
	var wg sync.WaitGroup
	for i, r := range records {
		out[i].Record = r
		if err != nil {
			out[i].Err = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Present, out[i].Err = c.lookup(ctx, server, r)
		}()
	}
	wg.Wait()
	return out
}

func (c *Checker) server() (string, error) {
	if c.Server != "" {
		return c.Server, nil
	}
	cfg, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil || len(cfg.Servers) == 0 {
		return "", errors.New("no DNS_RESOLVER and no nameserver in /etc/resolv.conf")
	}
	return net.JoinHostPort(cfg.Servers[0], cfg.Port), nil
}

// lookup reports whether the server has record r. A TXT record matches when
// one of the name's TXT records, its strings concatenated, is the value; a
// CNAME when the name's target is the value. Names compare
// case-insensitively and with or without their trailing dot. The answer may
// reach the record through CNAMEs (a delegated _tidings name).
func (c *Checker) lookup(ctx context.Context, server string, r DNSRecord) (bool, error) {
	qtype := dns.TypeTXT
	if r.Type == TypeCNAME {
		qtype = dns.TypeCNAME
	}
	resp, err := c.exchange(ctx, server, r.Name, qtype)
	if err != nil {
		return false, err
	}
	switch resp.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
	default:
		return false, fmt.Errorf("DNS answered %s", dns.RcodeToString[resp.Rcode])
	}
	owners := map[string]bool{canonical(r.Name): true}
	for changed := qtype == dns.TypeTXT; changed; { // follow CNAMEs to the TXT
		changed = false
		for _, rr := range resp.Answer {
			if cn, ok := rr.(*dns.CNAME); ok && owners[canonical(cn.Hdr.Name)] && !owners[canonical(cn.Target)] {
				owners[canonical(cn.Target)], changed = true, true
			}
		}
	}
	for _, rr := range resp.Answer {
		if !owners[canonical(rr.Header().Name)] {
			continue
		}
		switch v := rr.(type) {
		case *dns.TXT:
			if qtype == dns.TypeTXT && strings.Join(v.Txt, "") == r.Value {
				return true, nil
			}
		case *dns.CNAME:
			if qtype == dns.TypeCNAME && canonical(v.Target) == canonical(r.Value) {
				return true, nil
			}
		}
	}
	return false, nil
}

// exchange sends one query over UDP and repeats it over TCP when the answer
// is truncated.
func (c *Checker) exchange(ctx context.Context, server, name string, qtype uint16) (*dns.Msg, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, false) // the DNS Flag Day 2020 size: no fragmentation
	cl := &dns.Client{Net: "udp", Timeout: timeout}
	resp, _, err := cl.ExchangeContext(ctx, m, server)
	if err == nil && resp.Truncated {
		cl.Net = "tcp"
		resp, _, err = cl.ExchangeContext(ctx, m, server)
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// canonical is a name as compared: lower-case, fully qualified.
func canonical(name string) string { return strings.ToLower(dns.Fqdn(name)) }
