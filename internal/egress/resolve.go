package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/miekg/dns"
)

// Resolution of allowedHosts. The controller resolves in its reconcile and requeues at the
// records' TTL; nothing here starts a goroutine.

// Record is one resolved address and how long it may be cached.
type Record struct {
	Addr netip.Addr
	TTL  time.Duration
}

// Resolver resolves a host to its A and AAAA records. Tests inject their own.
type Resolver interface {
	Resolve(ctx context.Context, host string) ([]Record, error)
}

// Re-resolution bounds: records are re-resolved at their lowest TTL, but never more often than
// every MinResolveInterval nor less often than every MaxResolveInterval.
const (
	DefaultMinResolveInterval = 30 * time.Second
	DefaultMaxResolveInterval = 5 * time.Minute
)

// HostAddresses remembers when each address of each host was last seen, so an address that
// drops out of a rotating record set stays allowed for one more resolve window (until the
// resolution after the one that missed it) instead of flapping in and out of the
// NetworkPolicy. It is not safe for concurrent use.
type HostAddresses struct {
	seen map[string]map[netip.Addr]time.Time
	// next is when the hosts are due to be resolved again; prev when they last were.
	next, prev time.Time
}

// Due reports whether the hosts should be resolved at now.
func (h *HostAddresses) Due(now time.Time) bool { return h.seen == nil || !now.Before(h.next) }

// Next is when the hosts are due again.
func (h *HostAddresses) Next() time.Time { return h.next }

// Resolution is the outcome of resolving a policy's hosts.
type Resolution struct {
	// Addresses allowed now: seen in this resolution or within the last window.
	Addresses []netip.Addr
	// Hosts are the same addresses by host, sorted, for RenderEgress to name the host of an
	// address it rejects.
	Hosts map[string][]netip.Addr
	// Resolved and Unresolved hosts, sorted.
	Resolved, Unresolved []string
	// Next is when to resolve again.
	Next time.Time
}

// Update records one resolution of hosts at now and returns what to enforce. A host whose
// lookup failed or returned nothing keeps the addresses seen within the last window (they
// age out after it) and counts as unresolved once it has none.
func (h *HostAddresses) Update(now time.Time, hosts []string, results map[string][]Record, minInterval, maxInterval time.Duration) Resolution {
	if h.seen == nil {
		h.seen = map[string]map[netip.Addr]time.Time{}
	}
	interval := maxInterval
	for _, host := range hosts {
		for _, rec := range results[host] {
			if h.seen[host] == nil {
				h.seen[host] = map[netip.Addr]time.Time{}
			}
			h.seen[host][rec.Addr.Unmap()] = now
			interval = min(interval, rec.TTL)
		}
	}
	interval = max(interval, minInterval)
	// An address survives when it was seen in this resolution or the previous one. Counting
	// resolutions, not seconds, keeps a late requeue from dropping it early.
	keepSince := h.prev
	h.prev, h.next = now, now.Add(interval)

	res := Resolution{Next: h.next, Hosts: map[string][]netip.Addr{}}
	for host := range h.seen {
		if !slices.Contains(hosts, host) {
			delete(h.seen, host) // removed from the spec
		}
	}
	for _, host := range hosts {
		for a, at := range h.seen[host] {
			if at.Before(keepSince) {
				delete(h.seen[host], a)
				continue
			}
			res.Addresses = append(res.Addresses, a)
			res.Hosts[host] = append(res.Hosts[host], a)
		}
		if len(h.seen[host]) > 0 {
			slices.SortFunc(res.Hosts[host], netip.Addr.Compare)
			res.Resolved = append(res.Resolved, host)
		} else {
			res.Unresolved = append(res.Unresolved, host)
		}
	}
	slices.SortFunc(res.Addresses, netip.Addr.Compare)
	res.Addresses = slices.Compact(res.Addresses)
	slices.Sort(res.Resolved)
	slices.Sort(res.Unresolved)
	return res
}

// DNSResolver queries the nameservers of a resolv.conf for A and AAAA records, so the TTLs
// are the records' own (the Go resolver does not report them).
type DNSResolver struct {
	Servers []string // host:port
	Timeout time.Duration
}

// NewDNSResolver reads the nameservers from a resolv.conf file (usually /etc/resolv.conf).
func NewDNSResolver(resolvConf string) (*DNSResolver, error) {
	cfg, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", resolvConf, err)
	}
	if len(cfg.Servers) == 0 {
		return nil, fmt.Errorf("%s lists no nameserver", resolvConf)
	}
	r := &DNSResolver{Timeout: time.Duration(max(cfg.Timeout, 1)) * time.Second}
	for _, s := range cfg.Servers {
		r.Servers = append(r.Servers, net.JoinHostPort(s, cfg.Port))
	}
	return r, nil
}

// Resolve returns the A and AAAA records of host, with the lowest TTL along any CNAME chain.
func (r *DNSResolver) Resolve(ctx context.Context, host string) ([]Record, error) {
	var out []Record
	var errs []error
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		recs, err := r.query(ctx, host, qtype)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, recs...)
	}
	if len(out) > 0 {
		return out, nil
	}
	return nil, errors.Join(errs...)
}

func (r *DNSResolver) query(ctx context.Context, host string, qtype uint16) ([]Record, error) {
	msg := new(dns.Msg)
	msg.SetQuestion(dns.Fqdn(host), qtype)
	msg.RecursionDesired = true
	client := &dns.Client{Timeout: r.Timeout}
	var lastErr error
	for _, server := range r.Servers {
		in, _, err := client.ExchangeContext(ctx, msg, server)
		if err == nil && in.Truncated {
			tcp := &dns.Client{Net: "tcp", Timeout: r.Timeout}
			in, _, err = tcp.ExchangeContext(ctx, msg, server)
		}
		if err != nil {
			lastErr = err
			continue
		}
		if in.Rcode != dns.RcodeSuccess {
			return nil, fmt.Errorf("%s %s: %s", host, dns.TypeToString[qtype], dns.RcodeToString[in.Rcode])
		}
		chainTTL := uint32(DefaultMaxResolveInterval / time.Second)
		for _, rr := range in.Answer {
			if c, ok := rr.(*dns.CNAME); ok {
				chainTTL = min(chainTTL, c.Hdr.Ttl)
			}
		}
		var out []Record
		for _, rr := range in.Answer {
			var ip net.IP
			var ttl uint32
			switch v := rr.(type) {
			case *dns.A:
				ip, ttl = v.A, v.Hdr.Ttl
			case *dns.AAAA:
				ip, ttl = v.AAAA, v.Hdr.Ttl
			default:
				continue
			}
			if a, ok := netip.AddrFromSlice(ip); ok {
				out = append(out, Record{Addr: a.Unmap(), TTL: time.Duration(min(ttl, chainTTL)) * time.Second})
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s %s: %w", host, dns.TypeToString[qtype], lastErr)
}
