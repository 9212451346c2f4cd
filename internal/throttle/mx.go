package throttle

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"
)

// MX lookups are cached per recipient domain for the answer's TTL, within
// these bounds: a short TTL would put a DNS query in front of every batch,
// a long one would keep a moved domain in its old group for days.
const (
	minTTL = time.Minute
	maxTTL = 6 * time.Hour
	// failTTL is how long a failed lookup keeps its domain in no group
	// before it is asked again.
	failTTL = time.Minute
	// DefaultCacheSize bounds the cache; past it, entries are dropped at
	// random (a map's iteration order), which keeps the bound without the
	// bookkeeping of an LRU.
	DefaultCacheSize = 100_000
	// lookupTimeout bounds one MX query: a slow resolver delays a batch's
	// first message to a new domain by at most this.
	lookupTimeout = 2 * time.Second
)

// MX answers which destination group a recipient domain belongs to, by
// its most preferred MX host (DNS_RESOLVER), cached.
type MX struct {
	// Server is the DNS server's host:port; empty: /etc/resolv.conf's first.
	Server string
	Limits []Limit
	// Size bounds the cache (0: DefaultCacheSize).
	Size int
	Now  func() time.Time

	mu      sync.Mutex
	entries map[string]mxEntry
	flight  singleflight.Group
	// lookups counts DNS queries (tests read it).
	lookups int
}

type mxEntry struct {
	group   string
	expires time.Time
}

func (m *MX) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Group is the destination group of domain ("" for none: no limit names
// its MX host, or the lookup failed, in which case it is asked again after
// a minute). Concurrent callers for one domain share one lookup.
func (m *MX) Group(ctx context.Context, domain string) string {
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	if domain == "" || len(m.Limits) == 0 {
		return ""
	}
	now := m.now()
	m.mu.Lock()
	e, ok := m.entries[domain]
	m.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.group
	}
	v, _, _ := m.flight.Do(domain, func() (any, error) {
		group, ttl := m.lookup(ctx, domain)
		m.store(domain, mxEntry{group: group, expires: m.now().Add(ttl)})
		return group, nil
	})
	return v.(string)
}

func (m *MX) store(domain string, e mxEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[string]mxEntry{}
	}
	size := m.Size
	if size <= 0 {
		size = DefaultCacheSize
	}
	for k := range m.entries {
		if len(m.entries) < size {
			break
		}
		delete(m.entries, k)
	}
	m.entries[domain] = e
}

// lookup asks for domain's MX records and returns its group and how long
// the answer holds. A domain with no MX record (mail goes to its A record,
// RFC 5321 5.1) is judged by its own name.
func (m *MX) lookup(ctx context.Context, domain string) (string, time.Duration) {
	m.mu.Lock()
	m.lookups++
	m.mu.Unlock()
	server, err := m.server()
	if err != nil {
		return "", failTTL
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(domain), dns.TypeMX)
	q.SetEdns0(1232, false)
	cl := &dns.Client{Net: "udp", Timeout: lookupTimeout}
	resp, _, err := cl.ExchangeContext(ctx, q, server)
	if err == nil && resp.Truncated {
		cl.Net = "tcp"
		resp, _, err = cl.ExchangeContext(ctx, q, server)
	}
	if err != nil || (resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError) {
		return "", failTTL
	}
	if resp.Rcode == dns.RcodeNameError {
		return "", minTTL // no such domain: nothing to send to, asked again soon
	}
	var mxs []*dns.MX
	ttl := maxTTL
	for _, rr := range resp.Answer {
		if mx, ok := rr.(*dns.MX); ok {
			mxs = append(mxs, mx)
			ttl = min(ttl, time.Duration(mx.Hdr.Ttl)*time.Second)
		}
	}
	ttl = max(ttl, minTTL)
	if len(mxs) == 0 {
		return groupOf(m.Limits, domain), ttl
	}
	best := slices.MinFunc(mxs, func(a, b *dns.MX) int {
		if a.Preference != b.Preference {
			return int(a.Preference) - int(b.Preference)
		}
		return strings.Compare(strings.ToLower(a.Mx), strings.ToLower(b.Mx))
	})
	return groupOf(m.Limits, best.Mx), ttl
}

func (m *MX) server() (string, error) {
	if m.Server != "" {
		return m.Server, nil
	}
	cfg, err := dns.ClientConfigFromFile("/etc/resolv.conf")
	if err != nil || len(cfg.Servers) == 0 {
		return "", errors.New("no DNS_RESOLVER and no nameserver in /etc/resolv.conf")
	}
	return net.JoinHostPort(cfg.Servers[0], cfg.Port), nil
}

// Lookups is how many DNS queries the cache has made.
func (m *MX) Lookups() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lookups
}
