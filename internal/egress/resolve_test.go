package egress

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/intutic/gate-operator/internal/testutil"
)

func recs(ttl time.Duration, addrs ...string) []Record {
	var out []Record
	for _, a := range addrs {
		out = append(out, Record{Addr: netip.MustParseAddr(a), TTL: ttl})
	}
	return out
}

func TestHostAddresses(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	h := &HostAddresses{}
	hosts := []string{"api.example", "cdn.example"}
	if !h.Due(t0) {
		t.Fatal("a fresh cache must be due")
	}

	// TTL 60s for one host, 10s (below the floor) for the other: the interval is the floor.
	r := h.Update(t0, hosts, map[string][]Record{
		"api.example": recs(60*time.Second, "192.0.2.1", "192.0.2.2"),
		"cdn.example": recs(10*time.Second, "2001:db8::1"),
	}, 30*time.Second, 5*time.Minute)
	if got := fmt.Sprint(r.Addresses); got != "[192.0.2.1 192.0.2.2 2001:db8::1]" {
		t.Fatalf("addresses %s", got)
	}
	if !r.Next.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("next %v, want the 30s floor", r.Next)
	}
	if h.Due(t0.Add(29*time.Second)) || !h.Due(t0.Add(30*time.Second)) {
		t.Fatal("Due does not follow Next")
	}

	// The record set rotates: 192.0.2.2 is gone, .3 appears. .2 stays for one more window.
	t1 := t0.Add(30 * time.Second)
	r = h.Update(t1, hosts, map[string][]Record{
		"api.example": recs(600*time.Second, "192.0.2.1", "192.0.2.3"),
		"cdn.example": recs(600*time.Second, "2001:db8::1"),
	}, 30*time.Second, 5*time.Minute)
	if got := fmt.Sprint(r.Addresses); got != "[192.0.2.1 192.0.2.2 192.0.2.3 2001:db8::1]" {
		t.Fatalf("after rotation: %s", got)
	}
	if got := fmt.Sprint(r.Hosts); got != "map[api.example:[192.0.2.1 192.0.2.2 192.0.2.3] cdn.example:[2001:db8::1]]" {
		t.Fatalf("by host after rotation: %s", got)
	}
	if !r.Next.Equal(t1.Add(5 * time.Minute)) {
		t.Fatalf("next %v, want the 5m cap", r.Next)
	}

	// A window later .2 has aged out; cdn.example fails to resolve and keeps its address for
	// the window, then is unresolved.
	t2 := t1.Add(5 * time.Minute)
	r = h.Update(t2, hosts, map[string][]Record{"api.example": recs(300*time.Second, "192.0.2.1", "192.0.2.3")}, 30*time.Second, 5*time.Minute)
	if got := fmt.Sprint(r.Addresses); got != "[192.0.2.1 192.0.2.3 2001:db8::1]" {
		t.Fatalf("after aging: %s", got)
	}
	t3 := t2.Add(5*time.Minute + time.Second)
	r = h.Update(t3, hosts, map[string][]Record{"api.example": recs(300*time.Second, "192.0.2.1", "192.0.2.3")}, 30*time.Second, 5*time.Minute)
	if fmt.Sprint(r.Unresolved) != "[cdn.example]" || fmt.Sprint(r.Resolved) != "[api.example]" {
		t.Fatalf("resolved %v unresolved %v", r.Resolved, r.Unresolved)
	}

	// A host removed from the spec contributes nothing at once.
	r = h.Update(t3.Add(time.Minute), []string{"cdn.example"}, nil, 30*time.Second, 5*time.Minute)
	if len(r.Addresses) != 0 || fmt.Sprint(r.Unresolved) != "[cdn.example]" {
		t.Fatalf("after removal: %+v", r)
	}
}

// TestDNSResolver runs the real resolver against a DNS server on loopback, found through a
// resolv.conf, and checks A, AAAA, CNAME TTLs and NXDOMAIN.
func TestDNSResolver(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		q := req.Question[0]
		switch q.Name {
		case "api.example.":
			switch q.Qtype {
			case dns.TypeA:
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 120}, A: net.ParseIP("192.0.2.10")})
			case dns.TypeAAAA:
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 90}, AAAA: net.ParseIP("2001:db8::10")})
			}
		case "www.example.":
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer,
					&dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 40}, Target: "edge.example."},
					&dns.A{Hdr: dns.RR_Header{Name: "edge.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600}, A: net.ParseIP("192.0.2.20")})
			}
		default:
			m.Rcode = dns.RcodeNameError
		}
		if err := w.WriteMsg(m); err != nil {
			t.Errorf("dns answer to %s: %v", q.Name, err)
		}
	})
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: mux, NotifyStartedFunc: func() { close(started) }}
	served := make(chan error, 1)
	go func() { served <- srv.ActivateAndServe() }()
	select {
	case <-started:
	case err := <-served:
		t.Fatalf("dns server: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("dns server shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("dns server: %v", err)
		}
	})

	host, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver "+host+"\noptions timeout:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := NewDNSResolver(conf)
	if err != nil {
		t.Fatal(err)
	}
	r.Servers = []string{net.JoinHostPort(host, port)} // resolv.conf cannot name a port

	ctx := testutil.Context(t, 10*time.Second)
	got, err := r.Resolve(ctx, "api.example")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[{192.0.2.10 2m0s} {2001:db8::10 1m30s}]" {
		t.Fatalf("api.example: %v", got)
	}
	got, err = r.Resolve(ctx, "www.example")
	if err != nil || fmt.Sprint(got) != "[{192.0.2.20 40s}]" {
		t.Fatalf("www.example via CNAME: %v %v", got, err)
	}
	if got, err := r.Resolve(ctx, "nowhere.example"); err == nil || len(got) != 0 {
		t.Fatalf("nowhere.example: %v %v", got, err)
	}
}
